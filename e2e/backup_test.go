package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

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
	want := l.acked() + n
	wait.ForCtx(t, ctx, fmt.Sprintf("%d acknowledged writes", want), func() error {
		if have := l.acked(); have < want {
			return fmt.Errorf("%d acknowledged", have)
		}
		return nil
	})
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
