package client_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"bighive/client"
	"bighive/storage/tablet"
	"bighive/testkit/inproc"
	"bighive/tserver"
)

// TestMajorCompactionPurgesThroughRealServers writes, on real servers, one
// row per way a cell stops being visible — overwritten past max versions,
// past max age, under a nested union and an intersection rule, hidden by
// DeleteRow, DeleteFromColumn and DeleteFromFamily, of a deleted family,
// of rows DropRowRange dropped — and checks that reads show exactly the
// live cells before client.Compact(major), after it, across a restart of
// the tserver and after a failover (another tserver recovers the tablet
// from the log), after the deleted family is created again, and after a
// split and a major compaction of both children. The major
// compaction must leave one TSFile holding the live cells and at most one
// more entry (the one of highest sequence, which it always keeps): the
// hidden cells and every tombstone are gone.
func TestMajorCompactionPurgesThroughRealServers(t *testing.T) {
	t.Parallel()
	// No compaction but the test's own: a background one (the deletes
	// pass the garbage share) could purge before the one measured.
	c := inproc.Start(t, inproc.Options{TServers: 2, Lease: time.Second, TServer: func(_ int, o *tserver.Options) {
		o.CompactionGarbageShare, o.CompactionMaxFiles = -1, -1
	}})
	ctx := ctxT(t)
	spec := client.TableSpec{Name: "t", Families: []client.FamilySpec{
		{Name: "v", MaxVersions: 1}, {Name: "a", MaxAge: time.Hour}, {Name: "n"}, {Name: "i"}, {Name: "d"}, {Name: "gone"},
	}}
	if err := c.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	// n: a version is garbage past the 4 newest, or past the 2 newest and
	// older than an hour. i: past the newest and older than an hour.
	nested := client.UnionPolicy(client.IntersectionPolicy(client.MaxVersionsPolicy(2), client.MaxAgePolicy(time.Hour)), client.MaxVersionsPolicy(4))
	if err := cl.SetGCPolicy(ctx, "t", "n", nested); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetGCPolicy(ctx, "t", "i", client.IntersectionPolicy(client.MaxVersionsPolicy(1), client.MaxAgePolicy(time.Hour))); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMicro()
	old := now - 2*time.Hour.Microseconds()
	apply := func(row string, fill func(m *client.Mutation)) {
		t.Helper()
		m := client.NewMutation()
		fill(m)
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatalf("apply to %s: %v", row, err)
		}
	}
	set := func(fam, qual string, ts int64, v string) func(m *client.Mutation) {
		return func(m *client.Mutation) { m.Set(fam, qual, ts, []byte(v)) }
	}
	for i := int64(1); i <= 5; i++ {
		apply("ver", set("v", "q", now-10+i, fmt.Sprint(i)))
	}
	apply("age", func(m *client.Mutation) { m.Set("a", "old", old, []byte("o")); m.Set("a", "new", now, []byte("n")) })
	for k, ts := range []int64{now, now - 1000, now - 2000, old, old - 1000, old - 2000} {
		apply("nest", set("n", "q", ts, fmt.Sprint(k)))
	}
	for k, ts := range []int64{now, now - 1000, old} {
		apply("inter", set("i", "q", ts, fmt.Sprint(k)))
	}
	both := func(f1, f2 string) func(m *client.Mutation) {
		return func(m *client.Mutation) { m.Set(f1, "x", now, []byte("x")); m.Set(f2, "y", now, []byte("y")) }
	}
	apply("dr", both("d", "v"))
	apply("dc", func(m *client.Mutation) { m.Set("d", "x", now, []byte("x")); m.Set("d", "y", now, []byte("y")) })
	apply("df", both("d", "v"))
	apply("g1", both("gone", "d"))
	for _, row := range []string{"drop#1", "drop#2", "keep"} {
		apply(row, set("d", "x", now, "x"))
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	apply("dr", func(m *client.Mutation) { m.DeleteRow() })
	apply("dc", func(m *client.Mutation) { m.DeleteCellsInColumn("d", "x") })
	apply("df", func(m *client.Mutation) { m.DeleteCellsInFamily("d") })
	if err := cl.DeleteColumnFamily(ctx, "t", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DropRowRange(ctx, "t", "drop#"); err != nil {
		t.Fatal(err)
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}

	cell := func(fam, qual string, ts int64, v string) string { return fmt.Sprintf("%s:%s@%d=%s", fam, qual, ts, v) }
	want := map[string][]string{
		"ver":   {cell("v", "q", now-5, "5")},
		"age":   {cell("a", "new", now, "n")},
		"nest":  {cell("n", "q", now, "0"), cell("n", "q", now-1000, "1"), cell("n", "q", now-2000, "2")},
		"inter": {cell("i", "q", now, "0"), cell("i", "q", now-1000, "1")},
		"dc":    {cell("d", "y", now, "y")},
		"df":    {cell("v", "y", now, "y")},
		"g1":    {cell("d", "y", now, "y")},
		"keep":  {cell("d", "x", now, "x")},
	}
	live := 0
	for _, cells := range want {
		live += len(cells)
	}
	check := func(stage string) {
		t.Helper()
		got := map[string][]string{}
		err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
			for _, c := range r.Cells {
				got[r.Key] = append(got[r.Key], cell(c.Family, c.Qualifier, c.Timestamp, string(c.Value)))
			}
			return true
		})
		if err != nil {
			t.Fatalf("%s: scan: %v", stage, err)
		}
		for row, cells := range want {
			if !slices.Equal(got[row], cells) {
				t.Errorf("%s: row %s = %v, want %v", stage, row, got[row], cells)
			}
		}
		for row, cells := range got {
			if _, ok := want[row]; !ok {
				t.Errorf("%s: row %s = %v, want no row", stage, row, cells)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	// files returns the tablet's TSFiles on the tserver serving it.
	files := func(stage string) []tablet.TSFileInfo {
		t.Helper()
		tabs, err := cl.Tablets(ctx, "t")
		if err != nil || len(tabs) != 1 {
			t.Fatalf("%s: tablets %v %v", stage, tabs, err)
		}
		for i := range c.TServers() {
			if slices.Contains(c.Running(), i) && c.TServerAddr(i) == tabs[0].TServer {
				return c.TServer(i).TSFiles(tabs[0].ID)
			}
		}
		t.Fatalf("%s: tablet %s is on %q, no running tserver", stage, tabs[0].ID, tabs[0].TServer)
		return nil
	}
	sum := func(fs []tablet.TSFileInfo) (entries, size int64) {
		for _, f := range fs {
			entries += f.Entries
			size += f.Size
		}
		return entries, size
	}
	check("before compacting")
	e0, b0 := sum(files("before compacting"))
	if err := cl.Compact(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	check("after compacting")
	after := files("after compacting")
	e1, b1 := sum(after)
	t.Logf("major compaction: %d entries in %d bytes -> %d entries in %d bytes (%d live cells)", e0, b0, e1, b1, live)
	if len(after) != 1 || e1 < int64(live) || e1 > int64(live)+1 || b1 >= b0 {
		t.Fatalf("after the major compaction: %d files, %d entries in %d bytes; want 1 file of %d or %d entries, under %d bytes",
			len(after), e1, b1, live, live+1, b0)
	}

	// A write after the compaction stays in the log only: replay applies it.
	apply("late", set("d", "x", now, "x"))
	want["late"] = []string{cell("d", "x", now, "x")}
	owner := func() int {
		tabs, err := cl.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range c.Running() {
			if c.TServerAddr(i) == tabs[0].TServer {
				return i
			}
		}
		t.Fatalf("tablet on %q, no running tserver", tabs[0].TServer)
		return -1
	}
	if err := c.RestartTServer(owner()); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	check("after a restart")
	if err := c.StopTServer(owner()); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	check("after a failover")
	if e, _ := sum(files("after a failover")); e > int64(live)+1 {
		t.Fatalf("after a failover: %d entries in the tablet's files, want at most %d", e, live+1)
	}
	// The deleted family's cells are gone for good: creating it again
	// shows none of them.
	if err := cl.CreateColumnFamily(ctx, "t", "gone"); err != nil {
		t.Fatal(err)
	}
	check("after creating the deleted family again")
	if err := cl.Compact(ctx, "t", false); err != nil {
		t.Fatal(err)
	}
	check("after a merging compaction")
	// Split children start from their parent's compacted snapshot; a major
	// compaction of each brings nothing back either.
	if err := cl.SplitTablet(ctx, "t", "keep"); err != nil {
		t.Fatal(err)
	}
	for {
		tabs, err := cl.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if len(tabs) == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the table never split: %v", tabs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	check("after a split")
	if err := cl.Compact(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	check("after a major compaction of the split children")
}

// TestDeleteEveryRowThenMajorCompaction: 2 000 rows of 1 000-byte values,
// then DeleteRow of every row: after client.Compact(major) the table's
// TSFile bytes are under 1% of before (one entry is left: an entry of the
// highest sequence), and the table reads empty.
func TestDeleteEveryRowThenMajorCompaction(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const rows = 2000
	value := []byte(strings.Repeat("v", 1000))
	keys := make([]string, rows)
	muts := make([]*client.Mutation, rows)
	for i := range keys {
		keys[i] = fmt.Sprintf("row%05d", i)
		muts[i] = client.NewMutation()
		muts[i].Set("cf", "q", 1_000_000, value)
	}
	bulk := func(stage string) {
		t.Helper()
		errs, err := tbl.ApplyBulk(ctx, keys, muts)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	bulk("write")
	for i := range muts {
		muts[i] = client.NewMutation()
		muts[i].DeleteRow()
	}
	bulk("delete")
	size := func() (n int64) {
		tabs, err := cl.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tabs {
			for _, f := range c.TServer(0).TSFiles(tb.ID) {
				n += f.Size
			}
		}
		return n
	}
	before := size()
	if err := cl.Compact(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	after := size()
	t.Logf("%d rows of 1000 bytes, all deleted: TSFile bytes %d before the major compaction, %d after (%.3f%%)",
		rows, before, after, 100*float64(after)/float64(before))
	// Against the bytes written, not before: the background compactions
	// may have purged them already.
	if written := int64(rows) * int64(len(value)); after*100 >= written {
		t.Fatalf("TSFile bytes %d after the major compaction, want under 1%% of the %d bytes written", after, written)
	}
	if n := len(scanAll(t, tbl, "", "")); n != 0 {
		t.Fatalf("%d rows after deleting every row", n)
	}
}
