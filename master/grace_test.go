package master

import (
	"fmt"
	"testing"
	"time"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// assignedCount counts the tablets the metadata gives to some tserver,
// and the highest epoch.
func assignedCount(t *testing.T, m *Master) (n int, maxEpoch int64) {
	t.Helper()
	err := m.view(func(r *meta.Reader) error {
		all, err := r.TServers()
		if err != nil {
			return err
		}
		for _, ts := range all {
			for _, id := range r.TabletIDsOf(ts.Uuid) {
				n++
				if b, ok, err := r.TabletBrief(id); err == nil && ok {
					maxEpoch = max(maxEpoch, b.Epoch)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, maxEpoch
}

// heardBy waits until the leader session heard from every uuid.
func heardBy(t *testing.T, m *Master, uuids ...string) {
	t.Helper()
	wait.For(t, 10*time.Second, fmt.Sprintf("heartbeats of %v", uuids), func() error {
		ls, err := m.ready()
		if err != nil {
			return err
		}
		ls.mu.Lock()
		defer ls.mu.Unlock()
		for _, u := range uuids {
			if l := ls.leases[u]; l == nil || !l.heard {
				return fmt.Errorf("not heard from %s", u)
			}
		}
		return nil
	})
}

// graceCluster starts one master whose every start takes *grace as its
// start-up grace.
func graceCluster(t *testing.T, grace *time.Duration) (*cluster, *client, *owners) {
	c := startCluster(t, 1, func(cfg *Config) { cfg.StartupGrace = *grace })
	c.leader(10 * time.Second)
	return c, newClient(t, c.addrs()...), newOwners()
}

// TestStartupGrace: a leader in its start-up grace assigns nothing and
// declares no tserver dead. On a first start (the metadata knows no
// tserver) the grace ends freshSettle heartbeats after the first tserver
// checked in, so tservers started together share the tablets at once
// (epoch 1: no tablet assigned twice, no rebalancing move). On a restart
// the grace lasts while a known tserver has not checked in: its tablets
// stay its own and it is not declared dead.
func TestStartupGrace(t *testing.T) {
	grace := time.Hour
	c, cl, o := graceCluster(t, &grace)
	mc := cl.at(0)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(11)}); err != nil {
		t.Fatal(err)
	}
	fl := fleet(t, cl, o, 3, 50*time.Millisecond)
	counts := servingCounts(t, mc, "t", 12)
	for _, u := range []string{"ts0", "ts1", "ts2"} {
		if counts[u] != 4 {
			t.Fatalf("first start: %v, want 4 tablets on each of 3 tservers started together", counts)
		}
	}
	if _, ep := assignedCount(t, c.masters[0]); ep != 1 {
		t.Errorf("highest epoch %d after the first assignment, want 1 (assigned once, no move)", ep)
	}

	// Restart: the metadata knows ts0..ts2; ts2 stays away.
	fl[2].stop()
	c.stop(0)
	c.start(0)
	c.leader(10 * time.Second)
	heardBy(t, c.masters[0], "ts0", "ts1")
	cfg := testConfig("", "")
	time.Sleep(3 * (cfg.Lease + cfg.DeadMargin))
	ls, err := c.masters[0].ready()
	if err != nil {
		t.Fatal(err)
	}
	ls.mu.Lock()
	dead := ls.leases["ts2"] != nil && ls.leases["ts2"].dead
	ls.mu.Unlock()
	if dead {
		t.Fatal("ts2 was declared dead during the grace")
	}
	if n := ownedBy(t, c.masters[0], "ts2"); n != 4 {
		t.Fatalf("restart: ts2 owns %d tablets during the grace, want its 4", n)
	}

	// ts2 comes back as a new incarnation: its old one's tablets are
	// recovered (a new epoch) and every tablet is served again.
	back := newFakeTS(t, "ts2", cl, o)
	back.start(50 * time.Millisecond)
	servingCounts(t, mc, "t", 12)
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6: %v", o.violations)
	}
}

// ownedBy counts the tablets the metadata gives to uuid.
func ownedBy(t *testing.T, m *Master, uuid string) int {
	t.Helper()
	n := 0
	if err := m.view(func(r *meta.Reader) error { n = len(r.TabletIDsOf(uuid)); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStartupGracePasses: a known tserver that never checks in holds the
// assignment back only for the grace; then the tablets go to the others.
func TestStartupGracePasses(t *testing.T) {
	t.Parallel()
	grace := time.Hour
	c, cl, o := graceCluster(t, &grace)
	mc := cl.at(0)
	fl := fleet(t, cl, o, 2, 50*time.Millisecond)
	heardBy(t, c.masters[0], "ts0", "ts1")
	fl[1].stop()
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(5)}); err != nil {
		t.Fatal(err)
	}
	grace = 300 * time.Millisecond
	c.stop(0)
	c.start(0)
	counts := servingCounts(t, mc, "t", 6)
	if counts["ts0"] != 6 {
		t.Errorf("after the grace passed: %v, want all 6 on ts0", counts)
	}
}
