package meta

import (
	"testing"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func compCmd(table, fam string, c pb.Compression) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_SetCompression{SetCompression: &spb.MetaSetCompression{Table: table, Family: fam, Compression: c}}}
}

// TestSetCompression: SetCompression replaces one family's compression and
// bumps the schema version; a family created without it has the default
// (unspecified); unknown values and families are refused without a change.
func TestSetCompression(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t1"))
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t1",
		Family: &pb.FamilySpec{Name: "z", Compression: pb.Compression_COMPRESSION_ZSTD}}}})
	f.mustApply(compCmd("t1", "cf", pb.Compression_COMPRESSION_NONE))
	var s *pb.TableSchema
	if err := f.View(func(r *Reader) (err error) { s, err = r.Table("t1"); return err }); err != nil {
		t.Fatal(err)
	}
	got := map[string]pb.Compression{}
	for _, fam := range s.Families {
		got[fam.Name] = fam.Compression
	}
	if s.Version != 3 || got["cf"] != pb.Compression_COMPRESSION_NONE || got["z"] != pb.Compression_COMPRESSION_ZSTD || s.Families[0].MaxVersions != 3 {
		t.Fatalf("schema after AddFamily(zstd) and SetCompression(cf, none): %v", s)
	}
	for _, tc := range []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"unknown family", compCmd("t1", "nope", pb.Compression_COMPRESSION_ZSTD), codes.InvalidArgument},
		{"unknown table", compCmd("nope", "cf", pb.Compression_COMPRESSION_ZSTD), codes.NotFound},
		{"unknown value", compCmd("t1", "cf", pb.Compression(7)), codes.InvalidArgument},
		{"unknown value in AddFamily", &spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t1",
			Family: &pb.FamilySpec{Name: "f", Compression: pb.Compression(-1)}}}}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.dump()
			res := f.apply(tc.cmd)
			if got := apierr.CodeOf(res.Err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, res.Err, tc.want)
			}
			if f.dump() != before {
				t.Errorf("a refused command changed the state")
			}
		})
	}
}
