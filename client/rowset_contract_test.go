package client_test

import (
	"fmt"
	"slices"
	"testing"

	"bighive/client"
)

// readKeys runs ReadRows and returns the keys delivered.
func readKeys(t *testing.T, tbl *client.Table, rs client.RowSet, opts ...client.ReadOption) []string {
	t.Helper()
	var keys []string
	if err := tbl.ReadRows(ctxT(t), rs, func(r client.Row) bool { keys = append(keys, r.Key); return true }, opts...); err != nil {
		t.Fatalf("ReadRows(%v): %v", rs, err)
	}
	return keys
}

// keyRange lists rowKey(i) for i in [from, to), step 1, or descending when
// from > to (then (to, from]).
func keyRange(from, to int) []string {
	var out []string
	if from <= to {
		for i := from; i < to; i++ {
			out = append(out, rowKey(i))
		}
	} else {
		for i := from; i > to; i-- {
			out = append(out, rowKey(i))
		}
	}
	return out
}

func contractRowSets(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "rowsets", "row010", "row020", "row030")
	ctx := ctxT(t)
	for i := 0; i < 40; i++ {
		if err := tbl.Put(ctx, rowKey(i), "cf", "q", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	rev := client.ReverseScan()
	lim := client.LimitRows
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	tests := []struct {
		name string
		rs   client.RowSet
		opts []client.ReadOption
		want []string
	}{
		{"row list, unsorted, with duplicates and a missing key", client.RowList{"row031", "row002", "nope", "row015", "row002"}, nil, []string{"row002", "row015", "row031"}},
		{"row list reversed", client.RowList{"row031", "row002", "row015"}, []client.ReadOption{rev}, []string{"row031", "row015", "row002"}},
		{"row list with limit", client.RowList{"row031", "row002", "row015"}, []client.ReadOption{lim(2)}, []string{"row002", "row015"}},
		{"single row", client.SingleRow("row007"), nil, []string{"row007"}},
		{"closed-open", client.NewClosedOpenRange("row005", "row012"), nil, keyRange(5, 12)},
		{"open-closed", client.NewOpenClosedRange("row005", "row012"), nil, keyRange(6, 13)},
		{"open", client.NewOpenRange("row005", "row012"), nil, keyRange(6, 12)},
		{"closed", client.NewClosedRange("row005", "row012"), nil, keyRange(5, 13)},
		{"prefix", client.PrefixRange("row01"), nil, keyRange(10, 20)},
		{"infinite", client.InfiniteRange("row035"), nil, keyRange(35, 40)},
		{"infinite reverse", client.InfiniteReverseRange("row003"), nil, keyRange(0, 4)},
		{"empty range reads nothing", client.NewRange("row009", "row001"), nil, nil},
		{"mixed ranges, overlapping and unsorted", client.RowRangeList{
			client.NewClosedRange("row028", "row031"), client.NewOpenRange("row001", "row004"), client.NewRange("row029", "row033"), client.PrefixRange("row01"),
		}, nil, cat(keyRange(2, 4), keyRange(10, 20), keyRange(28, 33))},
		{"mixed ranges with limit", client.RowRangeList{client.NewOpenRange("row001", "row004"), client.PrefixRange("row01")}, []client.ReadOption{lim(5)}, cat(keyRange(2, 4), keyRange(10, 13))},
		{"reverse whole table", nil, []client.ReadOption{rev}, keyRange(39, -1)},
		{"reverse with limit: the last rows", client.NewOpenClosedRange("", "row025"), []client.ReadOption{rev, lim(10)}, keyRange(25, 15)},
		{"reverse across tablets", client.NewRange("row005", "row031"), []client.ReadOption{rev}, keyRange(30, 4)},
		{"reverse ending at a tablet boundary", client.NewRange("row012", "row020"), []client.ReadOption{rev}, keyRange(19, 11)},
		{"reverse mixed ranges and limit", client.RowRangeList{client.NewClosedRange("row028", "row031"), client.NewOpenRange("row001", "row004"), client.PrefixRange("row01")}, []client.ReadOption{rev, lim(8)}, cat(keyRange(31, 27), keyRange(19, 15))},
		{"reverse with a filter", client.InfiniteRange(""), []client.ReadOption{rev, client.RowFilter(client.RowKeyFilter(".*[05]")), lim(3)}, []string{"row035", "row030", "row025"}},
	}
	for _, tc := range tests {
		got := readKeys(t, tbl, tc.rs, tc.opts...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: ReadRows(%v) = %v, want %v", tc.name, tc.rs, got, tc.want)
		}
	}
	// Scan is ReadRows of one range, and takes ReverseScan too.
	var keys []string
	if err := tbl.Scan(ctx, "row008", "row013", func(r client.Row) bool { keys = append(keys, r.Key); return true }, rev); err != nil {
		t.Fatal(err)
	}
	if want := keyRange(12, 7); !slices.Equal(keys, want) {
		t.Errorf("reverse Scan = %v, want %v", keys, want)
	}
	// fn returning false stops a reverse read.
	n := 0
	if err := tbl.ReadRows(ctx, nil, func(client.Row) bool { n++; return n < 15 }, rev); err != nil || n != 15 {
		t.Fatalf("stopped reverse read: %d rows, %v", n, err)
	}
	// Cells keep their usual order in a reverse read.
	m := client.NewMutation()
	m.Set("meta", "b", 5, []byte("b5"))
	m.Set("cf", "z", 7, []byte("z7"))
	m.Set("cf", "a", 9, []byte("a9"))
	m.Set("cf", "a", 8, []byte("a8"))
	if err := tbl.Apply(ctx, "row020", m); err != nil {
		t.Fatal(err)
	}
	var fwd, bwd client.Row
	if err := tbl.ReadRows(ctx, client.RowList{"row020"}, func(r client.Row) bool { fwd = r; return true }); err != nil {
		t.Fatal(err)
	}
	if err := tbl.ReadRows(ctx, client.NewClosedRange("row019", "row020"), func(r client.Row) bool { bwd = r; return false }, rev); err != nil {
		t.Fatal(err)
	}
	if bwd.Key != "row020" || cellString(fwd) != cellString(bwd) || len(fwd.Cells) != 5 {
		t.Fatalf("row020 forward %s, reverse %s %s", cellString(fwd), bwd.Key, cellString(bwd))
	}
}
