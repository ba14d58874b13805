package client_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/master"
	"bighive/testkit/inproc"
)

// backupRows reads every row of table as key → latest value of cf:v.
func backupRows(t *testing.T, ctx context.Context, cl *client.Client, table string) map[string]string {
	t.Helper()
	tbl, err := cl.Open(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = tbl.Scan(ctx, "", "", func(r client.Row) bool {
		for _, c := range r.Cells {
			if c.Family == "cf" && c.Qualifier == "v" {
				got[r.Key] = string(c.Value)
				break
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	return got
}

func sameRows(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	n := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] && n < 5 {
			t.Errorf("%s: row %s = %q, want %q", what, k, got[k], want[k])
			n++
		}
	}
	t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
}

// TestBackupRestore: every write acknowledged before CreateBackup is in the
// backup (none was flushed before it) and none after it; the backup
// survives a split, a merge and a major compaction of its table, the
// table's deletion and a block GC pass on every tserver, and restores, twice, with every row at the
// backup's split points. After the backup is deleted, the two restored
// tables, which share its files, survive a major compaction and a GC pass
// each: a compaction of one leaves the shared files the other names.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 2, MemLimit: 64 << 20})
	ctx := ctxT(t)
	cl := c.Client()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "src", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"row100"}}); err != nil {
		t.Fatal(err)
	}
	src, err := cl.Open(ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 200 {
		k, v := rowKey(i), fmt.Sprintf("v%d", i)
		if err := src.Put(ctx, k, "cf", "v", []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	info, err := cl.CreateBackup(ctx, "src", "b1", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "b1" || info.SourceTable != "src" || !info.Ready || !slices.Equal(info.SplitKeys, []string{"row100"}) || info.Files == 0 {
		t.Fatalf("backup %+v", info)
	}
	if _, err := cl.CreateBackup(ctx, "src", "b1", time.Now().Add(time.Hour)); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second backup b1: %v, want AlreadyExists", err)
	}
	// After the backup: overwrites and new rows, flushed, a split and a
	// merge of the table's tablets, then a major compaction.
	for i := 150; i < 250; i++ {
		if err := src.Put(ctx, rowKey(i), "cf", "v", []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.SplitTablet(ctx, "src", "row050"); err != nil {
		t.Fatal(err)
	}
	for {
		ts, err := cl.Tablets(ctx, "src")
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.WaitServing(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.MergeTablets(ctx, "src", "row050"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteTable(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	gcPass := func() {
		t.Helper()
		for _, i := range c.Running() {
			// The deleted tablets' loads end with the tservers' next heartbeats.
			for {
				if _, err := c.TServer(i).CollectOrphans(ctx, 0); err == nil {
					break
				} else if ctx.Err() != nil {
					t.Fatalf("orphan pass of tserver %d: %v", i, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	gcPass()

	for _, name := range []string{"dst", "dst2"} {
		ti, err := cl.RestoreTable(ctx, "b1", name)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Name != name || ti.TabletCount != 2 || len(ti.Families) != 1 || ti.Families[0].Name != "cf" {
			t.Fatalf("restored table %+v", ti)
		}
		if err := c.WaitServing(ctx, name); err != nil {
			t.Fatal(err)
		}
		sameRows(t, "restored "+name, backupRows(t, ctx, cl, name), want)
		tablets, err := cl.Tablets(ctx, name)
		if err != nil || len(tablets) != 2 || tablets[1].StartRow != "row100" {
			t.Fatalf("restored tablets %+v %v", tablets, err)
		}
	}
	if _, err := cl.RestoreTable(ctx, "b1", "dst"); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("restore over an existing table: %v, want AlreadyExists", err)
	}
	// The restored table takes writes.
	dst, err := cl.Open(ctx, "dst")
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Put(ctx, "new", "cf", "v", []byte("x")); err != nil {
		t.Fatal(err)
	}
	wantDst := maps.Clone(want)
	wantDst["new"] = "x"

	if err := cl.DeleteBackup(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetBackup(ctx, "b1"); status.Code(err) != codes.NotFound {
		t.Fatalf("get of a deleted backup: %v, want NotFound", err)
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	gcPass()
	sameRows(t, "dst after compaction and gc", backupRows(t, ctx, cl, "dst"), wantDst)
	sameRows(t, "dst2 after compaction and gc", backupRows(t, ctx, cl, "dst2"), want)
}

// TestBackupAdmin: get, list, update and the refusals of bad requests.
func TestBackupAdmin(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	cl := c.Client()
	for _, name := range []string{"t1", "t2"} {
		if err := c.CreateTable(ctx, client.TableSpec{Name: name, Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
			t.Fatal(err)
		}
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for _, b := range []struct{ table, name string }{{"t1", "a"}, {"t2", "b"}, {"t1", "c"}} {
		if _, err := cl.CreateBackup(ctx, b.table, b.name, exp); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"backup of a missing table", func() error { _, err := cl.CreateBackup(ctx, "nope", "x", exp); return err }(), codes.NotFound},
		{"expiry in the past", func() error { _, err := cl.CreateBackup(ctx, "t1", "x", time.Now().Add(-time.Minute)); return err }(), codes.InvalidArgument},
		{"bad name", func() error { _, err := cl.CreateBackup(ctx, "t1", "a/b", exp); return err }(), codes.InvalidArgument},
		{"get a missing backup", func() error { _, err := cl.GetBackup(ctx, "x"); return err }(), codes.NotFound},
		{"update into the past", func() error { _, err := cl.UpdateBackup(ctx, "a", time.Now().Add(-time.Minute)); return err }(), codes.InvalidArgument},
		{"delete a missing backup", cl.DeleteBackup(ctx, "x"), codes.NotFound},
		{"restore a missing backup", func() error { _, err := cl.RestoreTable(ctx, "x", "r"); return err }(), codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status.Code(tc.err) != tc.want {
				t.Fatalf("%v, want %v", tc.err, tc.want)
			}
		})
	}
	all, err := cl.ListBackups(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range all {
		names = append(names, b.Name+":"+b.SourceTable)
	}
	if fmt.Sprint(names) != "[a:t1 b:t2 c:t1]" {
		t.Fatalf("ListBackups = %v", names)
	}
	of, err := cl.ListBackups(ctx, "t1")
	if err != nil || len(of) != 2 {
		t.Fatalf("ListBackups(t1) = %v %v", of, err)
	}
	later := exp.Add(time.Hour)
	if b, err := cl.UpdateBackup(ctx, "a", later); err != nil || !b.Expires.Equal(later) {
		t.Fatalf("UpdateBackup = %+v %v", b, err)
	}
	if b, err := cl.GetBackup(ctx, "a"); err != nil || !b.Expires.Equal(later) || b.SourceTable != "t1" {
		t.Fatalf("GetBackup after update = %+v %v", b, err)
	}
}

// TestBackupCutUnderWrites: writers run, and tablets split, while backups
// are taken; every write acknowledged before a CreateBackup call started
// is in the table restored from that backup (a write acknowledged later may
// be in or out).
func TestBackupCutUnderWrites(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 2, MemLimit: 64 << 20})
	ctx := ctxT(t)
	cl := c.Client()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "w", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	const writers = 4
	var mu sync.Mutex
	acked := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("r%02d-%05d", (i*7+w)%100, i), fmt.Sprintf("w%d-%d", w, i)
				if err := tbl.Put(ctx, k, "cf", "v", []byte(v)); err != nil {
					t.Errorf("put %s: %v", k, err)
					return
				}
				mu.Lock()
				acked[k] = v
				mu.Unlock()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for round := range 3 {
		time.Sleep(100 * time.Millisecond)
		// Splits while the backup runs: between its flushes and its record.
		split := make(chan error, 1)
		go func() { split <- cl.SplitTablet(ctx, "w", fmt.Sprintf("r%02d", 20+30*round)) }()
		mu.Lock()
		before := maps.Clone(acked)
		mu.Unlock()
		name := fmt.Sprintf("cut%d", round)
		if _, err := cl.CreateBackup(ctx, "w", name, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := <-split; err != nil {
			t.Logf("split %d: %v", round, err)
		}
		if _, err := cl.RestoreTable(ctx, name, name); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitServing(ctx, name); err != nil {
			t.Fatal(err)
		}
		got := backupRows(t, ctx, cl, name)
		missing := 0
		for k, v := range before {
			if got[k] != v {
				if missing < 5 {
					t.Errorf("backup %s: row %s acknowledged before it = %q, want %q", name, k, got[k], v)
				}
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("backup %s misses %d of the %d writes acknowledged before it", name, missing, len(before))
		}
		t.Logf("backup %s: all %d writes acknowledged before it, %d rows in all", name, len(before), len(got))
	}
}

// TestBackupSplitBetweenFlushAndRecord: a split that commits after the
// backup's flushes and before its record makes the record refused (the
// children were not flushed for it); the master flushes again and records
// the children, and the restored table holds every row written before the
// call, at the children's split point.
func TestBackupSplitBetweenFlushAndRecord(t *testing.T) {
	t.Parallel()
	var cl *client.Client
	var c *inproc.Cluster
	var calls atomic.Int32
	hookErr := make(chan error, 1)
	c = inproc.Start(t, inproc.Options{TServers: 1, MemLimit: 64 << 20, Master: func(mc *master.Config) {
		mc.BackupFlushedHook = func(table string) {
			if calls.Add(1) != 1 {
				return
			}
			ctx := ctxT(t)
			err := cl.SplitTablet(ctx, table, "row100")
			for err == nil {
				ts, terr := cl.Tablets(ctx, table)
				if terr != nil {
					err = terr
				} else if len(ts) == 2 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			hookErr <- err
		}
	}})
	ctx := ctxT(t)
	cl = c.Client()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "s", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 200 {
		k, v := rowKey(i), fmt.Sprintf("v%d", i)
		if err := tbl.Put(ctx, k, "cf", "v", []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	info, err := cl.CreateBackup(ctx, "s", "b", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-hookErr; err != nil {
		t.Fatalf("split in the hook: %v", err)
	}
	if n := calls.Load(); n < 2 {
		t.Fatalf("the flushes ran %d times, want again after the refused record", n)
	}
	if !slices.Equal(info.SplitKeys, []string{"row100"}) {
		t.Fatalf("backup split keys %v, want the split's children", info.SplitKeys)
	}
	if _, err := cl.RestoreTable(ctx, "b", "r"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "restored", backupRows(t, ctx, cl, "r"), want)
}
