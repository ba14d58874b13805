package hbdelta

import (
	"slices"
	"testing"

	pb "bighive/proto/bighivepb"
)

func rep(id string, ep, size int64) *pb.TabletReport {
	return &pb.TabletReport{TabletId: id, Epoch: ep, SizeBytes: size, Serving: true, Space: &pb.TabletSpace{FileBytes: size}}
}

func ids(reps []*pb.TabletReport) []string {
	var out []string
	for _, r := range reps {
		out = append(out, r.TabletId)
	}
	slices.Sort(out)
	return out
}

func TestChanged(t *testing.T) {
	base := rep("a", 3, 1<<20)
	for _, tc := range []struct {
		name string
		cur  *pb.TabletReport
		want bool
	}{
		{"same", rep("a", 3, 1<<20), false},
		{"epoch", rep("a", 4, 1<<20), true},
		{"serving", &pb.TabletReport{TabletId: "a", Epoch: 3, SizeBytes: 1 << 20, Space: base.Space}, true},
		{"size below 1/16", rep("a", 3, 1<<20+1<<16-1), false},
		{"size by 1/16", rep("a", 3, 1<<20+1<<16), true},
		{"shrunk by 1/16", rep("a", 3, 1<<20-1<<16), true},
		{"garbage share", &pb.TabletReport{TabletId: "a", Epoch: 3, SizeBytes: 1 << 20, Serving: true,
			Space: &pb.TabletSpace{FileBytes: 1 << 20, GarbageShare: GarbageStep}}, true},
	} {
		if got := Changed(base, tc.cur); got != tc.want {
			t.Errorf("%s: Changed = %v, want %v", tc.name, got, tc.want)
		}
	}
	if Changed(rep("b", 1, 0), rep("b", 1, MinSizeStep-1)) {
		t.Error("a change below MinSizeStep of an empty tablet is reported")
	}
	// Entries: a compaction's purge is reported even when the bytes it
	// freed are below MinSizeStep; a flush's added entries wait.
	entries := func(n int64) *pb.TabletReport {
		r := rep("c", 1, 2000)
		r.Space.Entries = n
		return r
	}
	for _, tc := range []struct {
		from, to int64
		want     bool
	}{
		{60, 21, true},
		{60, 57, true},  // by 1/16 (3)
		{60, 58, false}, // below 1/16
		{2, 1, true},    // at least one
		{60, 120, false},
		{0, 0, false},
	} {
		if got := Changed(entries(tc.from), entries(tc.to)); got != tc.want {
			t.Errorf("entries %d → %d: Changed = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestTracker(t *testing.T) {
	var tr Tracker
	ack := func(s Sent, req *pb.HeartbeatRequest) {
		t.Helper()
		if tr.Ack(s, &pb.HeartbeatResponse{AckedSeq: req.Seq}) {
			t.Fatal("Ack asked for a full heartbeat")
		}
	}
	fill := func(reports ...*pb.TabletReport) (*pb.HeartbeatRequest, Sent) {
		req := &pb.HeartbeatRequest{}
		return req, tr.Fill(req, reports)
	}
	// The first is full.
	req, s := fill(rep("a", 1, 1<<20), rep("b", 1, 1<<20))
	if req.Delta || !s.Full() || req.Seq != 1 || len(req.Tablets) != 2 {
		t.Fatalf("first heartbeat: delta=%v seq=%d tablets=%v", req.Delta, req.Seq, ids(req.Tablets))
	}
	ack(s, req)
	// Then deltas on it: b grew a little (not listed), c is new, a is gone.
	req, s = fill(rep("b", 1, 1<<20+10), rep("c", 2, 0))
	if !req.Delta || req.BaseSeq != 1 || req.Seq != 2 || !slices.Equal(ids(req.Tablets), []string{"c"}) ||
		!slices.Equal(req.RemovedTabletIds, []string{"a"}) {
		t.Fatalf("delta: delta=%v base=%d seq=%d tablets=%v removed=%v", req.Delta, req.BaseSeq, req.Seq, ids(req.Tablets), req.RemovedTabletIds)
	}
	// Unacknowledged (the reply was lost): the next delta is still on 1.
	req, s = fill(rep("b", 1, 1<<20+10), rep("c", 2, 0))
	if req.BaseSeq != 1 || req.Seq != 3 {
		t.Fatalf("after a lost reply: base=%d seq=%d, want base 1", req.BaseSeq, req.Seq)
	}
	ack(s, req)
	req, _ = fill(rep("b", 1, 1<<20+10), rep("c", 2, 0))
	if req.BaseSeq != 3 || len(req.Tablets)+len(req.RemovedTabletIds) != 0 {
		t.Fatalf("nothing changed: base=%d tablets=%v removed=%v", req.BaseSeq, ids(req.Tablets), req.RemovedTabletIds)
	}
	// send_full: the next is full.
	req, s = fill(rep("b", 1, 1<<20), rep("c", 2, 0))
	if !tr.Ack(s, &pb.HeartbeatResponse{SendFull: true}) {
		t.Fatal("send_full not passed on")
	}
	req, s = fill(rep("b", 1, 1<<20), rep("c", 2, 0))
	if req.Delta || len(req.Tablets) != 2 {
		t.Fatalf("after send_full: delta=%v tablets=%v", req.Delta, ids(req.Tablets))
	}
	ack(s, req)
	// Every FullEvery acknowledged deltas, a full one.
	for i := 0; i < FullEvery; i++ {
		req, s = fill(rep("b", 1, 1<<20))
		if !req.Delta {
			t.Fatalf("delta %d after a full one is full", i)
		}
		ack(s, req)
	}
	if req, s = fill(rep("b", 1, 1<<20)); req.Delta {
		t.Fatalf("heartbeat after %d deltas is not full", FullEvery)
	}
	// A master that predates deltas never acknowledges: always full.
	tr.Ack(s, &pb.HeartbeatResponse{})
	if req, _ = fill(rep("b", 1, 1<<20)); req.Delta {
		t.Fatal("a delta to a master that acknowledged none")
	}
	tr.Reset()
	if req, _ = fill(rep("b", 1, 1<<20)); req.Delta {
		t.Fatal("a delta after Reset")
	}
}
