package meta

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func delFamCmd(table, fam string) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteFamily{DeleteFamily: &spb.MetaDeleteFamily{Table: table, Family: fam}}}
}

func gcCmd(table, fam string, r *pb.GcRule) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_SetGcRule{SetGcRule: &spb.MetaSetGCRule{Table: table, Family: fam, GcRule: r}}}
}

func maxVer(n int32) *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_MaxNumVersions{MaxNumVersions: n}}
}

func union(rs ...*pb.GcRule) *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_Union_{Union: &pb.GcRule_Union{Rules: rs}}}
}

func inter(rs ...*pb.GcRule) *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_Intersection_{Intersection: &pb.GcRule_Intersection{Rules: rs}}}
}

// TestSchemaChanges: every change bumps the schema version; SetGCRule
// replaces the legacy policy fields; DeleteFamily removes the family.
func TestSchemaChanges(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t1"))
	schema := func() *pb.TableSchema {
		var s *pb.TableSchema
		if err := f.View(func(r *Reader) (err error) { s, err = r.Table("t1"); return err }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if v := schema().Version; v != 1 {
		t.Fatalf("version %d at creation, want 1", v)
	}
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t1",
		Family: &pb.FamilySpec{Name: "f2", MaxVersions: 3, MaxAgeMicros: 10}}}})
	rule := union(inter(maxVer(2), &pb.GcRule{Rule: &pb.GcRule_MaxAgeMicros{MaxAgeMicros: 1000}}), maxVer(5))
	f.mustApply(gcCmd("t1", "f2", rule))
	s := schema()
	if s.Version != 3 || len(s.Families) != 2 {
		t.Fatalf("after add and set: %v", s)
	}
	got := s.Families[1]
	if got.MaxVersions != 0 || got.MaxAgeMicros != 0 || !proto.Equal(got.GcRule, rule) {
		t.Fatalf("family after SetGCRule: %v", got)
	}
	f.mustApply(delFamCmd("t1", "f2"))
	if s := schema(); s.Version != 4 || len(s.Families) != 1 || s.Families[0].Name != "cf" {
		t.Fatalf("after delete: %v", s)
	}
	// The last family goes too (Cloud Bigtable allows a table without).
	f.mustApply(delFamCmd("t1", "cf"))
	if s := schema(); s.Version != 5 || len(s.Families) != 0 {
		t.Fatalf("after deleting the last family: %v", s)
	}
	// A table created again under the name has a higher version than any
	// its namesake had.
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteTable{DeleteTable: &spb.MetaDeleteTable{Name: "t1"}}})
	f.mustApply(createCmd("t1"))
	if v := schema().Version; v != 6 {
		t.Fatalf("version %d after creating the table again, want 6", v)
	}
}

func TestSchemaChangeErrors(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t1"))
	deep := &pb.GcRule{}
	for range limits.MaxGCRuleDepth {
		deep = union(deep)
	}
	tests := []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"delete unknown family", delFamCmd("t1", "nope"), codes.NotFound},
		{"delete family of unknown table", delFamCmd("nope", "cf"), codes.NotFound},
		{"rule of unknown family", gcCmd("t1", "nope", maxVer(1)), codes.InvalidArgument},
		{"max versions 0", gcCmd("t1", "cf", maxVer(0)), codes.InvalidArgument},
		{"nested max versions -1", gcCmd("t1", "cf", inter(union(maxVer(1), maxVer(-1)))), codes.InvalidArgument},
		{"max age 0", gcCmd("t1", "cf", &pb.GcRule{Rule: &pb.GcRule_MaxAgeMicros{}}), codes.InvalidArgument},
		{"too deep", gcCmd("t1", "cf", deep), codes.InvalidArgument},
		{"bad rule in AddFamily", &spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t1",
			Family: &pb.FamilySpec{Name: "f", GcRule: maxVer(0)}}}}, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.dump()
			res := f.apply(tc.cmd)
			if got := apierr.CodeOf(res.Err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, res.Err, tc.want)
			}
			if after := f.dump(); after != before {
				t.Errorf("a refused command changed the state")
			}
		})
	}
}

// TestSchemaGranularity: a table's timestamp granularity is stored with its
// schema and kept by every schema change; metadata written before the
// field existed reads as unspecified (microseconds); an unknown value is
// refused.
func TestSchemaGranularity(t *testing.T) {
	f := openTestFSM(t)
	schema := func(name string) *pb.TableSchema {
		var s *pb.TableSchema
		if err := f.View(func(r *Reader) (err error) { s, err = r.Table(name); return err }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	millis := createCmd("ms")
	millis.GetCreateTable().Schema.Granularity = pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS
	f.mustApply(millis)
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "ms",
		Family: &pb.FamilySpec{Name: "f2"}}}})
	f.mustApply(gcCmd("ms", "f2", maxVer(2)))
	f.mustApply(delFamCmd("ms", "f2"))
	if g := schema("ms").Granularity; g != pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS {
		t.Fatalf("granularity after schema changes: %v, want MILLIS", g)
	}

	f.mustApply(createCmd("old"))
	if g := schema("old").Granularity; g != pb.TimestampGranularity_TIMESTAMP_GRANULARITY_UNSPECIFIED {
		t.Fatalf("granularity of a table created without one: %v", g)
	}
	// A schema encoded before the field existed (fields 1 to 4) decodes
	// with the zero value, which is microseconds.
	old := &pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}, Version: 3, PurgingFamilies: []string{"x"}}
	b, err := proto.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var got pb.TableSchema
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Granularity != pb.TimestampGranularity_TIMESTAMP_GRANULARITY_UNSPECIFIED || !proto.Equal(&got, old) {
		t.Fatalf("old schema decodes as %v", &got)
	}

	bad := &pb.TableSchema{Name: "t", Granularity: 7}
	if err := ValidateSchema(bad); apierr.CodeOf(err) != codes.InvalidArgument {
		t.Fatalf("granularity 7: %v, want InvalidArgument", err)
	}
}

// TestAggregateFamilies: a family's aggregate is stored with the schema,
// at creation and by AddFamily, survives a SetGCRule and a compression
// change (no command changes it), and an aggregate this build does not
// know is refused.
func TestAggregateFamilies(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_CreateTable{CreateTable: &spb.MetaCreateTable{
		Schema: &pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "sum", Aggregate: pb.Aggregate_AGGREGATE_INT64_SUM}}}}}})
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t",
		Family: &pb.FamilySpec{Name: "max", Aggregate: pb.Aggregate_AGGREGATE_INT64_MAX}}}})
	f.mustApply(gcCmd("t", "sum", maxVer(1)))
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_SetCompression{SetCompression: &spb.MetaSetCompression{Table: "t", Family: "max",
		Compression: pb.Compression_COMPRESSION_ZSTD}}})
	var s *pb.TableSchema
	if err := f.View(func(r *Reader) (err error) { s, err = r.Table("t"); return err }); err != nil {
		t.Fatal(err)
	}
	got := map[string]pb.Aggregate{}
	for _, fam := range s.Families {
		got[fam.Name] = fam.Aggregate
	}
	if got["sum"] != pb.Aggregate_AGGREGATE_INT64_SUM || got["max"] != pb.Aggregate_AGGREGATE_INT64_MAX {
		t.Fatalf("aggregates %v, want sum and max kept", got)
	}
	res := f.apply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t",
		Family: &pb.FamilySpec{Name: "x", Aggregate: pb.Aggregate(42)}}}})
	if apierr.CodeOf(res.Err) != codes.InvalidArgument {
		t.Fatalf("an unknown aggregate: %v, want InvalidArgument", res.Err)
	}
}
