package tablet

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/filter"
)

// scanAll runs ScanRanges and returns the rows.
func scanAll(t *testing.T, tb *Tablet, ranges []KeyRange, reversed bool, limit int, o ReadOptions) []Row {
	t.Helper()
	var got []Row
	if err := tb.ScanRanges(context.Background(), ranges, reversed, limit, o, func(r Row) bool {
		got = append(got, normalize(Row{Key: r.Key, Cells: slices.Clone(r.Cells)}))
		return true
	}); err != nil {
		t.Fatalf("ScanRanges(%q, reversed %v, limit %d): %v", ranges, reversed, limit, err)
	}
	return got
}

// checkReverse checks that the reverse scan of ranges is the forward scan
// reversed, at every limit.
func checkReverse(t *testing.T, what string, tb *Tablet, ranges []KeyRange, o ReadOptions) {
	t.Helper()
	fwd := scanAll(t, tb, ranges, false, 0, o)
	want := slices.Clone(fwd)
	slices.Reverse(want)
	for _, limit := range []int{0, 1, 3} {
		got := scanAll(t, tb, ranges, true, limit, o)
		w := want
		if limit > 0 && len(w) > limit {
			w = w[:limit]
		}
		if len(got) != len(w) || (len(w) > 0 && !reflect.DeepEqual(got, w)) {
			t.Fatalf("%s: reverse scan %q limit %d:\n got %d rows %v\nwant %d rows %v", what, ranges, limit, len(got), keysOf(got), len(w), keysOf(w))
		}
	}
}

func keysOf(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, string(r.Key))
	}
	return out
}

func rowFilter(t *testing.T, f *btpb.RowFilter) *filter.Filter {
	t.Helper()
	c, err := filter.Compile(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReverseScanEqualsReversedForward writes rows with deletes into the
// buffers, the files, or both, and compares reverse scans (several ranges,
// limits, selections and a RowFilter) with the forward scan reversed.
func TestReverseScanEqualsReversedForward(t *testing.T) {
	ctx := context.Background()
	set := func(row, fam, q string, ts int64, v string) mutation.RowMutation {
		return mutation.RowMutation{Row: []byte(row), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: fam, Qualifier: []byte(q), Timestamp: ts, Value: []byte(v)}}}
	}
	del := func(row string, op mutation.Op) mutation.RowMutation {
		return mutation.RowMutation{Row: []byte(row), Ops: []mutation.Op{op}}
	}
	// Two batches; flushing between them puts the first in a file, the
	// deletes of the second then hide cells of the file.
	var first, second []mutation.RowMutation
	for i := 0; i < 40; i++ {
		row := fmt.Sprintf("r%02d", i)
		first = append(first, set(row, "c", "q", 10, "v"+row), set(row, "a", "x", 11, "a"+row))
		if i%3 == 0 {
			first = append(first, set(row, "a", "x", 12, "new"+row), set(row, "a", "x", 13, "newer"+row))
		}
	}
	for i := 0; i < 40; i += 4 {
		row := fmt.Sprintf("r%02d", i)
		second = append(second, del(row, mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}))
	}
	for i := 1; i < 40; i += 5 {
		row := fmt.Sprintf("r%02d", i)
		second = append(second, del(row, mutation.Op{Kind: mutation.DeleteFamily, Family: "c", Timestamp: mutation.ServerTime}))
		second = append(second, set(fmt.Sprintf("r%02d5", i), "c", "q", 20, "late"))
	}
	flush := func(t *testing.T, tb *Tablet) {
		t.Helper()
		for tb.SwapBuffers() || tb.HasStandby() {
			info, err := tb.FlushStandby(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.InstallFlushed(info); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, layout := range []string{"memstore", "files", "mixed", "compacted"} {
		t.Run(layout, func(t *testing.T) {
			clock := &fakeClock{}
			clock.us.Store(1_000)
			tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: newStore(t), Now: clock.now, PageSize: 128})
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			apply := func(ms []mutation.RowMutation) {
				for i := range ms {
					m := ms[i]
					if err := tb.AssignTimestamps(&m); err != nil {
						t.Fatal(err)
					}
					if err := tb.Apply(&m); err != nil {
						t.Fatal(err)
					}
				}
			}
			apply(first)
			if layout != "memstore" {
				flush(t, tb)
			}
			apply(second)
			if layout == "files" || layout == "compacted" {
				flush(t, tb)
			}
			if layout == "compacted" {
				files := tb.Files()
				refs := make([]blockstore.BlockRef, 0, len(files))
				for _, f := range files {
					refs = append(refs, f.FooterRef())
				}
				info, err := tb.CompactFiles(ctx, refs, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallCompacted(refs, info); err != nil {
					t.Fatal(err)
				}
			}
			all := []KeyRange{{}}
			several := []KeyRange{{Start: []byte("r01"), End: []byte("r015")}, {Start: []byte("r015"), End: []byte("r016")}, {Start: []byte("r05"), End: []byte("r12")}, {Start: []byte("r20"), End: []byte("r21")}, {Start: []byte("r30")}}
			if n := len(scanAll(t, tb, all, false, 0, ReadOptions{})); n < 30 {
				t.Fatalf("forward scan sees %d rows", n)
			}
			for _, tc := range []struct {
				name string
				o    ReadOptions
			}{
				{"all", ReadOptions{}},
				{"family c", ReadOptions{Families: []string{"c"}}},
				{"latest 1", ReadOptions{MaxVersions: 1}},
				{"filter", ReadOptions{Filter: rowFilter(t, &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: []*btpb.RowFilter{
					{Filter: &btpb.RowFilter_RowKeyRegexFilter{RowKeyRegexFilter: []byte("r.[13579].*")}},
					{Filter: &btpb.RowFilter_CellsPerRowLimitFilter{CellsPerRowLimitFilter: 1}},
					{Filter: &btpb.RowFilter_StripValueTransformer{StripValueTransformer: true}},
				}}}})}},
			} {
				checkReverse(t, tc.name+" whole tablet", tb, all, tc.o)
				checkReverse(t, tc.name+" several ranges", tb, several, tc.o)
				checkReverse(t, tc.name+" empty range", tb, []KeyRange{{Start: []byte("r07"), End: []byte("r07")}}, tc.o)
			}
		})
	}
}

// TestReverseScanRandom compares random reverse scans with the reversed
// forward scan while random writes, deletes, flushes and compactions run.
// Replay a failure with TABLET_SEED=<seed>.
func TestReverseScanRandom(t *testing.T) {
	seed := seedFromEnv(t)
	t.Logf("seed %d (replay: TABLET_SEED=%d go test -run TestReverseScanRandom ./storage/tablet/)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	clock := &fakeClock{}
	clock.us.Store(1_000)
	tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: newStore(t), Now: clock.now, PageSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	row := func() string { return fmt.Sprintf("r%03d", rng.Intn(200)) }
	fams := []string{"a", "b", "c"}
	for step := 0; step < 1500; step++ {
		clock.us.Add(1)
		switch k := rng.Intn(100); {
		case k < 70:
			m := mutation.RowMutation{Row: []byte(row())}
			for n := 1 + rng.Intn(3); n > 0; n-- {
				fam := fams[rng.Intn(3)]
				switch rng.Intn(10) {
				case 0:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime})
				case 1:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteFamily, Family: fam, Timestamp: mutation.ServerTime})
				case 2:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteColumn, Family: fam, Qualifier: []byte("q"), Timestamp: mutation.ServerTime})
				default:
					m.Ops = append(m.Ops, mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: []byte(fmt.Sprintf("q%d", rng.Intn(2))), Timestamp: mutation.ServerTime, Value: []byte(fmt.Sprint(step))})
				}
			}
			if err := tb.AssignTimestamps(&m); err != nil {
				t.Fatal(err)
			}
			if err := tb.Apply(&m); err != nil {
				t.Fatal(err)
			}
		case k < 75:
			tb.SwapBuffers()
			if tb.HasStandby() {
				info, err := tb.FlushStandby(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallFlushed(info); err != nil {
					t.Fatal(err)
				}
			}
		case k < 77:
			files := tb.Files()
			if len(files) >= 2 {
				var refs []blockstore.BlockRef
				for _, f := range files[:2] {
					refs = append(refs, f.FooterRef())
				}
				info, err := tb.CompactFiles(ctx, refs, false)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallCompacted(refs, info); err != nil {
					t.Fatal(err)
				}
			}
		default:
			var ranges []KeyRange
			var keys []string
			for n := rng.Intn(4); n >= 0; n-- {
				keys = append(keys, row())
			}
			slices.Sort(keys)
			keys = slices.Compact(keys)
			for i := 0; i+1 < len(keys); i += 2 {
				ranges = append(ranges, KeyRange{Start: []byte(keys[i]), End: []byte(keys[i+1])})
			}
			if len(keys)%2 == 1 {
				kr := KeyRange{Start: []byte(keys[len(keys)-1])}
				if rng.Intn(2) == 0 {
					kr.End = []byte(keys[len(keys)-1] + "\x00") // a point
				}
				ranges = append(ranges, kr)
			}
			var o ReadOptions
			if rng.Intn(3) == 0 {
				o.Families = []string{fams[rng.Intn(3)]}
			}
			if rng.Intn(3) == 0 {
				o.Filter = rowFilter(t, &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte(".*[13579]")}})
			}
			checkReverse(t, fmt.Sprintf("seed %d step %d", seed, step), tb, ranges, o)
		}
	}
}

// TestCancelledReverseScanStopsOverHiddenRows: a reverse scan checks its
// context per row examined, not per row returned.
func TestCancelledReverseScanStopsOverHiddenRows(t *testing.T) {
	tb, hidden := hiddenRowsTablet(t, "z")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := tb.RowsExamined()
	rows := 0
	err := tb.ScanRanges(ctx, []KeyRange{{}}, true, 0, ReadOptions{}, func(Row) bool {
		rows++
		cancel()
		return true
	})
	if !errors.Is(err, context.Canceled) || rows != 1 {
		t.Fatalf("reverse scan = %v after %d rows, want context.Canceled after 1", err, rows)
	}
	if n := tb.RowsExamined() - before; n > 2 {
		t.Fatalf("cancelled reverse scan examined %d rows of %d, want at most 2", n, hidden+1)
	}
}

func TestScanRangesRejectsUnsortedRanges(t *testing.T) {
	tb := openTablet(t, &fakeClock{})
	err := tb.ScanRanges(context.Background(), []KeyRange{{Start: []byte("b"), End: []byte("d")}, {Start: []byte("c"), End: []byte("e")}}, false, 0, ReadOptions{}, func(Row) bool { return true })
	if err == nil {
		t.Fatal("overlapping ranges: no error")
	}
}

// TestReadStats: ReadOptions.Stats counts the rows with a cell and their
// cells before the RowFilter drops any, in scans, reverse scans and
// multi-gets; a deleted row is not counted, and a scan stopped by its
// limit counts only what it read.
func TestReadStats(t *testing.T) {
	clock := &fakeClock{}
	clock.us.Store(1000)
	tb := openTablet(t, clock)
	set := func(q string) mutation.Op {
		return mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte(q), Timestamp: 10, Value: []byte("v")}
	}
	writeRow(t, tb, "a", set("keep"), set("x"), set("y"))
	writeRow(t, tb, "b", set("x"))
	writeRow(t, tb, "c", set("keep"))
	writeRow(t, tb, "d", set("keep"))
	writeRow(t, tb, "d", mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime})
	keep := rowFilter(t, &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnQualifierRegexFilter{ColumnQualifierRegexFilter: []byte("keep")}})
	for _, tc := range []struct {
		name     string
		reversed bool
		limit    int
		want     ReadStats
		returned int
	}{
		{"forward", false, 0, ReadStats{Rows: 3, Cells: 5}, 2},
		{"reversed", true, 0, ReadStats{Rows: 3, Cells: 5}, 2},
		{"limit 1", false, 1, ReadStats{Rows: 1, Cells: 3}, 1},
	} {
		var st ReadStats
		got := scanAll(t, tb, []KeyRange{{}}, tc.reversed, tc.limit, ReadOptions{Filter: keep, Stats: &st})
		if st != tc.want || len(got) != tc.returned {
			t.Errorf("%s: stats %+v and %d rows, want %+v and %d", tc.name, st, len(got), tc.want, tc.returned)
		}
	}
	var st ReadStats
	n := 0
	err := tb.GetRows(context.Background(), [][]byte{[]byte("a"), []byte("b"), []byte("d"), []byte("z")}, ReadOptions{Filter: keep, Stats: &st},
		func(int, Row) bool { n++; return true })
	if err != nil || st != (ReadStats{Rows: 2, Cells: 4}) || n != 1 {
		t.Errorf("GetRows: stats %+v, %d rows, %v; want {2 4}, 1 row", st, n, err)
	}
}
