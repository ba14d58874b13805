package client_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
)

// familyCells lists the cells of family fam in the table, as
// "row/qualifier@timestamp=value", sorted.
func familyCells(t *testing.T, tbl *client.Table, fam string) []string {
	t.Helper()
	var out []string
	err := tbl.Scan(ctxT(t), "", "", func(r client.Row) bool {
		for _, c := range r.Cells {
			if c.Family == fam {
				v := string(c.Value)
				if len(v) > 16 {
					v = fmt.Sprintf("<%d bytes>", len(v))
				}
				out = append(out, fmt.Sprintf("%s/%s@%d=%s", r.Key, c.Qualifier, c.Timestamp, v))
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	sort.Strings(out)
	return out
}

// TestRecreatedFamilyStartsEmpty: a family deleted and created again
// under its name shows none of the old family's cells (from write buffers
// and from TSFiles, on both tablets), keeps the cells written after the
// re-create (also with timestamps older than the old cells'), and stays so
// after a checkpoint, a major compaction, restarts of every tserver, a
// split and a failover.
func TestRecreatedFamilyStartsEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts, splits and fails over tservers: not in the fast loop (-short)")
	}
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 3, Lease: time.Second})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}, {Name: "f"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rows := []string{"a", "b", "c", "x", "y", "z"}
	for _, row := range rows {
		m := client.NewMutation()
		m.Set("cf", "q", 10, []byte("keep"))
		m.Set("f", "q", 10, []byte("old"))
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Checkpoint(ctx); err != nil { // the old cells in TSFiles
		t.Fatal(err)
	}
	for _, row := range []string{"b", "y"} { // and in write buffers
		m := client.NewMutation()
		m.Set("f", "q2", 11, []byte("old"))
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.DeleteColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if err := cl.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if got := familyCells(t, tbl, "f"); len(got) != 0 {
		t.Fatalf("after the re-create, family f shows the old family's cells: %q", got)
	}
	for _, row := range []string{"a", "z"} { // older timestamps than the old cells': still new
		if err := tbl.Apply(ctx, row, func() *client.Mutation {
			m := client.NewMutation()
			m.Set("f", "new", 5, []byte("v"))
			return m
		}()); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a/new@5=v", "z/new@5=v"}
	check := func(stage string) {
		t.Helper()
		if got := familyCells(t, tbl, "f"); !slices.Equal(got, want) {
			t.Fatalf("%s: family f = %q, want %q", stage, got, want)
		}
		for _, row := range rows {
			r, err := tbl.Get(ctx, row, client.Families("cf"))
			if v, ok := r.Value("cf", "q"); err != nil || !ok || string(v) != "keep" {
				t.Fatalf("%s: row %s cf:q = %q %v %v", stage, row, v, ok, err)
			}
		}
	}
	check("after the re-create")
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	if err := c.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	check("after a major compaction")
	for i := 0; i < c.TServers(); i++ {
		if err := c.RestartTServer(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	check("after restarting every tserver")
	if err := cl.SplitTablet(ctx, "t", "c"); err != nil {
		t.Fatal(err)
	}
	waitTablets(t, cl, "t", 3)
	check("after a split at c")
	tablets, err := cl.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < c.TServers(); i++ {
		if c.TServerAddr(i) == tablets[0].TServer {
			if err := c.StopTServer(i); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	check("after a failover of row a's tserver")
}

// TestDeletedFamilyRestartThenRecreate: a tserver restarted while a
// family is deleted replays its logged writes of the family (the log
// still names it) and serves; the family created again afterwards is
// empty.
func TestDeletedFamilyRestartThenRecreate(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 1})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}, {Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"a", "b"} {
		if err := tbl.Put(ctx, row, "f", "q", []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.DeleteColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartTServer(0); err != nil { // replays writes naming the absent family
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := cl.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if got := familyCells(t, tbl, "f"); len(got) != 0 {
		t.Fatalf("after restart and re-create, family f = %q, want empty", got)
	}
	if err := tbl.Put(ctx, "a", "cf", "q", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(scanAll(t, tbl, "", ""), " "); got != "a" {
		t.Fatalf("rows %q, want \"a\"", got)
	}
}

// waitTablets waits until the master lists n tablets of table and they
// all serve.
func waitTablets(t *testing.T, cl *client.Client, table string, n int) {
	t.Helper()
	ctx := ctxT(t)
	wait.ForCtx(t, ctx, fmt.Sprintf("%d serving tablets of %s", n, table), func() error {
		tablets, err := cl.Tablets(ctx, table)
		if err != nil {
			return err
		}
		serving := 0
		for _, tb := range tablets {
			if tb.State == "serving" {
				serving++
			}
		}
		if len(tablets) != n || serving != n {
			return fmt.Errorf("tablets %+v", tablets)
		}
		return nil
	})
}

// TestRecreatedFamilyCompactionReclaims: after a family is deleted and
// created again, a major compaction drops the old family's cells (the
// table's estimated size, from SampleRowKeyOffsets, falls from the old
// cells' bytes to little).
func TestRecreatedFamilyCompactionReclaims(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 1})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}, {Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const rows, value = 100, 4 << 10
	for i := 0; i < rows; i++ {
		if err := tbl.Put(ctx, fmt.Sprintf("r%03d", i), "f", "q", []byte(strings.Repeat("v", value))); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		t.Helper()
		s, err := tbl.SampleRowKeyOffsets(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s[len(s)-1].OffsetBytes
	}
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	before := size()
	if before < rows*value {
		t.Fatalf("table size %d before, want at least %d", before, rows*value)
	}
	if err := cl.DeleteColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if err := cl.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := familyCells(t, tbl, "f"); len(got) != 0 {
		t.Fatalf("family f = %q, want empty", got)
	}
	if after := size(); after > before/10 {
		t.Fatalf("table size %d after the major compaction, %d before: the old cells were not dropped", after, before)
	}
}

// TestRecreateFinishesInterruptedDelete: a DeleteColumnFamily that fails
// before every tablet masked the family (one tserver is gone, its tablet
// not yet recovered elsewhere, and the call's deadline short) leaves the
// family deleted; CreateColumnFamily of the name first finishes masking
// the old cells (once the tablet serves again), so the new family is
// empty.
func TestRecreateFinishesInterruptedDelete(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a family delete interrupted by a stopped tserver, finished by the re-create after the failover: runs without -short")
	}
	c := inproc.Start(t, inproc.Options{TServers: 2, Lease: time.Second})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}, {Name: "f"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"a", "z"} {
		if err := tbl.Put(ctx, row, "f", "q", []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	tablets, err := cl.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < c.TServers(); i++ {
		if c.TServerAddr(i) == tablets[1].TServer {
			if err := c.StopTServer(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := cl.DeleteColumnFamily(short, "t", "f"); err == nil {
		t.Fatal("DeleteColumnFamily returned with a tablet that cannot mask the family")
	}
	if err := cl.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
	if got := familyCells(t, tbl, "f"); len(got) != 0 {
		t.Fatalf("after the interrupted delete and the re-create, family f = %q, want empty", got)
	}
}
