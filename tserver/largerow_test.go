package tserver_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/client"
	"bighive/tserver"
)

// TestRowLargerThanAMessageReadsBack writes one row of 70 MiB (seven
// values of 10 MiB, each its own mutation), more than ReadRow answers in
// one message (32 MiB) and seventy scan messages, between two small rows,
// and reads it back whole
// through the client's Get, Scan and reverse ReadRows: the tserver streams a large row in
// chunks of cells and the client merges them.
func TestRowLargerThanAMessageReadsBack(t *testing.T) {
	t.Parallel()
	n := startNode(t, 1, 5*time.Second, func(_ int, o *tserver.Options) { o.MemLimit = 32 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const parts, valueBytes = 7, 10 << 20
	value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, valueBytes) }
	for _, k := range []string{"a", "c"} {
		if err := tbl.Put(ctx, k, "cf", "q", []byte("small "+k)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range parts {
		if err := tbl.Put(ctx, "big", "cf", fmt.Sprintf("q%d", i), value(i)); err != nil {
			t.Fatalf("put part %d: %v", i, err)
		}
	}
	check := func(how string, r client.Row) {
		t.Helper()
		if r.Key != "big" || len(r.Cells) != parts {
			t.Fatalf("%s: row %q with %d cells, want \"big\" with %d", how, r.Key, len(r.Cells), parts)
		}
		for i, cell := range r.Cells {
			if cell.Qualifier != fmt.Sprintf("q%d", i) || !bytes.Equal(cell.Value, value(i)) {
				t.Fatalf("%s: cell %d is %s (%d bytes), want q%d of %d bytes of %q", how, i, cell.Qualifier, len(cell.Value), i, valueBytes, rune('a'+i))
			}
		}
	}
	for round := range 2 {
		r, err := tbl.Get(ctx, "big")
		if err != nil {
			t.Fatalf("round %d: get: %v", round, err)
		}
		check("get", r)
		var keys []string
		if err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
			keys = append(keys, r.Key)
			if r.Key == "big" {
				check("scan", r)
			}
			return true
		}); err != nil {
			t.Fatalf("round %d: scan: %v", round, err)
		}
		if fmt.Sprint(keys) != "[a big c]" {
			t.Fatalf("round %d: scan saw rows %v, want [a big c]", round, keys)
		}
		// Reversed: the rows descend, the big row's chunks still merge in
		// cell order.
		keys = nil
		if err := tbl.ReadRows(ctx, nil, func(r client.Row) bool {
			keys = append(keys, r.Key)
			if r.Key == "big" {
				check("reverse scan", r)
			}
			return true
		}, client.ReverseScan()); err != nil {
			t.Fatalf("round %d: reverse scan: %v", round, err)
		}
		if fmt.Sprint(keys) != "[c big a]" {
			t.Fatalf("round %d: reverse scan saw rows %v, want [c big a]", round, keys)
		}
		if round == 0 { // the second round reads from TSFiles
			if _, err := c.CheckpointAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
