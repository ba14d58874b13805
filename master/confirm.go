package master

import (
	"context"
	"time"

	"bighive/internal/apierr"
)

// A leader grants tserver leases (heartbeat and registration replies) only
// while a quorum confirmed its leadership recently. raft tells a leader
// that it lost leadership only when its own loop notices; a leader process
// that was paused (SIGSTOP, a long GC or VM stall) while the others elected
// a new leader resumes still believing it leads, and in the moments before
// its loop steps down it would renew the lease of a tserver whose tablets
// the new leader has already given away: that tserver would then
// acknowledge writes the new owners never see.
//
// So the leader asks a quorum (raft's VerifyLeader) every confirmWindow/4
// and notes when the last ask that succeeded was issued. A success issued
// at t proves no other leader was elected before t (a quorum still
// answered this term after t, and a voter for a newer term no longer
// does). A lease granted at g with g - t <= confirmWindow therefore ends by
// (the new leader's election + confirmWindow + Lease). A new leader counts
// a tserver it never heard from as last heard at its own start, which
// follows its election, and declares it dead once Lease + confirmWindow
// passed since (leaderState.deadAfter); a tserver it heard from, once
// Lease + DeadMargin passed since its last heartbeat. The window is short
// (a quarter heartbeat by default) because it is what a failover of the
// leader adds to a dead tserver's recovery: with the 2 s DeadMargin it
// once was, a tserver and the leader stopped together kept the tserver's
// tablets unserved for the election, 7 s, and the recovery.

// confirmWindow is how long after the issue of its last confirmed ask the
// leader may grant leases.
func (m *Master) confirmWindow() time.Duration { return m.cfg.ConfirmWindow }

// confirmLeadership asks a quorum every confirmWindow/4 whether this
// master is still the leader until ctx ends, and records in ls when each
// successful ask was issued.
func (ls *leaderState) confirmLeadership(ctx context.Context) {
	every := max(ls.m.confirmWindow()/4, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		issued := time.Now()
		if err := ls.m.verifyLeader(); err == nil {
			ls.noteConfirmed(issued)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// noteConfirmed records that an ask issued at t was confirmed.
func (ls *leaderState) noteConfirmed(t time.Time) {
	ls.confirmMu.Lock()
	if t.After(ls.confirmed) {
		ls.confirmed = t
	}
	ls.confirmMu.Unlock()
}

// mayGrant refuses a lease, Unavailable, unless a quorum confirmed this
// master's leadership within confirmWindow. When the background asks
// are late (on a loaded machine the loop may not run for longer than
// the window), it asks a quorum itself, one such ask at a time, and
// grants if that confirms: the tserver's lease counts from when it sent
// the request, before that ask was issued, so it ends before a new leader
// may declare it dead as it would after a background ask.
func (ls *leaderState) mayGrant(now time.Time) error {
	if ls.confirmedAge(now) <= ls.m.confirmWindow() {
		return nil
	}
	ls.verifyMu.Lock()
	defer ls.verifyMu.Unlock()
	now = time.Now()
	if ls.confirmedAge(now) <= ls.m.confirmWindow() {
		return nil // another caller's ask confirmed meanwhile
	}
	if err := ls.m.verifyLeader(); err == nil {
		ls.noteConfirmed(now)
		return nil
	}
	age := ls.confirmedAge(now)
	return apierr.Unavailable("master %s: leadership last confirmed by a quorum %s ago (over %s): no lease is granted until it is again; retry, or find the current leader",
		ls.m.cfg.ID, age.Round(time.Millisecond), ls.m.confirmWindow())
}

// confirmedAge is how long before now the last confirmed ask was issued.
func (ls *leaderState) confirmedAge(now time.Time) time.Duration {
	ls.confirmMu.Lock()
	defer ls.confirmMu.Unlock()
	return now.Sub(ls.confirmed)
}

// verifyLeader asks a quorum whether this master is still the leader
// (Config.verifyLeader in tests).
func (m *Master) verifyLeader() error {
	if m.cfg.verifyLeader != nil {
		return m.cfg.verifyLeader()
	}
	return m.node.Raft.VerifyLeader().Error()
}
