package master

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// TestDeadTServerNotRevivedMidUnassign runs the interleaving in which a
// dead tserver could be revived: its heartbeat reads the metadata (its
// tablets still its own), then — in the hook, before the heartbeat takes
// the leader's lock — the leader declares it dead and commits the
// Unassign of its tablets, then the heartbeat goes on. The heartbeat must
// grant no lease and ask the tserver to register again, and its old
// tablets must stay away from it.
func TestDeadTServerNotRevivedMidUnassign(t *testing.T) {
	t.Parallel()
	var (
		armed  atomic.Bool
		victim string
		c      *cluster
	)
	c = startCluster(t, 1, func(cfg *Config) {
		cfg.heartbeatHook = func(req *pb.HeartbeatRequest) {
			if req.Uuid != victim || !armed.CompareAndSwap(true, false) {
				return
			}
			m := c.masters[0]
			m.mu.Lock()
			ls := m.leader
			m.mu.Unlock()
			ls.mu.Lock()
			ls.leases[victim].last = time.Now().Add(-time.Hour) // its lease ran out
			ls.mu.Unlock()
			ls.poke()
			wait.For(t, 10*time.Second, "the leader to unassign the dead tserver's tablets", func() error {
				var n int
				_ = m.view(func(r *meta.Reader) error { n = len(r.TabletIDsOf(victim)); return nil })
				if n > 0 {
					return fmt.Errorf("%d tablets still assigned", n)
				}
				return nil
			})
		}
	})
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	o := newOwners()
	fl := fleet(t, cl, o, 2, 50*time.Millisecond)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(7)}); err != nil {
		t.Fatal(err)
	}
	counts := servingCounts(t, mc, "t", 8)
	a := fl[0]
	if counts[a.uuid] == 0 {
		t.Fatalf("tserver %s was assigned no tablet: %v", a.uuid, counts)
	}
	wait.For(t, 5*time.Second, "tserver "+a.uuid+" serving its tablets", func() error {
		return servingN(a, counts[a.uuid])
	})
	held := a.serving()
	a.stop() // from here on the test sends a's heartbeats

	req := &pb.HeartbeatRequest{Uuid: a.uuid, Incarnation: a.inc}
	for id, ep := range held {
		req.Tablets = append(req.Tablets, &pb.TabletReport{TabletId: id, Epoch: ep, Serving: true})
	}
	victim = a.uuid
	armed.Store(true)
	resp, err := mc.Heartbeat(ctxT(t, 30*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	if armed.Load() {
		t.Fatal("the hook did not run")
	}
	if !resp.Reregister || resp.LeaseDurationMicros != 0 || len(resp.Assign) > 0 {
		t.Fatalf("a dead tserver's heartbeat got reregister=%v lease=%dµs assign=%d unassign=%d; want only reregister",
			resp.Reregister, resp.LeaseDurationMicros, len(resp.Assign), len(resp.Unassign))
	}
	// Later heartbeats and a register of the old incarnation get nothing
	// either, and the old tablets never come back to it.
	for i := 0; i < 5; i++ {
		resp, err := mc.Heartbeat(ctxT(t, 10*time.Second), req)
		if err != nil || !resp.Reregister || resp.LeaseDurationMicros != 0 {
			t.Fatalf("heartbeat %d of the dead incarnation: %v %v", i, resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := mc.RegisterTServer(ctxT(t, 10*time.Second), &pb.RegisterTServerRequest{Uuid: a.uuid, Address: a.uuid + ".test:7100",
		Incarnation: a.inc, WalPrefix: a.uuid + "_7100", BlockStoreUuid: "bs-" + a.uuid}); codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("register of the dead incarnation: %v, want FailedPrecondition", err)
	}
	l, err := mc.GetTableLocations(context.Background(), &pb.GetTableLocationsRequest{Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range l.Locations {
		if _, was := held[x.TabletId]; was && x.TserverUuid == a.uuid {
			t.Errorf("tablet %s is assigned to the dead tserver again (state %v)", x.TabletId, x.State)
		}
	}
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6: %v", o.violations)
	}
}
