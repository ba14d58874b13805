package master

import (
	"sync"
	"time"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// Incremental heartbeats (HeartbeatRequest.delta). Per lease the leader
// keeps, in memory, the tablets the tserver reported holding (held) as of
// the heartbeat it acknowledged last (ackSeq), and what its last
// reconciliation of owned against held tablets concluded (recon). A
// heartbeat whose held set did not change, whose ownership generation
// (meta.FSM.OwnerGeneration) is the reconciled one, with no move from the
// tserver then or now and no assignment due for a resend, reuses that
// conclusion: it reads neither the owners index nor any tablet.
//
// held and recon are touched only by Heartbeat, under the tserver's
// heartbeat lock (leaderState.lockTServer); the other lease fields stay
// under leaderState.mu.

// heldTablet is what the tserver reported of a tablet it holds.
type heldTablet struct {
	epoch   int64
	serving bool
}

// reconciliation is the outcome of the last owned-against-held pass.
type reconciliation struct {
	done      bool
	gen       uint64                   // the ownership generation it read
	resendDue time.Time                // earliest resend of an assignment not yet loaded; zero: none
	moves     bool                     // a move from the tserver was in flight
	stray     []*pb.TabletUnassignment // held tablets not the tserver's at that epoch
	tables    []string                 // tables of the owned tablets
}

// lockTServer serializes the heartbeats of one tserver (a retry may
// overlap the call it retries) and returns the unlock.
func (ls *leaderState) lockTServer(uuid string) func() {
	mu, _ := ls.hbLocks.LoadOrStore(uuid, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// validDelta checks the incremental fields of a heartbeat.
func validDelta(req *pb.HeartbeatRequest) error {
	if !req.Delta {
		if len(req.RemovedTabletIds) > 0 {
			return apierr.InvalidArgument("heartbeat of tserver %s is full but lists %d removed tablets", req.Uuid, len(req.RemovedTabletIds))
		}
		return nil
	}
	if req.BaseSeq == 0 || req.Seq <= req.BaseSeq {
		return apierr.InvalidArgument("delta heartbeat of tserver %s has seq %d and base_seq %d; want 0 < base_seq < seq",
			req.Uuid, req.Seq, req.BaseSeq)
	}
	return nil
}

// heartbeatPlan is what a heartbeat changes of the held set and whether it
// reconciles.
type heartbeatPlan struct {
	sendFull  bool                  // a delta without its base: nothing applies
	held      map[string]heldTablet // the held set after this heartbeat
	reconcile bool
	recon     reconciliation // the previous outcome, used when not reconciling
}

// planHeartbeat applies req onto the held set of base (the lease of this
// incarnation, nil without one) and decides whether the heartbeat must
// reconcile. movesFrom: a move from the tserver is in flight. The caller
// holds the tserver's heartbeat lock; a delta is applied in place, and
// base.held is dropped if the heartbeat then fails.
func planHeartbeat(base *lease, req *pb.HeartbeatRequest, gen uint64, now time.Time, movesFrom bool) heartbeatPlan {
	var p heartbeatPlan
	changed := false
	if req.Delta {
		if base == nil || base.held == nil || req.BaseSeq != base.ackSeq {
			return heartbeatPlan{sendFull: true}
		}
		p.held = base.held
		for _, id := range req.RemovedTabletIds {
			if _, ok := p.held[id]; ok {
				delete(p.held, id)
				changed = true
			}
		}
		for _, rep := range req.Tablets {
			h := heldTablet{epoch: rep.Epoch, serving: rep.Serving}
			if old, ok := p.held[rep.TabletId]; !ok || old != h {
				p.held[rep.TabletId] = h
				changed = true
			}
		}
	} else {
		// A full heartbeat always reconciles: the periodic full report is
		// the safety net of the skipped passes, and tservers that predate
		// deltas are handled as before.
		p.held = make(map[string]heldTablet, len(req.Tablets))
		for _, rep := range req.Tablets {
			p.held[rep.TabletId] = heldTablet{epoch: rep.Epoch, serving: rep.Serving}
		}
		changed = true
	}
	if base != nil {
		p.recon = base.recon
	}
	r := p.recon
	p.reconcile = changed || !r.done || r.gen != gen || r.moves || movesFrom ||
		(!r.resendDue.IsZero() && !now.Before(r.resendDue))
	return p
}

// movesFromLocked reports whether a move away from uuid is in flight.
func (ls *leaderState) movesFromLocked(uuid string) bool {
	for _, mv := range ls.moves {
		if mv.from == uuid {
			return true
		}
	}
	return false
}

// reconcileLocked compares the held set of l with the tablets the tserver
// owns (read at generation gen) and records the stray held tablets and
// the owned tables in l.recon.
func (ls *leaderState) reconcileLocked(l *lease, owned []ownedTablet, gen uint64, missing map[string]bool) {
	ownedEpoch := make(map[string]int64, len(owned))
	tables := map[string]bool{}
	l.recon = reconciliation{done: true, gen: gen, moves: ls.movesFromLocked(l.uuid)}
	for _, t := range owned {
		ownedEpoch[t.id] = t.Epoch
		if !tables[t.Table] {
			tables[t.Table] = true
			l.recon.tables = append(l.recon.tables, t.Table)
		}
	}
	for id, h := range l.held {
		if ep, ok := ownedEpoch[id]; ok && ep == h.epoch {
			continue
		}
		l.recon.stray = append(l.recon.stray, &pb.TabletUnassignment{TabletId: id, Epoch: h.epoch})
		if missing[id] {
			delete(ls.sizes, id)
			delete(ls.space, id)
		}
	}
}

// assignmentsLocked returns the owned tablets the tserver does not hold at
// their epoch whose assignment is due (never sent, or sent ResendInterval
// ago), and records the next resend in l.recon.
func (ls *leaderState) assignmentsLocked(l *lease, owned []ownedTablet, full map[string]*pb.TabletMeta,
	schemas map[string]*pb.TableSchema, now time.Time) []*pb.TabletAssignment {
	var out []*pb.TabletAssignment
	resend := ls.m.cfg.ResendInterval
	for _, t := range owned {
		if h, ok := l.held[t.id]; ok && h.epoch == t.Epoch {
			delete(l.sentAssign, t.id)
			continue
		}
		if ls.moves[t.id] != nil && ls.moves[t.id].from == l.uuid {
			continue
		}
		sent, ok := l.sentAssign[t.id]
		if !ok || now.Sub(sent) >= resend {
			sent = now
			l.sentAssign[t.id] = now
			out = append(out, &pb.TabletAssignment{Tablet: full[t.id], Schema: schemas[t.Table],
				CachePriority: effective(ls.prio[t.Table])})
		}
		if due := sent.Add(resend); l.recon.resendDue.IsZero() || due.Before(l.recon.resendDue) {
			l.recon.resendDue = due
		}
	}
	return out
}

// kind names the heartbeat for bighive_master_heartbeats_total.
func (p heartbeatPlan) kind(req *pb.HeartbeatRequest) string {
	switch {
	case p.sendFull:
		return "send_full"
	case !req.Delta:
		return "full"
	case p.reconcile:
		return "delta_reconciled"
	default:
		return "delta_skipped"
	}
}
