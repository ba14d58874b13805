package tserver

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet"
)

// TestSchemasKeepNewest: an older schema (an assignment built before a
// pushed change) never replaces a newer one.
func TestSchemasKeepNewest(t *testing.T) {
	var c schemas
	v := func(n int64, fams ...string) *pb.TableSchema {
		s := &pb.TableSchema{Name: "t", Version: n}
		for _, f := range fams {
			s.Families = append(s.Families, &pb.FamilySpec{Name: f})
		}
		return s
	}
	if got, changed := c.learn(v(2, "cf")); !changed || got.Version != 2 {
		t.Fatalf("first learn: %v %v", got, changed)
	}
	if got, changed := c.learn(v(3, "cf", "new")); !changed || len(got.Families) != 2 {
		t.Fatalf("newer: %v %v", got, changed)
	}
	if got, changed := c.learn(v(2, "cf")); changed || got.Version != 3 {
		t.Fatalf("older replaced the newer: %v %v", got, changed)
	}
	if got, changed := c.learn(v(3, "cf", "new")); changed || got.Version != 3 {
		t.Fatalf("same version: %v %v", got, changed)
	}
}

func TestGCRuleRoundTrip(t *testing.T) {
	rule := &pb.GcRule{Rule: &pb.GcRule_Union_{Union: &pb.GcRule_Union{Rules: []*pb.GcRule{
		{Rule: &pb.GcRule_Intersection_{Intersection: &pb.GcRule_Intersection{Rules: []*pb.GcRule{
			{Rule: &pb.GcRule_MaxNumVersions{MaxNumVersions: 2}},
			{Rule: &pb.GcRule_MaxAgeMicros{MaxAgeMicros: 3_600_000_000}},
		}}}},
		{Rule: &pb.GcRule_MaxNumVersions{MaxNumVersions: 10}},
	}}}}
	r := gcRuleOf(rule)
	if back := gcRuleToPB(&r); !proto.Equal(back, rule) {
		t.Fatalf("round trip:\n%v\n→\n%v", rule, back)
	}
}

// TestGranularityOf: a schema without a granularity (every table created
// before the field existed) runs in µs, as before; MILLIS in milliseconds.
func TestGranularityOf(t *testing.T) {
	for _, tc := range []struct {
		g    pb.TimestampGranularity
		want tablet.Granularity
	}{
		{pb.TimestampGranularity_TIMESTAMP_GRANULARITY_UNSPECIFIED, tablet.Micros},
		{pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MICROS, tablet.Micros},
		{pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS, tablet.Millis},
	} {
		if got := schemaOf(&pb.TableSchema{Name: "t", Granularity: tc.g}).Granularity; got != tc.want {
			t.Errorf("%v: %v, want %v", tc.g, got, tc.want)
		}
	}
}
