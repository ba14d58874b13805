package tablet

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

// deepCopy copies a row out of the memory a Lent scan reuses.
func deepCopy(r Row) Row {
	out := Row{Key: bytes.Clone(r.Key)}
	for _, c := range r.Cells {
		c.Qualifier, c.Value = bytes.Clone(c.Qualifier), bytes.Clone(c.Value)
		c.Labels = append([]string(nil), c.Labels...)
		out.Cells = append(out.Cells, c)
	}
	return normalize(out)
}

// TestLentScanEqualsScan checks that a Lent scan, whose rows are valid
// only until fn returns and whose TSFile pages past the fill are read into
// reused buffers, returns what the same scan without Lent returns: rows
// in two files (each larger than tsfile.ScanFillBytes) and the write
// buffer, with overwrites, deletes, several ranges, limits, reverse, and a
// family selection.
func TestLentScanEqualsScan(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	clock := &fakeClock{}
	clock.us.Store(1_000)
	// A cache much smaller than the files: pages past the fill are mostly
	// not in it, so the Lent scan reads them into its own buffers.
	cache := blockcache.New(blockcache.Options{Capacity: 256 << 10})
	tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: newStore(t), Now: clock.now, PageSize: 1024,
		Cache: cache, CacheOwner: cache.NewOwner("t", blockcache.Medium)})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	const rows = 3000
	value := func() []byte {
		v := make([]byte, 200+rng.Intn(800))
		rng.Read(v)
		return v
	}
	for pass := 0; pass < 3; pass++ {
		for i := 0; i < rows; i++ {
			if pass > 0 && rng.Intn(3) != 0 {
				continue
			}
			row := fmt.Sprintf("row%05d", i)
			switch {
			case pass == 2 && rng.Intn(10) == 0:
				writeRow(t, tb, row, mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime})
			case pass == 2 && rng.Intn(10) == 0:
				writeRow(t, tb, row, mutation.Op{Kind: mutation.DeleteFamily, Family: "c", Timestamp: mutation.ServerTime})
			default:
				writeRow(t, tb, row,
					mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: int64(10 + pass), Value: value()},
					mutation.Op{Kind: mutation.SetCell, Family: "a", Qualifier: []byte(fmt.Sprintf("x%d", pass)), Timestamp: int64(20 + pass), Value: value()})
			}
		}
		if pass < 2 {
			flushActive(t, tb)
		}
	}
	ctx := context.Background()
	scan := func(ranges []KeyRange, reversed bool, limit int, o ReadOptions) []Row {
		var got []Row
		if err := tb.ScanRanges(ctx, ranges, reversed, limit, o, func(r Row) bool {
			got = append(got, deepCopy(r))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	k := func(i int) []byte { return []byte(fmt.Sprintf("row%05d", i)) }
	for _, tc := range []struct {
		name     string
		ranges   []KeyRange
		reversed bool
		limit    int
		opts     ReadOptions
	}{
		{"everything", []KeyRange{{}}, false, 0, ReadOptions{}},
		{"several ranges", []KeyRange{{k(10), k(400)}, {k(401), k(402)}, {k(900), k(2500)}, {k(2600), nil}}, false, 0, ReadOptions{}},
		{"a limit", []KeyRange{{k(100), nil}}, false, 1700, ReadOptions{}},
		{"one family", []KeyRange{{}}, false, 0, ReadOptions{Families: []string{"a"}}},
		{"reversed", []KeyRange{{k(2000), k(2900)}}, true, 0, ReadOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lent := tc.opts
			lent.Lent = true
			got := scan(tc.ranges, tc.reversed, tc.limit, lent)
			want := scan(tc.ranges, tc.reversed, tc.limit, tc.opts)
			if len(want) == 0 {
				t.Fatal("the scan returned no rows")
			}
			if len(got) != len(want) {
				t.Fatalf("Lent scan: %d rows, without Lent %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("row %d: Lent scan gave %q with %d cells, without Lent %q with %d", i, got[i].Key, len(got[i].Cells), want[i].Key, len(want[i].Cells))
				}
			}
		})
	}
}
