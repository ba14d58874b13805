package hbdelta

import (
	pb "bighive/proto/bighivepb"
)

const (
	// FullEvery: after this many acknowledged deltas the next heartbeat is
	// full (at the default 1 s heartbeat, once a minute), so the master
	// reconciles, and small size changes reach it.
	FullEvery = 60
	// SizeShare: a size change of at least 1/SizeShare of the
	// acknowledged size (6.25 %) is reported in the next delta.
	SizeShare = 16
	// MinSizeStep: a size change smaller than this waits for a full
	// heartbeat, however small the tablet.
	MinSizeStep = 4 << 10
	// GarbageStep: a change of the estimated garbage share of at least
	// this much is reported in the next delta.
	GarbageStep = 0.05
)

// Tracker holds what the master acknowledged of one incarnation's
// heartbeats. It is not safe for concurrent use: one heartbeat at a time.
type Tracker struct {
	seq       uint64                      // the last seq sent
	ackedSeq  uint64                      // the base of the next delta; 0: send full
	acked     map[string]*pb.TabletReport // what the master holds at ackedSeq
	sinceFull int                         // acknowledged deltas since the last full
}

// Sent is one heartbeat's reports, to hand to Ack with its reply.
type Sent struct {
	seq   uint64
	full  bool
	state map[string]*pb.TabletReport
}

// Full reports whether the heartbeat is a full one.
func (s Sent) Full() bool { return s.full }

// Fill sets req's seq and its tablets: all of reports (a full heartbeat)
// or the delta from the acknowledged ones (tablets, removed_tablet_ids,
// delta, base_seq).
func (t *Tracker) Fill(req *pb.HeartbeatRequest, reports []*pb.TabletReport) Sent {
	t.seq++
	req.Seq = t.seq
	state := make(map[string]*pb.TabletReport, len(reports))
	if t.ackedSeq == 0 || t.sinceFull >= FullEvery {
		req.Tablets = reports
		for _, r := range reports {
			state[r.TabletId] = r
		}
		return Sent{seq: t.seq, full: true, state: state}
	}
	req.Delta, req.BaseSeq = true, t.ackedSeq
	var changed []*pb.TabletReport // reports may be req.Tablets
	for _, r := range reports {
		prev := t.acked[r.TabletId]
		if prev == nil || Changed(prev, r) {
			changed = append(changed, r)
			state[r.TabletId] = r
		} else {
			state[r.TabletId] = prev // what the master keeps
		}
	}
	req.Tablets = changed
	for id := range t.acked {
		if _, ok := state[id]; !ok {
			req.RemovedTabletIds = append(req.RemovedTabletIds, id)
		}
	}
	return Sent{seq: t.seq, state: state}
}

// Ack records the master's reply to the heartbeat s. It reports whether
// the master asked for a full heartbeat, which the caller should send
// without waiting for the next interval.
func (t *Tracker) Ack(s Sent, resp *pb.HeartbeatResponse) (sendFull bool) {
	switch {
	case resp.SendFull:
		t.ackedSeq, t.acked = 0, nil
		return true
	case resp.AckedSeq == 0:
		t.ackedSeq, t.acked = 0, nil // the master takes full heartbeats only
	case resp.AckedSeq == s.seq:
		t.ackedSeq, t.acked = s.seq, s.state
		if s.full {
			t.sinceFull = 0
		} else {
			t.sinceFull++
		}
	}
	return false
}

// Reset forgets every acknowledgement: the next heartbeat is full (a new
// incarnation).
func (t *Tracker) Reset() { t.ackedSeq, t.acked, t.sinceFull = 0, nil, 0 }

// Changed reports whether cur differs from the acknowledged prev in
// something the master uses (see the package comment).
func Changed(prev, cur *pb.TabletReport) bool {
	if prev.Epoch != cur.Epoch || prev.Serving != cur.Serving {
		return true
	}
	if sizeMoved(prev.SizeBytes, cur.SizeBytes) || sizeMoved(prev.GetSpace().GetFileBytes(), cur.GetSpace().GetFileBytes()) {
		return true
	}
	if dropped(prev.GetSpace().GetEntries(), cur.GetSpace().GetEntries()) {
		return true
	}
	d := prev.GetSpace().GetGarbageShare() - cur.GetSpace().GetGarbageShare()
	return d >= GarbageStep || -d >= GarbageStep
}

// dropped reports whether a tablet's TSFile entries fell by at least
// 1/SizeShare (and at least one): only a compaction that purged garbage
// (or a split) makes them fall, flushes only add, so what a user checks
// after a compaction reaches the master at the next heartbeat even when
// the bytes it freed are below MinSizeStep.
func dropped(from, to int64) bool {
	return to < from && from-to >= max(from/SizeShare, 1)
}

func sizeMoved(from, to int64) bool {
	d := to - from
	if d < 0 {
		d = -d
	}
	return d >= MinSizeStep && d >= from/SizeShare
}
