package master

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// hbTServer drives one tserver's heartbeats by hand: held is what it
// reports holding, seq/acked its numbering.
type hbTServer struct {
	t     *testing.T
	c     *cluster
	uuid  string
	inc   int64
	held  map[string]int64
	seq   uint64
	acked uint64
}

func (h *hbTServer) send(req *pb.HeartbeatRequest) *pb.HeartbeatResponse {
	h.t.Helper()
	req.Uuid, req.Incarnation = h.uuid, h.inc
	resp, err := newClient(h.t, h.c.addrs()...).at(0).Heartbeat(ctxT(h.t, 10*time.Second), req)
	if err != nil {
		h.t.Fatalf("heartbeat seq %d: %v", req.Seq, err)
	}
	if resp.Reregister || resp.LeaseDurationMicros <= 0 {
		h.t.Fatalf("heartbeat seq %d: reregister=%v lease=%dµs, want a renewed lease", req.Seq, resp.Reregister, resp.LeaseDurationMicros)
	}
	return resp
}

// full sends a full heartbeat of held and checks its acknowledgement.
func (h *hbTServer) full() *pb.HeartbeatResponse {
	h.t.Helper()
	h.seq++
	req := &pb.HeartbeatRequest{Seq: h.seq}
	for id, ep := range h.held {
		req.Tablets = append(req.Tablets, &pb.TabletReport{TabletId: id, Epoch: ep, Serving: true, SizeBytes: 100})
	}
	resp := h.send(req)
	if resp.SendFull || resp.AckedSeq != h.seq {
		h.t.Fatalf("full heartbeat %d: send_full=%v acked_seq=%d", h.seq, resp.SendFull, resp.AckedSeq)
	}
	h.acked = h.seq
	return resp
}

// delta sends a delta on the acknowledged base; wantAck: whether the master
// must apply it (else it must ask for a full heartbeat).
func (h *hbTServer) delta(changed map[string]int64, removed []string, wantAck bool) *pb.HeartbeatResponse {
	h.t.Helper()
	h.seq++
	req := &pb.HeartbeatRequest{Seq: h.seq, Delta: true, BaseSeq: h.acked, RemovedTabletIds: removed}
	for id, ep := range changed {
		req.Tablets = append(req.Tablets, &pb.TabletReport{TabletId: id, Epoch: ep, Serving: true, SizeBytes: 100})
	}
	resp := h.send(req)
	if wantAck {
		if resp.SendFull || resp.AckedSeq != h.seq {
			h.t.Fatalf("delta %d on %d: send_full=%v acked_seq=%d, want it applied", h.seq, h.acked, resp.SendFull, resp.AckedSeq)
		}
		h.acked = h.seq
	} else if !resp.SendFull || resp.AckedSeq != 0 || len(resp.Assign)+len(resp.Unassign) > 0 {
		h.t.Fatalf("delta %d on %d: send_full=%v acked_seq=%d assign=%d unassign=%d, want send_full only",
			h.seq, h.acked, resp.SendFull, resp.AckedSeq, len(resp.Assign), len(resp.Unassign))
	}
	return resp
}

// load reports every assignment in resp loaded and holds it.
func (h *hbTServer) load(resp *pb.HeartbeatResponse) {
	h.t.Helper()
	for _, a := range resp.Assign {
		id, ep := a.Tablet.TabletId, a.Tablet.Epoch
		if _, err := newClient(h.t, h.c.addrs()...).at(0).ReportTabletLoad(ctxT(h.t, 10*time.Second), &pb.ReportTabletLoadRequest{TabletId: id,
			Epoch: ep, TserverUuid: h.uuid, Position: &pb.LogPosition{Prefix: h.uuid + "_7100", FileTimestamp: 1}}); err != nil {
			h.t.Fatalf("load %s@%d: %v", id, ep, err)
		}
		h.held[id] = ep
	}
}

func unassigns(resp *pb.HeartbeatResponse) map[string]int64 {
	out := map[string]int64{}
	for _, u := range resp.Unassign {
		out[u.TabletId] = u.Epoch
	}
	return out
}

func assigns(resp *pb.HeartbeatResponse) map[string]int64 {
	out := map[string]int64{}
	for _, a := range resp.Assign {
		out[a.Tablet.TabletId] = a.Tablet.Epoch
	}
	return out
}

// TestHeartbeatDeltas walks one tserver through deltas: applied, skipped
// when nothing changed, a removed tablet (assigned again), a tablet at a
// wrong epoch (unassigned, and again while it is still reported), a
// sequence gap and a duplicate (send full, and no base until the full
// one), a table deleted with nothing reported (the ownership generation
// makes the heartbeat reconcile), and a new leader (send full).
func TestHeartbeatDeltas(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.ResendInterval = time.Hour })
	c.leader(10 * time.Second)
	mc := newClient(t, c.addrs()...).at(0)
	h := &hbTServer{t: t, c: c, uuid: "ts-delta", inc: 7, held: map[string]int64{}}
	if _, err := mc.RegisterTServer(ctxT(t, 10*time.Second), &pb.RegisterTServerRequest{Uuid: h.uuid, Address: "ts-delta.test:7100",
		Incarnation: h.inc, WalPrefix: h.uuid + "_7100", BlockStoreUuid: "bs-" + h.uuid}); err != nil {
		t.Fatal(err)
	}
	// No base yet: a delta is refused.
	h.seq, h.acked = 1, 1
	h.delta(nil, nil, false)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(3)}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "4 tablets assigned and loaded", func() error {
		h.load(h.full())
		if len(h.held) != 4 {
			return fmt.Errorf("%d tablets held", len(h.held))
		}
		return nil
	})
	h.full() // reports them all held
	kinds := c.masters[0].metrics.hbKinds
	skipped := counterValue(t, kinds.WithLabelValues("delta_skipped"))
	reconciled := counterValue(t, kinds.WithLabelValues("delta_reconciled"))
	// The first delta after the full one changes nothing: no reconciliation.
	if resp := h.delta(nil, nil, true); len(resp.Assign)+len(resp.Unassign) > 0 {
		t.Fatalf("steady delta: assign %v unassign %v", assigns(resp), unassigns(resp))
	}
	if got := counterValue(t, kinds.WithLabelValues("delta_skipped")); got != skipped+1 {
		t.Fatalf("delta_skipped %v, want %v: a delta changing nothing read the tablets", got, skipped+1)
	}

	var ids []string
	for id := range h.held {
		ids = append(ids, id)
	}
	// A tablet dropped without being told: a removed one in a delta. The
	// master assigns it again.
	gone, goneEp := ids[0], h.held[ids[0]]
	delete(h.held, gone)
	resp := h.delta(nil, []string{gone}, true)
	if a := assigns(resp); len(a) != 1 || a[gone] != goneEp {
		t.Fatalf("after removing %s@%d in a delta: assign %v, want it alone", gone, goneEp, a)
	}
	if got := counterValue(t, kinds.WithLabelValues("delta_reconciled")); got != reconciled+1 {
		t.Fatalf("delta_reconciled %v, want %v", got, reconciled+1)
	}
	h.held[gone] = goneEp
	h.delta(map[string]int64{gone: goneEp}, nil, true)

	// A tablet reported at a wrong epoch: unassigned at that epoch and
	// assigned at its own, and unassigned again in the next (skipped)
	// delta while the tserver still reports it.
	wrong, rightEp := ids[1], h.held[ids[1]]
	resp = h.delta(map[string]int64{wrong: rightEp + 5}, nil, true)
	if u := unassigns(resp); len(u) != 1 || u[wrong] != rightEp+5 {
		t.Fatalf("after %s at epoch %d (owned at %d): unassign %v", wrong, rightEp+5, rightEp, u)
	}
	if a := assigns(resp); len(a) != 1 || a[wrong] != rightEp {
		t.Fatalf("after %s at a wrong epoch: assign %v, want it at epoch %d", wrong, a, rightEp)
	}
	skipped = counterValue(t, kinds.WithLabelValues("delta_skipped"))
	if u := unassigns(h.delta(nil, nil, true)); len(u) != 1 || u[wrong] != rightEp+5 {
		t.Fatalf("the next delta: unassign %v, want %s@%d again", u, wrong, rightEp+5)
	}
	if got := counterValue(t, kinds.WithLabelValues("delta_skipped")); got != skipped+1 {
		t.Fatalf("delta_skipped %v, want %v", got, skipped+1)
	}
	h.delta(map[string]int64{wrong: rightEp}, nil, true) // dropped it and loaded it at its epoch
	if resp := h.delta(nil, nil, true); len(resp.Assign)+len(resp.Unassign) > 0 {
		t.Fatalf("settled: assign %v unassign %v", assigns(resp), unassigns(resp))
	}

	// A gap: a delta on an older base. Then the right base is no base
	// either until a full heartbeat.
	good := h.acked
	h.acked = good - 1
	h.delta(nil, nil, false)
	h.acked = good
	h.delta(nil, nil, false)
	h.full()
	// A duplicate: the same delta twice.
	h.seq++
	dup := &pb.HeartbeatRequest{Seq: h.seq, Delta: true, BaseSeq: h.acked}
	if r := h.send(dup); r.SendFull || r.AckedSeq != h.seq {
		t.Fatalf("first copy: send_full=%v acked=%d", r.SendFull, r.AckedSeq)
	}
	if r := h.send(dup); !r.SendFull {
		t.Fatal("the second copy of a delta was applied again")
	}
	h.full()

	// Ownership changes with nothing reported: the table goes, and an
	// empty delta unassigns every held tablet.
	if _, err := mc.DeleteTable(ctxT(t, 10*time.Second), &pb.DeleteTableRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	if u := unassigns(h.delta(nil, nil, true)); len(u) != len(h.held) {
		t.Fatalf("after the table's deletion: unassign %v, want all of %v", u, h.held)
	}

	// A new leader (the master restarted) holds no base.
	c.stop(0)
	c.start(0)
	c.leader(10 * time.Second)
	h.delta(nil, nil, false)
	h.full()
	h.delta(nil, nil, true)
}

func TestValidDelta(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *pb.HeartbeatRequest
		ok   bool
	}{
		{"full", &pb.HeartbeatRequest{Seq: 3}, true},
		{"full before deltas", &pb.HeartbeatRequest{}, true},
		{"full with removed", &pb.HeartbeatRequest{Seq: 3, RemovedTabletIds: []string{"x"}}, false},
		{"delta", &pb.HeartbeatRequest{Delta: true, Seq: 3, BaseSeq: 2}, true},
		{"delta without base", &pb.HeartbeatRequest{Delta: true, Seq: 3}, false},
		{"delta not after its base", &pb.HeartbeatRequest{Delta: true, Seq: 2, BaseSeq: 2}, false},
	} {
		if err := validDelta(tc.req); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		} else if err != nil && codeOf(err).String() != "InvalidArgument" {
			t.Errorf("%s: code %v, want InvalidArgument", tc.name, codeOf(err))
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
