package master

import (
	"time"
)

// Unavailability of tablets across moves and recoveries, as the leader
// measures it (bighive_master_tablet_unavailable_seconds, by cause, and a
// log line per tablet, "tablet available again"):
//
//   - A move: from the old owner's heartbeat that no longer lists the
//     tablet to the commit of the new owner's load report (it serves once
//     that is answered). The old owner is told to hand the tablet off: it
//     flushes it while serving, fences its writes, flushes what came
//     meanwhile, and only then lets go (tserver's handoff); the fenced
//     flush, during which writes wait and reads are served, is left out,
//     and the tserver logs it ("tablet handed off", writes_fenced).
//   - A recovery: from the last heartbeat the dead (or restarted)
//     tserver's lease was renewed by to the commit of the new owner's load
//     report. The tserver stopped serving somewhere in the heartbeat
//     interval after that heartbeat (it was stopped, or crashed), which the
//     master cannot see: the figure overstates by at most one interval. A
//     tserver this leader never heard from counts from the leader's start
//     (its lease's start), so when the old leader went down with the
//     tserver the figure leaves out the election before it.
//
// The end is the leader's commit, not the tserver's first write: the
// tserver serves as soon as the answer reaches it, one round trip later.
// What a client sees also includes its own retry backoff. The state is
// the leader's memory: a tablet whose move or recovery spans a change of
// leader is not measured, and a start no load report ends (the tablet was
// split, merged or deleted meanwhile) is forgotten after unavailForget.
const unavailForget = time.Hour

// Causes of unavailability, the metric's label values.
const (
	causeMove     = "move"
	causeRecovery = "recovery"
)

// unavailStart is when a tablet stopped being served, and why.
type unavailStart struct {
	since time.Time
	cause string
}

// unavailableLocked records that tablet stopped being served at since,
// unless an earlier start is already recorded. ls.mu is held.
func (ls *leaderState) unavailableLocked(tablet string, since time.Time, cause string) {
	if ls.unavail == nil {
		ls.unavail = map[string]unavailStart{}
	}
	if _, ok := ls.unavail[tablet]; !ok {
		ls.unavail[tablet] = unavailStart{since: since, cause: cause}
	}
}

// servingAgain ends a tablet's unavailability when its new owner's load
// committed at now.
func (ls *leaderState) servingAgain(tablets []string, now time.Time) {
	type ended struct {
		id string
		unavailStart
	}
	var done []ended
	ls.mu.Lock()
	for _, id := range tablets {
		if u, ok := ls.unavail[id]; ok {
			delete(ls.unavail, id)
			done = append(done, ended{id, u})
		}
	}
	ls.mu.Unlock()
	for _, e := range done {
		d := now.Sub(e.since)
		ls.m.metrics.unavailable.WithLabelValues(e.cause).Observe(d.Seconds())
		ls.m.log.Info("tablet available again", "tablet", e.id, "cause", e.cause, "unavailable", d)
	}
}

// forgetUnavailableLocked drops starts older than unavailForget. ls.mu is
// held.
func (ls *leaderState) forgetUnavailableLocked(now time.Time) {
	for id, u := range ls.unavail {
		if now.Sub(u.since) > unavailForget {
			delete(ls.unavail, id)
		}
	}
}
