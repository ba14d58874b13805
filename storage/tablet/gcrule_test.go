package tablet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
)

func TestGCRuleGarbage(t *testing.T) {
	const now = int64(1_000_000)
	mv := func(n int) GCRule { return GCRule{Kind: GCMaxVersions, MaxVersions: n} }
	ma := func(d time.Duration) GCRule { return GCRule{Kind: GCMaxAge, MaxAge: d} }
	union := func(r ...GCRule) GCRule { return GCRule{Kind: GCUnion, Rules: r} }
	inter := func(r ...GCRule) GCRule { return GCRule{Kind: GCIntersection, Rules: r} }
	old, fresh := now-2000, now-10 // 2 ms and 10 µs old
	tests := []struct {
		name    string
		rule    GCRule
		version int
		ts      int64
		want    bool
	}{
		{"none keeps all", GCRule{}, 100, 0, false},
		{"max versions keeps newest N", mv(2), 2, old, false},
		{"max versions drops N+1", mv(2), 3, fresh, true},
		{"max age keeps fresh", ma(time.Millisecond), 5, fresh, false},
		{"max age drops old", ma(time.Millisecond), 1, old, true},
		{"max age boundary kept", ma(time.Millisecond), 1, now - 1000, false},
		{"union: either (versions)", union(mv(1), ma(time.Millisecond)), 2, fresh, true},
		{"union: either (age)", union(mv(1), ma(time.Millisecond)), 1, old, true},
		{"union: neither", union(mv(1), ma(time.Millisecond)), 1, fresh, false},
		{"intersection: both", inter(mv(1), ma(time.Millisecond)), 2, old, true},
		{"intersection: only versions", inter(mv(1), ma(time.Millisecond)), 2, fresh, false},
		{"intersection: only age", inter(mv(1), ma(time.Millisecond)), 1, old, false},
		{"empty union keeps", union(), 9, old, false},
		{"empty intersection keeps", inter(), 9, old, false},
		// Bigtable's documented example: keep 2 versions, and anything
		// newer than the max age, i.e. garbage = beyond 2 AND old.
		{"nested: union(inter(mv2, age), mv5) v3 fresh", union(inter(mv(2), ma(time.Millisecond)), mv(5)), 3, fresh, false},
		{"nested: union(inter(mv2, age), mv5) v3 old", union(inter(mv(2), ma(time.Millisecond)), mv(5)), 3, old, true},
		{"nested: union(inter(mv2, age), mv5) v6 fresh", union(inter(mv(2), ma(time.Millisecond)), mv(5)), 6, fresh, true},
		{"nested: inter(union(mv1, age), mv3) v2 fresh", inter(union(mv(1), ma(time.Millisecond)), mv(3)), 2, fresh, false},
		{"nested: inter(union(mv1, age), mv3) v4 fresh", inter(union(mv(1), ma(time.Millisecond)), mv(3)), 4, fresh, true},
		{"deep", union(union(union(inter(inter(mv(1)))))), 2, fresh, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.garbage(tc.version, tc.ts, now); got != tc.want {
				t.Fatalf("garbage(version %d, ts %d) = %v, want %v", tc.version, tc.ts, got, tc.want)
			}
		})
	}
}

func TestFamilyPolicyLegacyAndRule(t *testing.T) {
	const now = int64(1_000_000)
	legacy := FamilyPolicy{MaxVersions: 1, MaxAge: time.Millisecond}
	if !legacy.garbage(2, now, now) || !legacy.garbage(1, 0, now) || legacy.garbage(1, now, now) {
		t.Fatal("legacy policy is not the union of max versions and max age")
	}
	// A set rule wins over the legacy fields.
	p := FamilyPolicy{MaxVersions: 1, Rule: &GCRule{Kind: GCMaxVersions, MaxVersions: 3}}
	if p.garbage(2, now, now) || !p.garbage(4, now, now) {
		t.Fatal("the rule does not win over MaxVersions")
	}
}

// TestNestedGCRuleReadAndCompaction: a nested rule hides the same cells on
// reads before a major compaction as after it, and the compaction drops
// them; a family removed from the schema is unreadable at once and dropped
// by the compaction.
func TestNestedGCRuleReadAndCompaction(t *testing.T) {
	clock := &fakeClock{}
	clock.us.Store(100_000)
	rule := &GCRule{Kind: GCUnion, Rules: []GCRule{
		{Kind: GCIntersection, Rules: []GCRule{{Kind: GCMaxVersions, MaxVersions: 2}, {Kind: GCMaxAge, MaxAge: time.Millisecond}}},
		{Kind: GCMaxVersions, MaxVersions: 4},
	}}
	s := Schema{Families: map[string]FamilyPolicy{"g": {Rule: rule}, "x": {}}}
	tb, err := Open(Options{ID: "t", Schema: s, Store: newStore(t), Now: clock.now, PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ctx := context.Background()
	var ops []mutation.Op
	// Six versions of g:q: 1..3 old (over 1 ms), 4..6 fresh. Newest first:
	// 6, 5 (kept: within 2), 4 (fresh: kept), 3 (old and beyond 2: garbage),
	// 2, 1 (garbage). And a cell of family x.
	for i, ts := range []int64{1000, 2000, 3000, 99_500, 99_600, 99_700} {
		ops = append(ops, mutation.Op{Kind: mutation.SetCell, Family: "g", Qualifier: []byte("q"), Timestamp: ts, Value: []byte(fmt.Sprint(i))})
	}
	ops = append(ops, mutation.Op{Kind: mutation.SetCell, Family: "x", Qualifier: []byte("q"), Timestamp: 5, Value: []byte("x")})
	m := mutation.RowMutation{Row: []byte("r"), Ops: ops}
	if err := tb.AssignTimestamps(&m); err != nil {
		t.Fatal(err)
	}
	if err := tb.Apply(&m); err != nil {
		t.Fatal(err)
	}
	want := "g:q@99700 g:q@99600 g:q@99500 x:q@5"
	read := func() string {
		t.Helper()
		row, _, err := tb.Get(ctx, []byte("r"), ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, c := range row.Cells {
			if out != "" {
				out += " "
			}
			out += fmt.Sprintf("%s:%s@%d", c.Family, c.Qualifier, c.Timestamp)
		}
		return out
	}
	if got := read(); got != want {
		t.Fatalf("read from the buffer: %s, want %s", got, want)
	}
	if !tb.SwapBuffers() {
		t.Fatal("nothing to swap")
	}
	info, err := tb.FlushStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.InstallFlushed(info); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != want {
		t.Fatalf("read from the file: %s, want %s", got, want)
	}
	// Family x is deleted: unreadable at once, writes to it refused.
	tb.SetSchema(Schema{Families: map[string]FamilyPolicy{"g": {Rule: rule}}})
	want = "g:q@99700 g:q@99600 g:q@99500"
	if got := read(); got != want {
		t.Fatalf("after deleting family x: %s, want %s", got, want)
	}
	if err := tb.Validate(&mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "x", Timestamp: 1}}}); err == nil {
		t.Fatal("a write to the deleted family was accepted")
	}
	var ids []blockstore.BlockRef
	for _, f := range tb.Files() {
		ids = append(ids, f.FooterRef())
	}
	ci, err := tb.CompactFiles(ctx, ids, true)
	if err != nil {
		t.Fatal(err)
	}
	// The x cell is the entry of highest sequence: a column tombstone of
	// its timestamp takes its place (see CompactFiles).
	if ci.Entries != 4 || ci.MaxSeq != tb.Files()[0].MaxSeq {
		t.Fatalf("major compaction kept %d entries up to sequence %d, want 4 up to %d", ci.Entries, ci.MaxSeq, tb.Files()[0].MaxSeq)
	}
	if err := tb.InstallCompacted(ids, ci); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != want {
		t.Fatalf("after compaction: %s, want %s", got, want)
	}
	// Family x created again, and no GC rule on g: nothing compacted away
	// comes back.
	tb.SetSchema(Schema{Families: map[string]FamilyPolicy{"g": {}, "x": {}}})
	if got := read(); got != want {
		t.Fatalf("after creating family x again and dropping g's rule: %s, want %s", got, want)
	}
}
