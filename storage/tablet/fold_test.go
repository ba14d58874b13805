package tablet

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"bighive/storage/memstore"
	"bighive/storage/mutation"
)

// readAll resolves every row of it as a read does.
func readAll(s *Schema, it memstore.Iterator) []Row {
	var r rowReader
	r.init(s, &ReadOptions{}, 1<<40)
	var rows []Row
	for it.First(); it.Valid(); {
		r.readRow(it)
		if len(r.row.Cells) > 0 {
			rows = append(rows, normalize(Row{Key: r.row.Key, Cells: append([]Cell(nil), r.row.Cells...)}))
		}
	}
	return rows
}

// materialize writes what it yields into a new buffer, as a compaction
// writes its output into a TSFile.
func materialize(it memstore.Iterator) *memstore.Memstore {
	var out []memstore.Entry
	for it.First(); it.Valid(); it.Next() {
		out = append(out, it.Entry().Clone())
	}
	m := memstore.New()
	if len(out) > 0 {
		m.Apply(out)
	}
	return m
}

// TestFoldCompactionsKeepReads: random rows of operands and tombstones of
// aggregate families, cut by sequence into four sources (an older file, a
// run of two files, a newer file), read the same after the run is
// compacted: minor (foldIter), major (gcIter) without purging, and, when
// the run holds the oldest entries, major with purging. The sources are
// ordered by sequence as a tablet's files are in each row. Replay a
// failure with TABLET_SEED.
func TestFoldCompactionsKeepReads(t *testing.T) {
	seed := seedFromEnv(t)
	t.Logf("seed %d (replay: TABLET_SEED=%d go test -run TestFoldCompactionsKeepReads ./storage/tablet/)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	// No GC rule: a major compaction drops what a rule calls garbage
	// within its run, which a later delete in a newer file would have
	// uncovered (garbage collection is opportunistic, as in Cloud
	// Bigtable), so reads would differ for a reason that is not the fold.
	schema := Schema{Families: map[string]FamilyPolicy{"s": {Aggregate: Sum}, "m": {Aggregate: Max}}}
	fams := []string{"s", "m"}
	deadline := time.Now().Add(2 * time.Second)
	trials := 0
	for ; trials < 2000 && time.Now().Before(deadline); trials++ {
		n := 5 + rng.Intn(40)
		var all []memstore.Entry
		for i := range n {
			e := memstore.Entry{Row: []byte(fmt.Sprintf("r%d", rng.Intn(3))), Family: fams[rng.Intn(2)],
				Qualifier: []byte(fmt.Sprintf("q%d", rng.Intn(2))), Timestamp: int64(10 * (1 + rng.Intn(2))), Seq: uint64(i + 1)}
			switch k := rng.Intn(100); {
			case k < 70:
				e.Kind, e.Value = mutation.MergeCell, binary.BigEndian.AppendUint64(nil, uint64(rng.Int63n(200)-100))
			case k < 85:
				e.Kind = mutation.DeleteColumn
				if rng.Intn(2) == 0 {
					e.Timestamp, e.End = 0, 0
				} else {
					e.End = e.Timestamp + 1
				}
			case k < 93:
				e.Kind, e.Qualifier = mutation.DeleteFamily, nil
			default:
				e.Kind, e.Family, e.Qualifier = mutation.DeleteRow, "", nil
			}
			all = append(all, e)
		}
		// Cut points: [0,a) older, [a,b) and [b,c) the run, [c,n) newer.
		a := rng.Intn(n / 2)
		if rng.Intn(3) == 0 {
			a = 0 // the run holds the oldest entries
		}
		b := a + rng.Intn(n-a+1)
		c := b + rng.Intn(n-b+1)
		src := func(lo, hi int) *memstore.Memstore {
			m := memstore.New()
			if hi > lo {
				m.Apply(append([]memstore.Entry(nil), all[lo:hi]...))
			}
			return m
		}
		older, run1, run2, newer := src(0, a), src(a, b), src(b, c), src(c, n)
		want := readAll(&schema, memstore.Merge(newer.NewIterator(), run2.NewIterator(), run1.NewIterator(), older.NewIterator()))
		check := func(what string, compacted *memstore.Memstore) {
			t.Helper()
			got := readAll(&schema, memstore.Merge(newer.NewIterator(), compacted.NewIterator(), older.NewIterator()))
			if !reflect.DeepEqual(got, want) {
				t.Logf("entries (cuts %d %d %d):", a, b, c)
				for _, e := range all {
					t.Logf("  %v", e.String())
				}
				t.Fatalf("seed %d trial %d: after a %s compaction of the run:\n got %v\nwant %v", seed, trials, what, got, want)
			}
		}
		runIt := func() memstore.Iterator { return memstore.Merge(run2.NewIterator(), run1.NewIterator()) }
		check("minor", materialize(&foldIter{src: runIt(), schema: &schema}))
		for _, purge := range []bool{false, true} {
			if purge && a > 0 {
				continue
			}
			g := &gcIter{src: runIt()}
			g.rr.init(&schema, &ReadOptions{}, 1<<40)
			g.rr.gc, g.rr.purge = true, purge
			if c > a {
				g.rr.keepSeq = uint64(c) // the run's highest sequence
			}
			g.rr.emit = func(e *memstore.Entry) { g.buf = append(g.buf, e.Clone()) }
			check(fmt.Sprintf("major (purge %v)", purge), materialize(g))
		}
	}
	t.Logf("%d trials", trials)
}
