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
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// mgCluster starts two tservers that never split on their own and the
// given number of masters with the given flags.
func mgCluster(t *testing.T, masters int, tsFlags, masterFlags []string) (*cluster.Cluster, *client.Client) {
	t.Helper()
	return startCluster(t, mgOptions(cluster.Options{}, masters, tsFlags, masterFlags))
}

// mgOptions is opts (its Hosts, say) with mgCluster's masters, tservers,
// lease, heartbeat and flags.
func mgOptions(opts cluster.Options, masters int, tsFlags, masterFlags []string) cluster.Options {
	opts.Masters, opts.TServers, opts.Lease, opts.Heartbeat = masters, 2, spLease, 300*time.Millisecond
	opts.Flags, opts.MasterFlags = append([]string{"--split-threshold=-1"}, tsFlags...), masterFlags
	return opts
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

// mgDead returns the index of an address that does not accept
// connections, or -1 when ctx ends first.
func mgDead(ctx context.Context, addrs []string) int {
	dead := -1
	_ = wait.Until(ctx, func() error {
		for i, a := range addrs {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				dead = i
				return nil
			}
			conn.Close()
		}
		return errors.New("every address accepts connections")
	})
	return dead
}

// mgTServerAddrs lists the cluster's tserver addresses.
func mgTServerAddrs(c *cluster.Cluster) []string {
	var out []string
	for i := 0; i < c.NumTServers(); i++ {
		out = append(out, c.TServerAddr(i))
	}
	return out
}

// mgPairRow is a row of the first tablet of a pair of adjacent tablets
// served on two tservers (apart) or on one; with no such pair, the first
// tablet's.
func mgPairRow(tablets []client.TabletInfo, apart bool) (string, bool) {
	for i := 0; i+1 < len(tablets); i++ {
		if (tablets[i].TServerUUID != tablets[i+1].TServerUUID) == apart {
			return tablets[i].StartRow, true
		}
	}
	return "", false
}

// mgMasterStep is one crash of the leader master during a merge.
type mgMasterStep struct {
	name string
	// tserver: the fault is the tserver's "pause:N" (it holds step N)
	// and the test kills the leader meanwhile; else the leader's own fault
	// file names master.MergeStep N and it kills itself there.
	tserver bool
	step    int
	// apart: merge a pair served on two tservers (a move comes first).
	apart bool
	// committed: the merge must have committed after the crash (else
	// either outcome is allowed: it commits when a retry reaches the new
	// leader in time).
	committed bool
}

// mgMasterSteps are the points where the leader holds state of a merge:
// its move half done, its request about to go, the tserver fenced (the
// request in flight), the report received before and after the MetaMerge
// commit, the tserver's report in flight.
var mgMasterSteps = []mgMasterStep{
	{name: "moved tablet stopped on its old owner, not yet assigned to the new", step: 1, apart: true},
	{name: "merge request about to go", step: 2},
	{name: "tserver fenced, request in flight", tserver: true, step: 3},
	{name: "report received, MetaMerge not proposed", step: 3},
	{name: "MetaMerge committed, report not answered", step: 4, committed: true},
	{name: "tserver reporting", tserver: true, step: 5},
}

// TestMergeSIGKILLAtEachStep kills with SIGKILL, while writers run, first
// the leader of three masters at each step of a merge where it holds
// state (mgMasterSteps: a fault file read by the masters' merge hook, or
// the tserver's holding a step while the test kills the leader), then the
// merging tserver at each of its six steps (its merge hook's fault file).
// After every crash the tablets tile the key space with no gap or overlap
// and the tablet count says whether the merge committed: a merge that
// answered success, or crashed after its commit, is one tablet less;
// before the commit both parents are intact unless a retry (the client's,
// or the tserver's report to the new leader) completed the merge. At the
// end every acknowledged row reads back exactly once.
func TestMergeSIGKILLAtEachStep(t *testing.T) {
	skipShort(t, "SIGKILL at each step of a merge")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	tsFault := filepath.Join(t.TempDir(), "tserver-merge-fault")
	mFault := filepath.Join(t.TempDir(), "master-merge-fault")
	began := time.Now()
	c, cl := mgCluster(t, 3, []string{"--merge-fault-file=" + tsFault, "--mem-limit=1048576"},
		[]string{"--auto-merge=false", "--merge-fault-file=" + mFault})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tbl := createSpec(t, ctx, c, cl, client.TableSpec{Name: "mkill", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: mgSplitKeys(16)})
	load := spStartLoad(ctx, tbl, seed, 4)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	crashes := 0
	// crash merges the pair at row with the fault armed, waits until the
	// merge reached it and the victim is dead, restarts the victim and
	// checks the tablets. kill, when set, kills the victim itself (else it
	// kills itself) and returns its index; dead lists the addresses the
	// victim is among.
	crash := func(what string, fault, content, row string, before []client.TabletInfo, kill func() int, dead []string, restart func(int) error, mustCommit bool) {
		t.Helper()
		crashes++
		at := time.Now()
		if err := os.WriteFile(fault, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		merged := make(chan error, 1)
		go func() {
			mctx, mcancel := context.WithTimeout(ctx, 60*time.Second)
			defer mcancel()
			_, err := cl.MergeTablets(mctx, "mkill", row)
			merged <- err
		}()
		var mergeErr error
		returned := false
		for !returned {
			if _, err := os.Stat(fault); errors.Is(err, os.ErrNotExist) {
				break
			}
			select {
			case mergeErr = <-merged:
				returned = true
			case <-time.After(20 * time.Millisecond):
			}
		}
		if _, err := os.Stat(fault); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the merge did not reach the fault (err %v)", what, mergeErr)
		}
		victim := -1
		if kill != nil {
			victim = kill()
		} else {
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			victim = mgDead(dctx, dead)
			dcancel()
		}
		if !returned {
			mergeErr = <-merged
		}
		if victim >= 0 {
			if err := restart(victim); err != nil {
				t.Fatalf("%s: restart %d: %v", what, victim, err)
			}
		}
		if err := c.WaitServing(ctx, "mkill"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		after, err := cl.Tablets(ctx, "mkill")
		if err != nil {
			t.Fatal(err)
		}
		mgCheckTiling(t, after)
		switch {
		case (mustCommit || mergeErr == nil) && len(after) != len(before)-1:
			t.Fatalf("%s: %d tablets after the crash, want %d: the merge committed (merge call err %v)", what, len(after), len(before)-1, mergeErr)
		case len(after) != len(before) && len(after) != len(before)-1:
			t.Fatalf("%s: %d tablets after the crash, want %d or %d", what, len(after), len(before), len(before)-1)
		}
		t.Logf("%s: killed %d; merge call err %v; %d tablets (before %d), %d writes acknowledged so far; crash to serving again %s",
			what, victim, mergeErr, len(after), len(before), load.count(), time.Since(at).Round(time.Millisecond))
	}
	// tablets waits until the writers got writesPerCrash more writes
	// acknowledged since the last crash, and lists the tablets.
	const writesPerCrash = 40
	tablets := func(minWrites int) []client.TabletInfo {
		t.Helper()
		wait.ForCtx(t, ctx, fmt.Sprintf("%d acknowledged writes", minWrites), func() error {
			if n := load.count(); n < minWrites {
				return fmt.Errorf("%d acknowledged", n)
			}
			return nil
		})
		ts, err := cl.Tablets(ctx, "mkill")
		if err != nil {
			t.Fatal(err)
		}
		mgCheckTiling(t, ts)
		return ts
	}

	// The leader master, at each of its steps.
	killLeader := func() int {
		i, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.KillMaster(i); err != nil {
			t.Fatal(err)
		}
		return i
	}
	for _, st := range mgMasterSteps {
		before := tablets((crashes + 1) * writesPerCrash)
		row, ok := mgPairRow(before, st.apart)
		if !ok && st.apart {
			t.Fatalf("master %s: no adjacent tablets on two tservers in %v", st.name, before)
		}
		what := "master " + st.name
		if st.tserver {
			crash(what, tsFault, fmt.Sprintf("pause:%d", st.step), row, before, killLeader, nil, c.RestartMaster, st.committed)
		} else {
			crash(what, mFault, strconv.Itoa(st.step), row, before, nil, c.MasterAddrs(), c.RestartMaster, st.committed)
		}
	}
	masters := time.Since(began)

	// The merging tserver, at each of its steps: after its commit (step
	// 6) the merge is done.
	for step := 1; step <= 6; step++ {
		before := tablets((crashes + 1) * writesPerCrash)
		row, _ := mgPairRow(before, false)
		crash(fmt.Sprintf("tserver step %d", step), tsFault, strconv.Itoa(step), row, before, nil, mgTServerAddrs(c), c.RestartTServer, step == 6)
	}
	want := load.halt()
	if err := c.WaitServing(ctx, "mkill"); err != nil {
		t.Fatal(err)
	}
	spVerify(t, ctx, tbl, want)
	t.Logf("%d acknowledged rows read back exactly once after %d leader-master crashes and 6 tserver crashes mid-merge (%s from the start, the master crashes took %s of it)",
		len(want), len(mgMasterSteps), time.Since(began).Round(time.Second), masters.Round(time.Second))
}

// TestMergeEmptiedTableToTwo is the merge target: a table pre-split into
// 32 tablets, then emptied but for a few rows, merges down to at most 2
// tablets by the automatic merger (small thresholds and a short check
// interval) while writers keep writing; every remaining row and every
// acknowledged write reads back, deleted rows stay deleted, and the
// tablets tile the key space. It prints how long the merging took.
func TestMergeEmptiedTableToTwo(t *testing.T) {
	skipShort(t, "automatic merges of an emptied table")
	mergeEmptied(t, cluster.Options{Masters: 1}, nil)
}

// TestHostsMergeGluster is TestMergeEmptiedTableToTwo on hosts over a
// GlusterFS volume of three replicas with three masters, with faults
// applied while the table is filled, emptied and merged: the busiest
// tserver (the likeliest to be merging) cut from the masters, then the
// master leader cut from the other masters.
func TestHostsMergeGluster(t *testing.T) {
	hostsTest(t, "automatic merges on hosts over GlusterFS with partitions")
	mergeEmptied(t, cluster.Options{Masters: 3, Hosts: hostsOptions()}, func(c *cluster.Cluster, cl *client.Client, sd int64) []fault {
		k := faultKit{c: c, lease: spLease, pick: busiest(c, cl, "shrink", sd)}
		return []fault{k.cutFromMasters(), k.cutLeader()}
	})
}

// mergeEmptied is TestMergeEmptiedTableToTwo's body over opts (its
// Masters and Hosts; mgOptions sets the rest). The faults faults returns
// (nil: none) are applied from the moment the table serves, while it is
// filled, emptied and merged.
func mergeEmptied(t *testing.T, opts cluster.Options, faults func(*cluster.Cluster, *client.Client, int64) []fault) {
	sd := seed(t)
	c, cl := suiteCluster(t, mgOptions(opts, opts.Masters, nil, []string{"--merge-threshold=67108864", "--merge-check-interval=300ms", "--merge-min-age=1ms"}))
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
	load := spStartLoad(ctx, tbl, uint64(sd), 2)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	// Fill every tablet, then delete all rows but every 32nd; the faults
	// meanwhile.
	kept := map[string]string{}
	var deleted []string
	for i := 0; i < 640; i++ {
		k := fmt.Sprintf("u%06d-fill", i*1_000_000/640)
		if i%32 == 0 {
			kept[k] = fmt.Sprintf("fill-%d", i)
		} else {
			deleted = append(deleted, k)
		}
	}
	fill := make(chan error, 1)
	go func() {
		for i := 0; i < 640; i++ {
			k := fmt.Sprintf("u%06d-fill", i*1_000_000/640)
			if err := tbl.Put(ctx, k, "cf", "q", []byte(fmt.Sprintf("fill-%d", i))); err != nil {
				fill <- fmt.Errorf("fill %s: %w", k, err)
				return
			}
		}
		for _, k := range deleted {
			m := client.NewMutation()
			m.DeleteRow()
			if err := tbl.Apply(ctx, k, m); err != nil {
				fill <- fmt.Errorf("delete %s: %w", k, err)
				return
			}
		}
		fill <- nil
	}()
	if faults != nil {
		applyFaults(t, ctx, cl, tbl, "shrink", faults(c, cl, sd), load.count)
	}
	if err := <-fill; err != nil {
		t.Fatal(err)
	}
	filled := time.Since(began)
	var n int
	wait.ForCtx(t, ctx, "at most 2 tablets", func() error {
		ts, err := cl.Tablets(ctx, "shrink")
		if err != nil {
			return err
		}
		if n = len(ts); n > 2 {
			return fmt.Errorf("still %d tablets after %s", n, time.Since(began))
		}
		mgCheckTiling(t, ts)
		return nil
	})
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
	t.Logf("32 tablets merged down to %d in %s from serving (the fill and deletes of 640 rows took %s of it, merging and faults meanwhile; 2 tservers, 300 ms checks); %d kept rows and %d writes of 2 concurrent writers read back",
		n, took.Round(time.Millisecond), filled.Round(time.Millisecond), len(kept), len(want)-len(kept))
}
