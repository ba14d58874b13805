package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"bighive/client"
	"bighive/e2e/cluster"
)

// mgCluster starts two tservers that never split on their own and a
// master with the given flags.
func mgCluster(t *testing.T, tsFlags, masterFlags []string) (*cluster.Cluster, *client.Client) {
	t.Helper()
	return startCluster(t, cluster.Options{Masters: 1, TServers: 2, Lease: 3 * time.Second, Heartbeat: 300 * time.Millisecond,
		Flags: append([]string{"--split-threshold=-1"}, tsFlags...), MasterFlags: masterFlags})
}

// mgSplitKeys are n-1 keys that cut the writers' key space ("u000000…"
// to "u999999…") into n tablets.
func mgSplitKeys(n int) []string {
	var keys []string
	for i := 1; i < n; i++ {
		keys = append(keys, fmt.Sprintf("u%06d", i*1_000_000/n))
	}
	return keys
}

// mgCheckTiling checks that the table's tablets cover the key space
// exactly: the first starts at "", each ends where the next starts, the
// last is unbounded.
func mgCheckTiling(t *testing.T, tablets []client.TabletInfo) {
	t.Helper()
	want := ""
	for i, tb := range tablets {
		if tb.StartRow != want {
			t.Fatalf("tablet %d (%s) starts at %q, want %q: a gap or an overlap in %v", i, tb.ID, tb.StartRow, want, tablets)
		}
		if tb.EndRow == "" && i != len(tablets)-1 {
			t.Fatalf("tablet %d (%s) is unbounded but not the last: %v", i, tb.ID, tablets)
		}
		want = tb.EndRow
	}
	if want != "" {
		t.Fatalf("the last tablet ends at %q, want unbounded", want)
	}
}

// mgDead returns the index of a tserver that does not accept connections.
func mgDead(ctx context.Context, c *cluster.Cluster) int {
	for {
		for i := 0; i < c.NumTServers(); i++ {
			conn, err := net.DialTimeout("tcp", c.TServerAddr(i), time.Second)
			if err != nil {
				return i
			}
			conn.Close()
		}
		if ctx.Err() != nil {
			return -1
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMergeSIGKILLAtEachStep kills the merging tserver with SIGKILL at
// each step of the merge (a fault file read by its merge hook) while
// writers run. Before the commit (steps 1–5) both parents are intact (same
// tablet count, unless the client's retry merged them on the surviving
// tserver: then one less); after it (step 6) the merged tablet replaces
// them. After
// every recovery the tablets tile the key space with no gap or overlap,
// and at the end every acknowledged row reads back exactly once. Last, the
// master is killed with SIGKILL while the tserver holds step 5.
func TestMergeSIGKILLAtEachStep(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	fault := filepath.Join(t.TempDir(), "merge-fault")
	c, cl := mgCluster(t, []string{"--merge-fault-file=" + fault, "--mem-limit=1048576"}, []string{"--auto-merge=false"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tbl := createSpec(t, ctx, c, cl, client.TableSpec{Name: "mkill", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: mgSplitKeys(8)})
	load := spStartLoad(ctx, tbl, seed, 4)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	for step := 1; step <= 6; step++ {
		for load.count() < step*100 {
			time.Sleep(20 * time.Millisecond)
		}
		before, err := cl.Tablets(ctx, "mkill")
		if err != nil {
			t.Fatal(err)
		}
		mgCheckTiling(t, before)
		if err := os.WriteFile(fault, []byte(strconv.Itoa(step)), 0o644); err != nil {
			t.Fatal(err)
		}
		// Merge the first two tablets (moving one first when needed).
		mctx, mcancel := context.WithTimeout(ctx, 60*time.Second)
		_, mergeErr := cl.MergeTablets(mctx, "mkill", "")
		mcancel()
		if _, serr := os.Stat(fault); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("step %d: the merge did not reach the fault (err %v)", step, mergeErr)
		}
		// The client retries an Unavailable merge: once the dead tserver's
		// tablets are recovered on the other one, a retry may merge them
		// there. Either way the count says whether a merge committed.
		committed := mergeErr == nil || step == 6
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		victim := mgDead(dctx, c)
		dcancel()
		if err := c.WaitServing(ctx, "mkill"); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		after, err := cl.Tablets(ctx, "mkill")
		if err != nil {
			t.Fatal(err)
		}
		mgCheckTiling(t, after)
		wantCount := len(before)
		if committed {
			wantCount--
		}
		if len(after) != wantCount {
			t.Fatalf("step %d: %d tablets after the crash, want %d", step, len(after), wantCount)
		}
		t.Logf("step %d: killed tserver %d; merge call err %v; %d tablets, %d writes acknowledged so far", step, victim, mergeErr, len(after), load.count())
		if victim >= 0 {
			if err := c.RestartTServer(victim); err != nil {
				t.Fatalf("restart tserver %d: %v", victim, err)
			}
		}
	}
	// The master dies while the tserver holds step 5 (both parents fenced,
	// the report about to go): the report fails or finds a new master
	// process; either way the tablets tile the key space afterwards.
	before, err := cl.Tablets(ctx, "mkill")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fault, []byte("pause:5"), 0o644); err != nil {
		t.Fatal(err)
	}
	merged := make(chan error, 1)
	go func() {
		mctx, mcancel := context.WithTimeout(ctx, 60*time.Second)
		defer mcancel()
		_, err := cl.MergeTablets(mctx, "mkill", "")
		merged <- err
	}()
	for {
		if _, serr := os.Stat(fault); errors.Is(serr, os.ErrNotExist) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.KillMaster(0); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartMaster(0); err != nil {
		t.Fatal(err)
	}
	mergeErr := <-merged
	if err := c.WaitServing(ctx, "mkill"); err != nil {
		t.Fatal(err)
	}
	after, err := cl.Tablets(ctx, "mkill")
	if err != nil {
		t.Fatal(err)
	}
	mgCheckTiling(t, after)
	if len(after) != len(before) && len(after) != len(before)-1 {
		t.Fatalf("master killed mid-merge: %d tablets, want %d or %d", len(after), len(before), len(before)-1)
	}
	t.Logf("master killed at step 5: merge call err %v; %d tablets (before %d)", mergeErr, len(after), len(before))
	want := load.halt()
	if err := c.WaitServing(ctx, "mkill"); err != nil {
		t.Fatal(err)
	}
	spVerify(t, ctx, tbl, want)
	t.Logf("%d acknowledged rows read back after 6 tserver crashes and a master crash", len(want))
}

// TestMergeEmptiedTableToTwo is the merge target: a table pre-split into
// 32 tablets, then emptied but for a few rows, merges down to at most 2
// tablets by the automatic merger (small thresholds and a short check
// interval) while writers keep writing; every remaining row and every
// acknowledged write reads back, deleted rows stay deleted, and the
// tablets tile the key space. It prints how long the merging took.
func TestMergeEmptiedTableToTwo(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c, cl := mgCluster(t, nil, []string{"--merge-threshold=67108864", "--merge-check-interval=300ms", "--merge-min-age=1ms"})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "shrink", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: mgSplitKeys(32)}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := c.WaitServing(ctx, "shrink"); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "shrink")
	if err != nil {
		t.Fatal(err)
	}
	load := spStartLoad(ctx, tbl, seed, 2)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	// Fill every tablet, then delete all rows but every 32nd.
	kept := map[string]string{}
	var deleted []string
	for i := 0; i < 640; i++ {
		k := fmt.Sprintf("u%06d-fill", i*1_000_000/640)
		v := fmt.Sprintf("fill-%d", i)
		if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if i%32 == 0 {
			kept[k] = v
		} else {
			deleted = append(deleted, k)
		}
	}
	for _, k := range deleted {
		m := client.NewMutation()
		m.DeleteRow()
		if err := tbl.Apply(ctx, k, m); err != nil {
			t.Fatal(err)
		}
	}
	filled := time.Since(began)
	var n int
	for {
		ts, err := cl.Tablets(ctx, "shrink")
		if err == nil {
			n = len(ts)
			if n <= 2 {
				mgCheckTiling(t, ts)
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("still %d tablets after %s", n, time.Since(began))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(began)
	want := load.halt()
	if err := c.WaitServing(ctx, "shrink"); err != nil {
		t.Fatal(err)
	}
	for k, v := range kept {
		want[k] = v
	}
	spVerify(t, ctx, tbl, want)
	for _, k := range deleted {
		r, err := tbl.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if len(r.Cells) != 0 {
			t.Fatalf("deleted row %s reads back %d cells after the merges", k, len(r.Cells))
		}
	}
	t.Logf("32 tablets merged down to %d in %s from serving (the fill and deletes of 640 rows took %s of it, merging meanwhile; 2 tservers, 300 ms checks); %d kept rows and %d writes of 2 concurrent writers read back",
		n, took.Round(time.Millisecond), filled.Round(time.Millisecond), len(kept), len(want)-len(kept))
}
