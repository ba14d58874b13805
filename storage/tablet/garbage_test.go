package tablet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
)

// TestEstimateGarbage: the estimate of what a major compaction drops is
// high where the files hold overwritten, deleted, expired or orphaned
// cells, low where they hold only live ones, and falls to about zero once
// a major compaction of every file ran.
func TestEstimateGarbage(t *testing.T) {
	const rows = 200
	schema := Schema{Families: map[string]FamilyPolicy{
		"live": {},
		"one":  {MaxVersions: 1},
		"old":  {MaxAge: time.Second},
		// Garbage when beyond 2 versions and older than a second.
		"both": {Rule: &GCRule{Kind: GCIntersection, Rules: []GCRule{{Kind: GCMaxVersions, MaxVersions: 2}, {Kind: GCMaxAge, MaxAge: time.Second}}}},
		"gone": {},
	}}
	cases := []struct {
		name string
		// load writes through put and flush and may move the clock.
		load     func(put func(fam string, row int), del func(row int), flush func(), clock *fakeClock, tb *Tablet)
		min, max float64 // bounds of the share before compacting
	}{
		{"live cells in three files", func(put func(string, int), _ func(int), flush func(), _ *fakeClock, _ *Tablet) {
			for f := range 3 {
				for r := range rows {
					put("live", f*rows+r)
				}
				flush()
			}
		}, 0, 0.05},
		{"max versions 1, each row written 5 times", func(put func(string, int), _ func(int), flush func(), _ *fakeClock, _ *Tablet) {
			for range 5 {
				for r := range rows {
					put("one", r)
				}
				flush()
			}
		}, 0.7, 0.85},
		{"max versions 1, 4 versions in one file", func(put func(string, int), _ func(int), flush func(), _ *fakeClock, _ *Tablet) {
			for range 4 {
				for r := range rows {
					put("one", r)
				}
			}
			flush()
		}, 0.7, 0.8},
		{"every row deleted", func(put func(string, int), del func(int), flush func(), _ *fakeClock, _ *Tablet) {
			for r := range rows {
				put("live", r)
				put("live", r)
			}
			flush()
			for r := range rows {
				del(r)
			}
			flush()
		}, 0.9, 1},
		{"past max age", func(put func(string, int), _ func(int), flush func(), clock *fakeClock, _ *Tablet) {
			for r := range rows {
				put("old", r)
			}
			flush()
			clock.us.Add(2 * time.Second.Microseconds())
		}, 0.95, 1},
		{"intersection: 4 versions, young", func(put func(string, int), _ func(int), flush func(), _ *fakeClock, _ *Tablet) {
			for range 4 {
				for r := range rows {
					put("both", r)
				}
				flush()
			}
		}, 0, 0.05},
		{"intersection: 4 versions, old", func(put func(string, int), _ func(int), flush func(), clock *fakeClock, _ *Tablet) {
			for range 4 {
				for r := range rows {
					put("both", r)
				}
				flush()
			}
			clock.us.Add(2 * time.Second.Microseconds())
		}, 0.4, 0.6},
		{"family deleted from the schema", func(put func(string, int), _ func(int), flush func(), _ *fakeClock, tb *Tablet) {
			for r := range rows {
				put("gone", r)
			}
			flush()
			s := Schema{Families: map[string]FamilyPolicy{}}
			for k, v := range schema.Families {
				if k != "gone" {
					s.Families[k] = v
				}
			}
			tb.SetSchema(s)
		}, 0.95, 1},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{}
			clock.us.Store(10_000_000)
			tb, err := Open(Options{ID: "t", Schema: schema, Store: newStore(t), Now: clock.now, PageSize: 1024})
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			apply := func(row int, op mutation.Op) { writeRow(t, tb, fmt.Sprintf("row%05d", row), op) }
			put := func(fam string, row int) {
				apply(row, mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("some value")})
			}
			del := func(row int) { apply(row, mutation.Op{Kind: mutation.DeleteRow}) }
			flush := func() { flushActive(t, tb) }
			c.load(put, del, flush, clock, tb)
			g, err := tb.EstimateGarbage()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("before: %+v share %.3f", g, g.Share())
			if s := g.Share(); s < c.min || s > c.max {
				t.Fatalf("share %.3f before compacting, want in [%.2f, %.2f]", s, c.min, c.max)
			}
			var refs []blockstore.BlockRef
			for _, f := range tb.Files() {
				refs = append(refs, f.FooterRef())
			}
			info, err := tb.CompactFiles(ctx, refs, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.InstallCompacted(refs, info); err != nil {
				t.Fatal(err)
			}
			g, err = tb.EstimateGarbage()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after a major compaction: %+v share %.3f", g, g.Share())
			// A file of one entry (the one of highest sequence a major
			// compaction keeps) may be all garbage.
			if s := g.Share(); s > 0.05 && g.Entries > 1 {
				t.Fatalf("share %.3f after a major compaction", s)
			}
		})
	}
}
