package e2e_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"bighive/client"
	pb "bighive/proto/bighivepb"
	"bighive/storage/wal"
	"bighive/testkit/cluster"
)

// Tests on hosts (testkit/hosts): every master and tserver in a network
// namespace of its own, the tservers' shared root on a GlusterFS volume
// that each tserver host mounts with its own client. They need root and
// GlusterFS (cluster.New skips them otherwise, and under -short).

// startHostsCluster starts three tservers and one master on hosts over
// GlusterFS, with the failover lease and heartbeat.
func startHostsCluster(t *testing.T, flags ...string) (*cluster.Cluster, *client.Client) {
	t.Helper()
	c := cluster.New(t, cluster.Options{TServers: 3, Lease: foLease, Heartbeat: foHeartbeat, Flags: flags,
		Hosts: &cluster.HostsOptions{Gluster: true}})
	return c, failoverClient(t, c)
}

// lostAcked counts the acknowledged writes that do not read back with
// their value.
func (w *workload) lostAcked(t *testing.T, ctx context.Context) (acked, lost int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	got := map[string]string{}
	if err := w.tbl.Scan(ctx, "", "", func(r client.Row) bool {
		a, _ := r.Value("cf", "a")
		got[r.Key] = string(a)
		return true
	}); err != nil {
		t.Fatalf("scan: %v", err)
	}
	for row, v := range w.acked {
		if got[row] != v {
			lost++
		}
	}
	return len(w.acked), lost
}

// TestHostsFailoverGluster: writers acknowledge writes while a tserver's
// whole host crashes (the tserver and its GlusterFS client SIGKILLed, its
// link down); another host recovers its tablets from its log on the
// volume, and every acknowledged write reads back.
func TestHostsFailoverGluster(t *testing.T) {
	hostsTest(t, "failover of a tserver host over GlusterFS")
	sd := seed(t)
	c, cl := startHostsCluster(t, "--mem-limit=1073741824")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, w := writing(t, ctx, c, cl, "hfo", foTablets, 6, 400, sd)

	victim := rand.New(rand.NewSource(sd)).Intn(c.NumTServers())
	addr := c.TServerAddr(victim)
	before := owners(t, ctx, cl, "hfo")
	acksAtKill := w.acks()
	killed := time.Now()
	if err := c.KillTServerHost(victim); err != nil {
		t.Fatal(err)
	}
	back, _ := waitServedElsewhere(t, ctx, cl, "hfo", killed, addr)
	moved := logServedAgain(t, before, back, addr, "host crash")
	w.waitAcks(t, ctx, 200) // writes go on after the recovery
	w.stop()
	acked, lost := w.lostAcked(t, ctx)
	t.Logf("host crash of %s (%d tablets, %d writes acknowledged before it): every tablet served again after %v (lease %v); %d writes acknowledged, %d lost",
		addr, moved, acksAtKill, maxDur(back).Round(time.Millisecond), foLease, acked, lost)
	if moved == 0 {
		t.Errorf("the crashed host %s served no tablet", addr)
	}
	if d := maxDur(back); d > foLease+15*time.Second {
		t.Errorf("recovery took %v, want about the lease (%v) plus a few seconds", d, foLease)
	}
	w.verify(t, ctx)
}

// TestHostsPartitionedTServerIsFenced cuts a tserver's host from the
// master while it keeps running, keeps its GlusterFS mount and stays
// reachable from the test. Once the master has recovered its tablets
// elsewhere, the cut tserver must acknowledge no write sent to it over the
// path the test keeps open, and change no file another tserver reads (its
// logs, its block store) even when asked to checkpoint and compact: its
// lease has run out, and background commits are fenced by it. Every write
// it acknowledged before, the one sent straight to it included, reads
// back. Healed, it registers again and refuses writes at the epoch it
// lost.
func TestHostsPartitionedTServerIsFenced(t *testing.T) {
	hostsTest(t, "a tserver host cut from the master over GlusterFS")
	sd := seed(t)
	c, cl := startHostsCluster(t, "--mem-limit=1073741824")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl, w := writing(t, ctx, c, cl, "hcut", foTablets, 4, 300, sd)

	victim := rand.New(rand.NewSource(sd)).Intn(c.NumTServers())
	addr := c.TServerAddr(victim)
	// The test's own path to the victim: through the bridge, which the
	// cut leaves open.
	mine, ts, write := directWriter(t, ctx, cl, "hcut", addr, 5*time.Second)
	direct := func(row string) error { return write(row, "direct", row) }
	// TSFiles in its block store, which the new owners will read.
	if _, err := cl.Checkpoint(ctx, addr); err != nil {
		t.Fatalf("checkpoint %s: %v", addr, err)
	}
	w.waitAcks(t, ctx, 100) // and writes only its log holds
	ackedDirect := []string{}
	early := mine.StartRow + "-direct-early"
	if err := direct(early); err != nil {
		t.Fatalf("direct write to %s before the cut: %v", addr, err)
	}
	ackedDirect = append(ackedDirect, early)

	acksAtCut := w.acks()
	cut := time.Now()
	if err := c.CutTServerFromMasters(ctx, victim); err != nil {
		t.Fatal(err)
	}
	// Right after the cut its lease still runs: a write may be
	// acknowledged, and then must be recovered.
	inLease := mine.StartRow + "-direct-in-lease"
	if err := direct(inLease); err == nil {
		ackedDirect = append(ackedDirect, inLease)
		t.Logf("direct write %v after the cut acknowledged (lease %v)", time.Since(cut).Round(time.Millisecond), foLease)
	} else {
		t.Logf("direct write %v after the cut refused: %v", time.Since(cut).Round(time.Millisecond), err)
	}
	back, _ := waitServedElsewhere(t, ctx, cl, "hcut", cut, addr)
	t.Logf("cut of %s from the master: every tablet served elsewhere after %v (lease %v)", addr, maxDur(back).Round(time.Millisecond), foLease)

	// From here on the victim runs on without a lease. Its files as they
	// are now; then writes, a checkpoint and a major compaction asked of it
	// directly; then its files again.
	mineFiles := victimFiles(t, c, victim, addr)
	before := snapshotFiles(t, mineFiles)
	refused, acked := 0, 0
	for i := 0; i < 20; i++ {
		row := fmt.Sprintf("%s-direct-late-%02d", mine.StartRow, i)
		if err := direct(row); err == nil {
			acked++
			t.Errorf("the cut tserver acknowledged write %s %v after the cut, its tablets served elsewhere", row, time.Since(cut).Round(time.Millisecond))
		} else {
			refused++
			if i == 0 {
				t.Logf("late direct write refused: %v", err)
			}
			if !strings.Contains(err.Error(), "lease") {
				t.Errorf("direct write %s: %v, want the running tserver's refusal for want of a lease", row, err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	_, cerr := ts.Checkpoint(cctx, &pb.CheckpointRequest{})
	ccancel()
	t.Logf("checkpoint asked of the cut tserver: %v", cerr)
	cctx, ccancel = context.WithTimeout(ctx, 10*time.Second)
	_, cerr = ts.Compact(cctx, &pb.CompactRequest{Major: true})
	ccancel()
	t.Logf("major compaction asked of the cut tserver: %v", cerr)
	time.Sleep(2 * foLease) // background work it may still try
	after := snapshotFiles(t, mineFiles)
	if len(before) == 0 {
		t.Fatalf("no file of the cut tserver under %s", strings.Join(mineFiles, ", "))
	}
	if diff := diffSnapshots(before, after); len(diff) > 0 {
		t.Errorf("the cut tserver changed %d of its files after its tablets moved:\n%s", len(diff), strings.Join(diff, "\n"))
	} else {
		t.Logf("the cut tserver's %d files (%s) unchanged over the %v after its tablets moved", len(before), strings.Join(mineFiles, ", "), (time.Since(cut) - maxDur(back)).Round(time.Millisecond))
	}
	t.Logf("after the recovery: %d direct writes to the cut tserver refused, %d acknowledged", refused, acked)

	// Healed, it registers again and the writes go on.
	healed := time.Now()
	if err := c.HealTServer(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitLive(t, ctx, cl, addr, true)
	t.Logf("healed: %s live again after %v", addr, time.Since(healed).Round(time.Millisecond))
	if err := direct(mine.StartRow + "-direct-healed"); err == nil {
		t.Errorf("healed, %s acknowledged a write at the old epoch %d of tablet %s, which moved", addr, mine.Epoch, mine.ID)
	} else {
		t.Logf("healed, a write at the old epoch refused: %v", err)
	}
	w.waitAcks(t, ctx, 100)
	w.stop()
	ackedN, lost := w.lostAcked(t, ctx)
	t.Logf("%d writes acknowledged (%d before the cut), %d lost", ackedN, acksAtCut, lost)
	w.verify(t, ctx)
	for _, row := range ackedDirect {
		r, err := tbl.Get(ctx, row)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := r.Value("cf", "direct"); !ok || string(v) != row {
			t.Errorf("direct write %s, acknowledged by the cut tserver before its lease ran out, is lost (%q)", row, v)
		}
	}
}

// victimFiles are the directories, as the test reads them, that hold the
// files tserver i wrote and other tservers read: its log and its data
// directories (its block store).
func victimFiles(t *testing.T, c *cluster.Cluster, i int, addr string) []string {
	t.Helper()
	brick := c.Volume().Brick
	return []string{
		filepath.Join(c.RootDir(), "wal", wal.FormatPrefix(addr)),
		filepath.Join(brick, fmt.Sprintf("ts%d", i)),
	}
}

type fileState struct {
	size  int64
	mtime time.Time
}

// snapshotFiles lists every file under dirs with its size and mtime.
func snapshotFiles(t *testing.T, dirs []string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				return nil
			}
			st, err := e.Info()
			if err != nil {
				return err
			}
			out[path] = fileState{st.Size(), st.ModTime()}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return out
}

func diffSnapshots(before, after map[string]fileState) []string {
	var diff []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diff = append(diff, "deleted "+p)
		case a != b:
			diff = append(diff, fmt.Sprintf("changed %s: %d bytes at %v, then %d at %v", p, b.size, b.mtime.Format(time.StampMicro), a.size, a.mtime.Format(time.StampMicro)))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			diff = append(diff, fmt.Sprintf("created %s (%d bytes)", p, a.size))
		}
	}
	sort.Strings(diff)
	return diff
}
