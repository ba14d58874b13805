package tserver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/client"
	pb "bighive/proto/bighivepb"
)

// deleteCase is one kind of delete, and the cells of the row it must hide
// (of the two written before it: cf:a@1000 and cf:b@1000).
type deleteCase struct {
	name   string
	delete func(m *client.Mutation)
	hidesB bool
}

var deleteCases = []deleteCase{
	{"column", func(m *client.Mutation) { m.DeleteCellsInColumn("cf", "a") }, false},
	{"column-range", func(m *client.Mutation) { m.DeleteTimestampRange("cf", "a", 0, 2000) }, false},
	{"family", func(m *client.Mutation) { m.DeleteCellsInFamily("cf") }, true},
	{"row", func(m *client.Mutation) { m.DeleteRow() }, true},
}

// The timestamps of the put after the delete, relative to the cells it
// deleted (at 1000).
var putAfter = []struct {
	name string
	ts   int64
}{{"older", 500}, {"equal", 1000}, {"newer", 1500}}

// TestDeleteHidesOnlyEarlierWrites checks Bigtable's delete semantics
// through the real server and client: a delete of a column (with and
// without a time range), a family or a row hides the cells written before
// it, whatever their timestamps, and never a cell written after it, even
// at an older or equal timestamp. Rows are written with every write in the
// buffer, and with a checkpoint between the writes (so the cells, the
// tombstone and the later write sit in different TSFiles); each is read in
// the buffer, after a checkpoint, after a minor and a major compaction and
// after a restart of every tserver. After the restart, new writes must
// still order after the old ones (the tablet's write sequence continues).
func TestDeleteHidesOnlyEarlierWrites(t *testing.T) {
	t.Parallel()
	n := startNode(t, 2, 2*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.client(ctx)
	tbl := createServing(t, ctx, c, "m")
	set := func(row, q string, ts int64, v string) {
		t.Helper()
		m := client.NewMutation()
		m.Set("cf", q, ts, []byte(v))
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatalf("set %s cf:%s@%d: %v", row, q, ts, err)
		}
	}
	del := func(row string, dc deleteCase) {
		t.Helper()
		m := client.NewMutation()
		dc.delete(m)
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatalf("delete %s in %s: %v", dc.name, row, err)
		}
	}
	checkpoint := func() {
		t.Helper()
		if _, err := c.CheckpointAll(ctx); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	}
	type rowWant struct {
		row    string
		cells  []string // "q@ts=value", in read order
		hidesB bool
	}
	var wants []rowWant
	// Rows "a..." sort into the first tablet, "n..." into the second. The
	// "files" rows get their cells, then their delete, each flushed by a
	// checkpoint of its own; the "buffer" rows are written after the last
	// checkpoint, so all their writes are in the write buffers.
	type rowCase struct {
		row string
		dc  deleteCase
		pa  int64
	}
	var files, buffer []rowCase
	for i, dc := range deleteCases {
		for j, pa := range putAfter {
			for _, layout := range []string{"buffer", "files"} {
				rc := rowCase{row: fmt.Sprintf("%c-%s-%s-%s", "an"[(i+j)%2], dc.name, pa.name, layout), dc: dc, pa: pa.ts}
				if layout == "files" {
					files = append(files, rc)
				} else {
					buffer = append(buffer, rc)
				}
				w := rowWant{row: rc.row, cells: []string{fmt.Sprintf("a@%d=v2", pa.ts)}, hidesB: dc.hidesB}
				if !dc.hidesB {
					w.cells = append(w.cells, "b@1000=b1")
				}
				wants = append(wants, w)
			}
		}
	}
	for _, rc := range files {
		set(rc.row, "a", 1000, "v1")
		set(rc.row, "b", 1000, "b1")
	}
	checkpoint()
	for _, rc := range files {
		del(rc.row, rc.dc)
	}
	checkpoint()
	for _, rc := range files {
		set(rc.row, "a", rc.pa, "v2")
	}
	for _, rc := range buffer {
		set(rc.row, "a", 1000, "v1")
		set(rc.row, "b", 1000, "b1")
		del(rc.row, rc.dc)
		set(rc.row, "a", rc.pa, "v2")
	}
	check := func(stage string) {
		t.Helper()
		for _, w := range wants {
			r, err := tbl.Get(ctx, w.row)
			if err != nil {
				t.Fatalf("%s: get %s: %v", stage, w.row, err)
			}
			if got := cellStrings(r); !slices.Equal(got, w.cells) {
				t.Errorf("%s: row %s = %v, want %v", stage, w.row, got, w.cells)
			}
		}
		var scanned []rowWant
		if err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
			scanned = append(scanned, rowWant{row: r.Key, cells: cellStrings(r)})
			return true
		}); err != nil {
			t.Fatalf("%s: scan: %v", stage, err)
		}
		byRow := map[string][]string{}
		for _, s := range scanned {
			byRow[s.row] = s.cells
		}
		for _, w := range wants {
			if got := byRow[w.row]; !slices.Equal(got, w.cells) {
				t.Errorf("%s: scan row %s = %v, want %v", stage, w.row, got, w.cells)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	check("in the buffer")
	checkpoint()
	check("after a checkpoint")
	compact := func(major bool) {
		t.Helper()
		for _, s := range n.servers {
			conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = pb.NewTServerClient(conn).Compact(ctx, &pb.CompactRequest{Major: major})
			conn.Close()
			if err != nil {
				t.Fatalf("compact (major %v) on %s: %v", major, s.Addr(), err)
			}
		}
	}
	compact(false)
	check("after a minor compaction")
	compact(true)
	check("after a major compaction")
	for i, s := range n.servers {
		if err := s.Close(); err != nil {
			t.Fatalf("close tserver %d: %v", i, err)
		}
		n.start(i)
	}
	waitServing(t, ctx, c, "t")
	check("after a restart")

	// After the restart the tablets have nothing in their logs: a delete and
	// a put made now must order after everything before the restart.
	for k := range wants {
		w := &wants[k]
		del(w.row, deleteCases[0])
		set(w.row, "a", 100, "v3")
		w.cells = []string{"a@100=v3"}
		if !w.hidesB {
			w.cells = append(w.cells, "b@1000=b1")
		}
	}
	check("writes after the restart")
	checkpoint()
	compact(true)
	check("writes after the restart, compacted")
}

func cellStrings(r client.Row) []string {
	var out []string
	for _, c := range r.Cells {
		out = append(out, fmt.Sprintf("%s@%d=%s", c.Qualifier, c.Timestamp, c.Value))
	}
	return out
}

// TestDeleteThenPutServerTimestamps: put, delete the column, put again,
// all with the server's timestamps, as the real client over a real
// cluster; the row holds the second value only.
func TestDeleteThenPutServerTimestamps(t *testing.T) {
	t.Parallel()
	n := startNode(t, 1, 2*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t1", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t1")
	tbl, err := c.Open(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	apply := func(f func(m *client.Mutation)) {
		t.Helper()
		m := client.NewMutation()
		f(m)
		if err := tbl.Apply(ctx, "r", m); err != nil {
			t.Fatal(err)
		}
	}
	apply(func(m *client.Mutation) { m.Set("cf", "a", client.ServerTime, []byte("v1")) })
	apply(func(m *client.Mutation) { m.DeleteCellsInColumn("cf", "a") })
	apply(func(m *client.Mutation) { m.Set("cf", "a", client.ServerTime, []byte("v2")) })
	r, err := tbl.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Value("cf", "a"); !ok || string(v) != "v2" || len(r.Cells) != 1 {
		t.Fatalf("get r after put, delete, put = %v, want only v2", cellStrings(r))
	}
}
