package frontend

import (
	"testing"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"bighive/client"
	"bighive/internal/apierr"
)

func vers(n int32) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: n}}
}

func age(d time.Duration) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(d)}}
}

func union(rs ...*adminpb.GcRule) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: rs}}}
}

func inter(rs ...*adminpb.GcRule) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_Intersection_{Intersection: &adminpb.GcRule_Intersection{Rules: rs}}}
}

// TestGCRuleRoundTrip: an admin GC rule becomes a client policy and back
// unchanged, and FamilySpecs without a policy show the union of their
// limits.
func TestGCRuleRoundTrip(t *testing.T) {
	for _, r := range []*adminpb.GcRule{
		{}, vers(3), age(90 * time.Minute), union(vers(1), age(time.Hour)),
		inter(age(48*time.Hour), union(vers(2), inter(vers(5), age(time.Second)))),
	} {
		p, err := policyFromAdmin(r)
		if err != nil {
			t.Errorf("policyFromAdmin(%v): %v", r, err)
			continue
		}
		if back := policyToAdmin(p); !proto.Equal(back, r) {
			t.Errorf("rule %v came back as %v", r, back)
		}
	}
	for _, c := range []struct {
		f    client.FamilySpec
		want *adminpb.GcRule
	}{
		{client.FamilySpec{Name: "a"}, nil}, // no rule: gc_rule absent
		{client.FamilySpec{Name: "a", GCPolicy: client.NoGcPolicy()}, nil},
		{client.FamilySpec{Name: "a", MaxVersions: 2}, vers(2)},
		{client.FamilySpec{Name: "a", MaxAge: time.Hour}, age(time.Hour)},
		{client.FamilySpec{Name: "a", MaxVersions: 2, MaxAge: time.Hour}, union(vers(2), age(time.Hour))},
		{client.FamilySpec{Name: "a", GCPolicy: client.MaxVersionsPolicy(7)}, vers(7)},
	} {
		if got := familyRule(c.f); (got == nil) != (c.want == nil) || !proto.Equal(got, c.want) {
			t.Errorf("familyRule(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

// TestGCRuleBad: rules deeper than the master allows or with an invalid duration are refused
// with InvalidArgument.
func TestGCRuleBad(t *testing.T) {
	deep := vers(1) // maxRuleDepth+1 levels: refused
	for range maxRuleDepth {
		deep = union(deep)
	}
	ok := vers(1) // maxRuleDepth levels: allowed
	for range maxRuleDepth - 1 {
		ok = union(ok)
	}
	if _, err := policyFromAdmin(ok); err != nil {
		t.Errorf("a rule of %d levels: %v", maxRuleDepth, err)
	}
	bad := &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: &durationpb.Duration{Seconds: 1, Nanos: -5}}}
	for _, r := range []*adminpb.GcRule{deep, bad, union(vers(1), bad)} {
		if _, err := policyFromAdmin(r); apierr.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("policyFromAdmin(%v): %v, want InvalidArgument", r, err)
		}
	}
}

// TestParseNames: resource names with any project and instance parse;
// malformed ones are InvalidArgument.
func TestParseNames(t *testing.T) {
	n, err := parseTable("projects/p/instances/i/tables/t")
	if err != nil || n.table != "t" || n.String() != "projects/p/instances/i/tables/t" {
		t.Errorf("parseTable = %+v, %v", n, err)
	}
	for _, bad := range []string{"", "t", "projects/p/instances/i", "projects//instances/i/tables/t",
		"projects/p/instances/i/tables/t/x", "project/p/instances/i/tables/t", "projects/p/instances/i/table/t"} {
		if _, err := parseTable(bad); apierr.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("parseTable(%q): %v, want InvalidArgument", bad, err)
		}
	}
	for _, bad := range []string{"", "projects/p", "projects/p/instances/", "projects/p/instances/i/tables/t"} {
		if _, err := parseInstance(bad); apierr.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("parseInstance(%q): %v, want InvalidArgument", bad, err)
		}
	}
}
