package tablet

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

// TestGetRowsEqualsGetAndScan is a randomized differential test of the
// multi-get against the single-row Get and a scan of point ranges (the old
// paths), over rows spread across several TSFiles and both buffers, with
// deletes of every kind, versions past the GC rules, and RowFilters.
// Replay a failure with TABLET_SEED=<seed>.
func TestGetRowsEqualsGetAndScan(t *testing.T) {
	seed := seedFromEnv(t)
	t.Logf("seed %d (replay: TABLET_SEED=%d go test -run TestGetRowsEqualsGetAndScan ./storage/tablet/)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	clock := &fakeClock{}
	clock.us.Store(1_000)
	cache := blockcache.New(blockcache.Options{Capacity: 1 << 20, Shards: 2})
	tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: newStore(t), Cache: cache, Now: clock.now, PageSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	row := func() string { return fmt.Sprintf("r%03d", rng.Intn(300)) }
	fams := []string{"a", "b", "c"}
	filters := []*btpb.RowFilter{
		{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte(".*[13579]")}},
		{Filter: &btpb.RowFilter_CellsPerColumnLimitFilter{CellsPerColumnLimitFilter: 1}},
		{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: []*btpb.RowFilter{
			{Filter: &btpb.RowFilter_FamilyNameRegexFilter{FamilyNameRegexFilter: "a|c"}},
			{Filter: &btpb.RowFilter_ApplyLabelTransformer{ApplyLabelTransformer: "l"}},
		}}}},
		{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}},
	}
	var multiGets, found int
	for step := 0; step < 1200; step++ {
		clock.us.Add(1)
		switch k := rng.Intn(100); {
		case k < 75:
			m := mutation.RowMutation{Row: []byte(row())}
			for n := 1 + rng.Intn(3); n > 0; n-- {
				fam := fams[rng.Intn(3)]
				switch rng.Intn(12) {
				case 0:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime})
				case 1:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteFamily, Family: fam, Timestamp: mutation.ServerTime})
				case 2:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteColumn, Family: fam, Qualifier: []byte("q0"), Timestamp: mutation.ServerTime})
				default:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: []byte(fmt.Sprintf("q%d", rng.Intn(2))),
						Timestamp: mutation.ServerTime, Value: []byte(fmt.Sprint(step))})
				}
			}
			if err := tb.AssignTimestamps(&m); err != nil {
				t.Fatal(err)
			}
			if err := tb.Apply(&m); err != nil {
				t.Fatal(err)
			}
		case k < 80:
			tb.SwapBuffers()
			if tb.HasStandby() && rng.Intn(3) > 0 {
				info, err := tb.FlushStandby(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallFlushed(info); err != nil {
					t.Fatal(err)
				}
			}
		default:
			rows := make([][]byte, 1+rng.Intn(40))
			for i := range rows {
				rows[i] = []byte(row())
				if i > 0 && rng.Intn(6) == 0 {
					rows[i] = rows[rng.Intn(i)]
				}
			}
			var o ReadOptions
			switch rng.Intn(4) {
			case 0:
				o.Families = []string{fams[rng.Intn(3)]}
			case 1:
				o.Columns = []Column{{Family: fams[rng.Intn(3)], Qualifier: []byte("q1")}}
			}
			if rng.Intn(3) == 0 {
				o.MaxVersions = 1
			}
			if rng.Intn(3) == 0 {
				o.Filter = rowFilter(t, filters[rng.Intn(len(filters))])
			}
			what := fmt.Sprintf("seed %d step %d: GetRows(%q, %+v)", seed, step, rows, o)
			got := make([]*Row, len(rows))
			if err := tb.GetRows(ctx, rows, o, func(i int, r Row) bool { got[i] = &r; return true }); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			multiGets++
			// The old point path, row by row.
			for i, key := range rows {
				want, ok, err := tb.Get(ctx, key, o)
				if err != nil {
					t.Fatal(err)
				}
				if (got[i] != nil) != ok || ok && !reflect.DeepEqual(normalize(*got[i]), normalize(want)) {
					t.Fatalf("%s: row %d %q: got %+v, Get says %v %+v", what, i, key, got[i], ok, want)
				}
				if ok {
					found++
				}
			}
			// A scan of the sorted, distinct rows as point ranges.
			sorted := sortedKeys(func() map[string]bool {
				m := map[string]bool{}
				for _, r := range rows {
					m[string(r)] = true
				}
				return m
			}())
			var ranges []KeyRange
			for _, r := range sorted {
				ranges = append(ranges, KeyRange{Start: []byte(r), End: []byte(r + "\x00")})
			}
			scanned := scanAll(t, tb, ranges, false, 0, o)
			var multi []Row
			seen := map[string]bool{}
			if err := tb.GetRows(ctx, rows, o, func(i int, r Row) bool {
				if !seen[string(r.Key)] {
					seen[string(r.Key)] = true
					multi = append(multi, normalize(r))
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			for i := range scanned {
				scanned[i] = normalize(scanned[i])
			}
			if len(multi) != len(scanned) || len(multi) > 0 && !reflect.DeepEqual(multi, scanned) {
				t.Fatalf("%s: in key order %v, the point scan returns %v", what, keysOf(multi), keysOf(scanned))
			}
		}
	}
	if multiGets == 0 || found == 0 {
		t.Fatalf("seed %d: %d multi-gets found %d rows: the test checked nothing", seed, multiGets, found)
	}
	t.Logf("%d multi-gets, %d rows found, %d files", multiGets, found, len(tb.Files()))
}

// TestGetRowsSharesPagesAndStops: sorted rows of one page are read with
// one page lookup (a source already at the next row is not sought, one
// before it decodes on within the page), the bloom
// filters rule files out, and fn returning false stops the read.
func TestGetRowsSharesPagesAndStops(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	clock.us.Store(1_000)
	cache := blockcache.New(blockcache.Options{Capacity: 1 << 20, Shards: 1})
	tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: newStore(t), Cache: cache, Now: clock.now, PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	// Two files with disjoint rows: even rows in the first, odd in the second.
	for part := 0; part < 2; part++ {
		for i := part; i < 100; i += 2 {
			m := mutation.RowMutation{Row: []byte(fmt.Sprintf("r%03d", i)), Ops: []mutation.Op{
				{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("v")}}}
			if err := tb.AssignTimestamps(&m); err != nil {
				t.Fatal(err)
			}
			if err := tb.Apply(&m); err != nil {
				t.Fatal(err)
			}
		}
		tb.SwapBuffers()
		info, err := tb.FlushStandby(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.InstallFlushed(info); err != nil {
			t.Fatal(err)
		}
	}
	var rows [][]byte
	for i := 96; i >= 0; i -= 4 { // every other even row, descending
		rows = append(rows, []byte(fmt.Sprintf("r%03d", i)))
	}
	before := cache.Stats()
	var bloomChecks, bloomNeg, inPage int64
	statsNow := func() (c, n, p int64) {
		tb.mu.RLock()
		defer tb.mu.RUnlock()
		for _, f := range tb.files {
			st := f.r.Stats()
			c, n, p = c+st.BloomChecks, n+st.BloomNegatives, p+st.SeeksInPage
		}
		return
	}
	bloomChecks, bloomNeg, inPage = statsNow()
	n := 0
	if err := tb.GetRows(ctx, rows, ReadOptions{}, func(i int, r Row) bool {
		if want := rows[len(rows)-1-n]; string(r.Key) != string(want) || len(r.Cells) != 1 {
			t.Fatalf("row %d: got %q %+v, want %q with one cell", n, r.Key, r.Cells, want)
		}
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(rows) {
		t.Fatalf("got %d rows, want %d", n, len(rows))
	}
	c, neg, p := statsNow()
	after := cache.Stats()
	lookups := (after.Hits + after.Misses) - (before.Hits + before.Misses)
	t.Logf("%d rows: %d page lookups, %d seeks within a page, %d bloom checks (%d negative)", len(rows), lookups, p-inPage, c-bloomChecks, neg-bloomNeg)
	if lookups >= int64(len(rows))/2 {
		t.Errorf("%d page lookups for %d rows of a few pages: the pages are not shared", lookups, len(rows))
	}
	if p-inPage == 0 {
		t.Errorf("no seek went on within a page")
	}
	if c-bloomChecks != 2*int64(len(rows)) {
		t.Errorf("%d bloom checks, want one per row and file (%d)", c-bloomChecks, 2*len(rows))
	}
	if neg-bloomNeg < int64(len(rows))*9/10 {
		t.Errorf("only %d bloom negatives: the odd file should rule out (almost) every even row", neg-bloomNeg)
	}

	n = 0
	if err := tb.GetRows(ctx, rows, ReadOptions{}, func(int, Row) bool { n++; return n < 3 }); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("fn returned false at the 3rd row, but it was called %d times", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := tb.GetRows(cctx, rows, ReadOptions{}, func(int, Row) bool { return true }); err != context.Canceled {
		t.Fatalf("GetRows with a cancelled context: %v, want context.Canceled", err)
	}
}
