package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// bkRecord is one row a writer wrote once, as three cells holding one
// value (cf:a, cf:b, meta:c): when its write started, and when it was
// acknowledged (zero: it failed, so it may be there, whole, or not).
type bkRecord struct {
	val            string
	started, acked time.Time
}

// bkLoad runs writers that each write fresh rows and records every row.
type bkLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	rows   map[string]bkRecord
	acks   int
}

// bkStart starts writers calling write(ctx, row, value) on fresh rows
// spread over "r00000…" to "r99999…", until halt.
func bkStart(ctx context.Context, seed uint64, writers int, write func(ctx context.Context, row, val string) error) *bkLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &bkLoad{cancel: cancel, rows: map[string]bkRecord{}}
	for w := range writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for seq := 0; ctx.Err() == nil; seq++ {
				row := fmt.Sprintf("r%05d-w%d-%07d", rng.IntN(100_000), w, seq)
				val := fmt.Sprintf("v%d-%d-%d", w, seq, rng.Uint64())
				rec := bkRecord{val: val, started: time.Now()}
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err := write(wctx, row, val)
				cancel()
				if err == nil {
					rec.acked = time.Now()
				}
				l.add(row, rec)
			}
		}()
	}
	return l
}

func (l *bkLoad) add(row string, rec bkRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rows[row] = rec
	if !rec.acked.IsZero() {
		l.acks++
	}
}

func (l *bkLoad) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}

// waitAcked waits until n more writes were acknowledged.
func (l *bkLoad) waitAcked(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	waitMoreAcks(t, ctx, l.acked, n)
}

// halt stops the writers and returns every row written.
func (l *bkLoad) halt() map[string]bkRecord {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rows
}

// bkCells is what a scan read of a row: its cf:a, cf:b and meta:c
// values, and how many cells it has.
type bkCells struct {
	a, b, c string
	n       int
}

// bkCheck checks the rows read from a table (or from a table restored
// from a backup whose CreateBackup started at start and returned at end;
// zero end: unknown, a call that failed): every row acknowledged before
// start reads back with its value; every row read is whole (three cells,
// one value), was written with that value, and its write started before
// end. It returns the count of rows read and one error naming at most 10
// bad rows.
func bkCheck(rows map[string]bkRecord, got map[string]bkCells, start, end time.Time) (int, error) {
	var bad []string
	for k, rec := range rows {
		if !rec.acked.IsZero() && rec.acked.Before(start) {
			if _, ok := got[k]; !ok {
				bad = append(bad, fmt.Sprintf("row %s acknowledged %v before the cut is missing", k, start.Sub(rec.acked)))
			}
		}
	}
	for k, g := range got {
		rec, ok := rows[k]
		switch {
		case g.n != 3 || g.a != g.b || g.b != g.c:
			bad = append(bad, fmt.Sprintf("row %s is not whole: %d cells %q %q %q", k, g.n, g.a, g.b, g.c))
		case !ok:
			bad = append(bad, fmt.Sprintf("row %s = %q was never written", k, g.a))
		case g.a != rec.val:
			bad = append(bad, fmt.Sprintf("row %s = %q, written %q", k, g.a, rec.val))
		case !end.IsZero() && rec.started.After(end):
			bad = append(bad, fmt.Sprintf("row %s was written %v after the backup ended", k, rec.started.Sub(end)))
		}
	}
	if len(bad) == 0 {
		return len(got), nil
	}
	sort.Strings(bad)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
	}
	return len(got), errors.New(strings.Join(bad, "\n"))
}

// bkScanNative reads every row of a table with the native client.
func bkScanNative(ctx context.Context, tbl *client.Table) (map[string]bkCells, error) {
	got := map[string]bkCells{}
	err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
		a, _ := r.Value("cf", "a")
		b, _ := r.Value("cf", "b")
		c, _ := r.Value("meta", "c")
		got[r.Key] = bkCells{a: string(a), b: string(b), c: string(c), n: len(r.Cells)}
		return true
	})
	return got, err
}

// bkNativeWrite writes a row's three cells in one mutation with the native
// client.
func bkNativeWrite(tbl *client.Table) func(ctx context.Context, row, val string) error {
	return func(ctx context.Context, row, val string) error {
		m := client.NewMutation()
		ts := time.Now().UnixMicro()
		m.Set("cf", "a", ts, []byte(val))
		m.Set("cf", "b", ts, []byte(val))
		m.Set("meta", "c", ts, []byte(val))
		return tbl.Apply(ctx, row, m)
	}
}

// bkSplitKeys cut the writers' key space into n tablets.
func bkSplitKeys(n int) []string {
	var keys []string
	for i := 1; i < n; i++ {
		keys = append(keys, fmt.Sprintf("r%05d", i*100_000/n))
	}
	return keys
}

// TestBackupRestoreOfficialClient: the official Go admin and data clients,
// through the frontend, load a table of 8 tablets over 3 tservers, keep
// writing, create a backup while a tserver is killed with SIGKILL (a
// seeded moment between the call and shortly after it), delete the
// table and restore the backup under a new name. The restored table holds
// every row acknowledged before CreateBackup started, each row whole, and
// no row whose write started after CreateBackup returned.
func TestBackupRestoreOfficialClient(t *testing.T) {
	skipShort(t, "backup and restore with the official client and a tserver kill")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	c, _ := startCluster(t, cluster.Options{TServers: 3, Lease: 3 * time.Second, Heartbeat: 300 * time.Millisecond,
		Flags: []string{"--split-threshold=-1", "--mem-limit=4194304"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, bt := officialClients(t, ctx, c.BigtableAddr(), "proj", "inst")
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "orders", SplitKeys: bkSplitKeys(8),
		Families: map[string]bigtable.GCPolicy{"cf": bigtable.MaxVersionsPolicy(1), "meta": bigtable.MaxVersionsPolicy(1)}}); err != nil {
		t.Fatalf("CreateTableFromConf: %v", err)
	}
	if err := c.WaitServing(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	src := bt.Open("orders")
	mut := func(val string) *bigtable.Mutation {
		m := bigtable.NewMutation()
		ts := bigtable.Now()
		m.Set("cf", "a", ts, []byte(val))
		m.Set("cf", "b", ts, []byte(val))
		m.Set("meta", "c", ts, []byte(val))
		return m
	}
	// The load: 4 000 rows in bulk, then writers.
	load := bkStart(ctx, seed, 4, func(ctx context.Context, row, val string) error { return src.Apply(ctx, row, mut(val)) })
	defer load.halt()
	for batch := range 8 {
		var rows []string
		var ms []*bigtable.Mutation
		var recs []bkRecord
		started := time.Now()
		for i := range 500 {
			rows = append(rows, fmt.Sprintf("r%05d-bulk-%d", rng.IntN(100_000), batch*500+i))
			recs = append(recs, bkRecord{val: fmt.Sprintf("bulk-%d", batch*500+i), started: started})
			ms = append(ms, mut(recs[i].val))
		}
		errs, err := src.ApplyBulk(ctx, rows, ms)
		if err != nil {
			t.Fatalf("ApplyBulk: %v", err)
		}
		for i, row := range rows {
			if errs == nil || errs[i] == nil {
				recs[i].acked = time.Now()
			}
			load.add(row, recs[i])
		}
	}
	load.waitAcked(t, ctx, 500)

	// The backup, and a tserver killed during it or just after.
	victim := rng.IntN(c.NumTServers())
	killAfter := time.Duration(rng.IntN(300)) * time.Millisecond
	expire := time.Now().Add(24 * time.Hour)
	cut := time.Now()
	done := make(chan error, 1)
	go func() { done <- adm.CreateBackup(ctx, "orders", "c1", "bk", expire) }()
	time.Sleep(killAfter)
	if err := c.KillTServer(victim); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("CreateBackup with tserver %d killed %v after the call: %v", victim, killAfter, err)
	}
	ended := time.Now()
	backupTook := ended.Sub(cut)
	// Writes after the backup, which the restored table must not hold.
	load.waitAcked(t, ctx, 200)
	rows := load.halt()

	if err := adm.DeleteTable(ctx, "orders"); err != nil {
		t.Fatalf("DeleteTable: %v", err)
	}
	info, err := adm.BackupInfo(ctx, "c1", "bk")
	if err != nil || info.SizeBytes <= 0 || info.SourceTable != "orders" {
		t.Fatalf("BackupInfo after the table's deletion = %+v, %v; want its source and a size", info, err)
	}
	began := time.Now()
	if err := adm.RestoreTable(ctx, "orders-restored", "c1", "bk"); err != nil {
		t.Fatalf("RestoreTable: %v", err)
	}
	restoreTook := time.Since(began)
	if err := c.WaitServing(ctx, "orders-restored"); err != nil {
		t.Fatal(err)
	}
	servingTook := time.Since(began)
	got := map[string]bkCells{}
	readBegan := time.Now()
	if err := bt.Open("orders-restored").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		var g bkCells
		for _, items := range r {
			for _, it := range items {
				g.n++
				switch it.Column {
				case "cf:a":
					g.a = string(it.Value)
				case "cf:b":
					g.b = string(it.Value)
				case "meta:c":
					g.c = string(it.Value)
				}
			}
		}
		got[r.Key()] = g
		return true
	}); err != nil {
		t.Fatalf("ReadRows of the restored table: %v", err)
	}
	readTook := time.Since(readBegan)
	if _, err := bkCheck(rows, got, cut, ended); err != nil {
		t.Fatalf("the table restored from a backup taken while tserver %d was killed %v after the call:\n%v", victim, killAfter, err)
	}
	before, acked := 0, 0
	for _, rec := range rows {
		if !rec.acked.IsZero() {
			acked++
			if rec.acked.Before(cut) {
				before++
			}
		}
	}
	t.Logf("rows: %d acknowledged (%d before CreateBackup started), %d in the restored table; tserver %d killed %v after CreateBackup was called",
		acked, before, len(got), victim, killAfter)
	t.Logf("CreateBackup %v; backup size %d bytes; RestoreTable %v, every tablet serving after %v; restored table read in %v",
		backupTook.Round(time.Millisecond), info.SizeBytes, restoreTook.Round(time.Millisecond), servingTook.Round(time.Millisecond), readTook.Round(time.Millisecond))
}

// bkStep is one crash of TestBackupSIGKILLAtEachStep at a master.BackupStep
// (1 flush, 2 record, 3 recorded, 4 restore recorded).
type bkStep struct {
	name string
	step int
	// tserver: the leader holds the step ("pause:N") while the test kills
	// a tserver; else the leader kills itself there.
	tserver bool
}

var bkSteps = []bkStep{
	{"leader killed before the flushes", 1, false},
	{"leader killed after the flushes, before the record", 2, false},
	{"leader killed after the record", 3, false},
	{"leader killed after the restore record", 4, false},
	{"tserver killed before the flushes", 1, true},
	{"tserver killed after the flushes, before the record", 2, true},
	{"tserver killed after the record", 3, true},
	{"tserver killed while the restored tablets are assigned and load", 4, true},
}

// bkCut is a backup the test found complete: when its CreateBackup started,
// and when it returned (zero: it failed, and the backup was recorded by a
// retry or before the failure).
type bkCut struct {
	name       string
	start, end time.Time
}

// TestBackupSIGKILLAtEachStep kills with SIGKILL, while writers run, the
// leader of three masters at each step of a backup and of a restore (the
// masters' backup fault file), then a tserver while the leader holds each
// step. After each crash a backup is complete or absent (complete when
// the call succeeded or the crash came after its record) and a restored
// table exists and serves (the crash came after its record). At the end,
// with orphan passes running every second on every tserver, the live table
// reads every acknowledged row; then the table is dropped, the orphan
// passes delete its blocks that no backup names, and every complete
// backup, restored, holds its cut (bkCheck), as does every table restored
// during a crash.
func TestBackupSIGKILLAtEachStep(t *testing.T) {
	skipShort(t, "SIGKILL at each step of a backup and a restore")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	fault := filepath.Join(t.TempDir(), "backup-fault")
	began := time.Now()
	c, cl := startCluster(t, cluster.Options{Masters: 3, TServers: 2, Lease: 3 * time.Second, Heartbeat: 300 * time.Millisecond,
		Flags:       []string{"--split-threshold=-1", "--mem-limit=1048576", "--orphan-every=1s", "--orphan-grace=1ms"},
		MasterFlags: []string{"--auto-merge=false", "--backup-fault-file=" + fault}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	src := createSpec(t, ctx, c, cl, client.TableSpec{Name: "src", Families: []client.FamilySpec{{Name: "cf"}, {Name: "meta"}}, SplitKeys: bkSplitKeys(4)})
	load := bkStart(ctx, seed, 4, bkNativeWrite(src))
	defer load.halt()
	load.waitAcked(t, ctx, 300)
	expire := time.Now().Add(24 * time.Hour)
	base := bkCut{name: "base", start: time.Now()}
	if _, err := cl.CreateBackup(ctx, "src", "base", expire); err != nil {
		t.Fatal(err)
	}
	base.end = time.Now()
	cuts := []bkCut{base}
	var restored []string
	for i, st := range bkSteps {
		load.waitAcked(t, ctx, 100)
		name := fmt.Sprintf("s%d", i)
		content := strconv.Itoa(st.step)
		if st.tserver {
			content = "pause:" + content
		}
		if err := os.WriteFile(fault, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
			defer ccancel()
			var err error
			if st.step == 4 {
				_, err = cl.RestoreTable(cctx, "base", name)
			} else {
				_, err = cl.CreateBackup(cctx, "src", name, expire)
			}
			done <- err
		}()
		var callErr error
		returned := false
		wait.ForCtx(t, ctx, st.name+": the fault file taken", func() error {
			if _, err := os.Stat(fault); errors.Is(err, os.ErrNotExist) {
				return nil
			}
			select {
			case callErr = <-done:
				returned = true
				return nil
			default:
				return errors.New("the call has not reached the step")
			}
		})
		if returned {
			t.Fatalf("%s: the call ended (%v) without reaching step %d", st.name, callErr, st.step)
		}
		restart := func() error { return nil }
		victim := ""
		if st.tserver {
			i := bkTServerOf(ctx, cl, c, name, st.step == 4, i)
			victim = c.TServerAddr(i)
			if err := c.KillTServer(i); err != nil {
				t.Fatal(err)
			}
			restart = func() error { return c.RestartTServer(i) }
		} else {
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			i := mgDead(dctx, c.MasterAddrs())
			dcancel()
			if i < 0 {
				t.Fatalf("%s: no master died", st.name)
			}
			victim = c.MasterAddrs()[i]
			restart = func() error { return c.RestartMaster(i) }
		}
		callErr = <-done
		end := time.Now()
		if err := restart(); err != nil {
			t.Fatalf("%s: restart %s: %v", st.name, victim, err)
		}
		// A tserver's death only delays a call (its flushes are retried, a
		// restored tablet is assigned again); the leader's is retried on the
		// next leader, where a retry finds the restore its lost attempt made.
		if callErr != nil && (st.tserver || st.step == 4) {
			t.Fatalf("%s: the call failed: %v", st.name, callErr)
		}
		outcome := ""
		if st.step == 4 {
			// The crash came after the record: the table exists, whole.
			if err := c.WaitServing(ctx, name); err != nil {
				t.Fatalf("%s: restored table %s (call: %v): %v", st.name, name, callErr, err)
			}
			restored = append(restored, name)
			outcome = "table restored, serving"
		} else {
			_, err := cl.GetBackup(ctx, name)
			exists := err == nil
			if !exists && status.Code(err) != codes.NotFound {
				t.Fatalf("%s: GetBackup: %v", st.name, err)
			}
			if !exists && (callErr == nil || st.step == 3) {
				t.Fatalf("%s: backup %s absent; the call returned %v", st.name, name, callErr)
			}
			outcome = "no backup"
			if exists {
				cut := bkCut{name: name, start: start}
				if callErr == nil {
					cut.end = end
				}
				cuts = append(cuts, cut)
				outcome = "backup complete"
			}
		}
		t.Logf("%s: killed %s; call returned %v after %v; %s", st.name, victim, callErr, end.Sub(start).Round(time.Millisecond), outcome)
	}
	rows := load.halt()
	if err := c.WaitServing(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	// Rows not in any backup, in files of their own, then orphan passes.
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	got, err := bkScanNative(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := bkCheck(rows, got, time.Now(), time.Time{}); err != nil {
		t.Fatalf("the live table after the crashes and orphan passes:\n%v", err)
	} else {
		t.Logf("live table: %d rows, every acknowledged one", n)
	}
	orphans := func() float64 {
		var sum float64
		for i := range c.NumTServers() {
			sum += scrape(t, c.TServerHTTPAddr(i))[`bighive_checkpoint_deleted_blocks_total{cause="orphan"}`]
		}
		return sum
	}
	before := orphans()
	if err := cl.DeleteTable(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	wait.ForCtx(t, ctx, "the orphan passes deleting the dropped table's blocks no backup names", func() error {
		if n := orphans(); n <= before {
			return fmt.Errorf("%.0f orphan blocks deleted, %.0f before the drop", n, before)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // more passes
	t.Logf("orphan passes deleted %.0f blocks after the drop", orphans()-before)
	check := func(table string, cut bkCut) {
		t.Helper()
		if err := c.WaitServing(ctx, table); err != nil {
			t.Fatal(err)
		}
		tbl, err := cl.Open(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bkScanNative(ctx, tbl)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		n, err := bkCheck(rows, got, cut.start, cut.end)
		if err != nil {
			t.Fatalf("table %s (backup %s):\n%v", table, cut.name, err)
		}
		t.Logf("table %s of backup %s: %d rows, its cut", table, cut.name, n)
	}
	for _, table := range restored {
		check(table, base)
	}
	for _, cut := range cuts {
		if _, err := cl.RestoreTable(ctx, cut.name, "v-"+cut.name); err != nil {
			t.Fatal(err)
		}
		check("v-"+cut.name, cut)
	}
	bs, err := cl.ListBackups(ctx, "")
	if err != nil || len(bs) != len(cuts) {
		t.Fatalf("ListBackups = %d backups (%v), want the %d complete ones", len(bs), err, len(cuts))
	}
	for _, b := range bs {
		if !b.Ready || b.ExclusiveBytes+b.SharedBytes <= 0 {
			t.Errorf("backup %s: ready %v, %d bytes", b.Name, b.Ready, b.ExclusiveBytes+b.SharedBytes)
		}
	}
	t.Logf("%d crashes, %d complete backups, %d tables restored during a crash, in %v", len(bkSteps), len(cuts), len(restored), time.Since(began).Round(time.Second))
}

// bkTServerOf picks the tserver to kill: for a restore, one a tablet of
// the restored table is assigned to, once one is (for at most 2 s); else,
// or when none is, the one alternation gives (n).
func bkTServerOf(ctx context.Context, cl *client.Client, c *cluster.Cluster, table string, restore bool, n int) int {
	if restore {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			ts, _ := cl.Tablets(ctx, table)
			for _, tb := range ts {
				if i := spIndex(c, tb.TServer); i >= 0 {
					return i
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return n % c.NumTServers()
}
