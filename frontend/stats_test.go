package frontend

import (
	"testing"

	"cloud.google.com/go/bigtable"

	"bighive/client"
)

// TestReadRowsRequestStats: ReadRows asking for REQUEST_STATS_FULL (the
// official client's WithFullReadStats) answers the rows and cells the
// tservers examined before the request's filter, and those returned,
// exactly: across a tablet boundary, with a filter dropping rows and
// cells, with a row limit, for one row, and without a filter.
func TestReadRowsRequestStats(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", SplitKeys: []string{"m"},
		Families: []client.FamilySpec{{Name: "f"}, {Name: "g"}}})
	ctx := ctxT(t)
	tbl := a.bt.Open("t")
	// 5 rows, 8 cells; the filter f:q1 keeps a, b and x, one cell each.
	for row, cells := range map[string][]string{
		"a": {"f", "q1", "f", "q2", "g", "q"},
		"b": {"f", "q1"},
		"c": {"g", "q"},
		"x": {"f", "q1", "g", "q"},
		"y": {"f", "q2"},
	} {
		m := bigtable.NewMutation()
		for i := 0; i < len(cells); i += 2 {
			m.Set(cells[i], cells[i+1], 1000, []byte("v"))
		}
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatal(err)
		}
	}
	// One row more, deleted: not seen.
	m := bigtable.NewMutation()
	m.Set("f", "q1", 1000, []byte("v"))
	if err := tbl.Apply(ctx, "d", m); err != nil {
		t.Fatal(err)
	}
	m = bigtable.NewMutation()
	m.DeleteRow()
	if err := tbl.Apply(ctx, "d", m); err != nil {
		t.Fatal(err)
	}
	f1 := bigtable.ChainFilters(bigtable.FamilyFilter("f"), bigtable.ColumnFilter("q1"))
	for _, tt := range []struct {
		what string
		rs   bigtable.RowSet
		opts []bigtable.ReadOption
		want bigtable.ReadIterationStats
	}{
		{"the filter f:q1", bigtable.InfiniteRange(""), []bigtable.ReadOption{bigtable.RowFilter(f1)},
			bigtable.ReadIterationStats{RowsSeenCount: 5, RowsReturnedCount: 3, CellsSeenCount: 8, CellsReturnedCount: 3}},
		{"no filter", bigtable.InfiniteRange(""), nil,
			bigtable.ReadIterationStats{RowsSeenCount: 5, RowsReturnedCount: 5, CellsSeenCount: 8, CellsReturnedCount: 8}},
		{"the filter with a limit of 2 rows", bigtable.InfiniteRange(""), []bigtable.ReadOption{bigtable.RowFilter(f1), bigtable.LimitRows(2)},
			bigtable.ReadIterationStats{RowsSeenCount: 2, RowsReturnedCount: 2, CellsSeenCount: 4, CellsReturnedCount: 2}},
		{"the filter on rows c and y, which it empties", bigtable.RowList{"c", "y"}, []bigtable.ReadOption{bigtable.RowFilter(f1)},
			bigtable.ReadIterationStats{RowsSeenCount: 2, RowsReturnedCount: 0, CellsSeenCount: 2, CellsReturnedCount: 0}},
		{"the filter on row a", bigtable.SingleRow("a"), []bigtable.ReadOption{bigtable.RowFilter(f1)},
			bigtable.ReadIterationStats{RowsSeenCount: 1, RowsReturnedCount: 1, CellsSeenCount: 3, CellsReturnedCount: 1}},
		{"a value filter over [b, y)", bigtable.NewRange("b", "y"), []bigtable.ReadOption{bigtable.RowFilter(bigtable.ValueFilter("nothing"))},
			bigtable.ReadIterationStats{RowsSeenCount: 3, RowsReturnedCount: 0, CellsSeenCount: 4, CellsReturnedCount: 0}},
	} {
		var got *bigtable.FullReadStats
		opts := append(tt.opts, bigtable.WithFullReadStats(func(s *bigtable.FullReadStats) { got = s }))
		if err := tbl.ReadRows(ctx, tt.rs, func(bigtable.Row) bool { return true }, opts...); err != nil {
			t.Fatalf("%s: ReadRows: %v", tt.what, err)
		}
		if got == nil {
			t.Errorf("%s: no request stats", tt.what)
			continue
		}
		if got.ReadIterationStats != tt.want {
			t.Errorf("%s: stats %+v, want %+v", tt.what, got.ReadIterationStats, tt.want)
		}
	}
}
