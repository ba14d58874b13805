package master

import (
	"slices"
	"time"

	spb "bighive/proto/storagepb"
)

// startupGrace is a leader session's wait for the tservers to check in
// (Config.StartupGrace). Until it ends, the tick neither declares tservers
// dead nor assigns, plans log splits or rebalances; heartbeats are
// answered and leases granted as always. It ends when the grace has passed
// or when every tserver the metadata knew at the session's start has
// heartbeated or registered with this leader. A cluster whose metadata
// knows no tserver (the first start) cannot know how many will come: the
// first to register is not all of them, but waiting the whole grace would
// hold every table of a new cluster back by a lease. Its grace ends
// freshSettle after the first tserver checks in (or when it passes):
// tservers started together register within that.
type startupGrace struct {
	until  time.Time
	await  []string // tservers known to the metadata at the session's start
	settle time.Duration
	// settling: a first start saw its first tserver; until was brought
	// forward to then + settle.
	settling bool
	over     bool
	reason   string
}

// freshSettle is, in heartbeat intervals, how long a first start waits
// after its first tserver checks in.
const freshSettle = 2

func newStartupGrace(now time.Time, d, heartbeat time.Duration, known []*spb.MetaTServer) startupGrace {
	g := startupGrace{until: now.Add(d), settle: freshSettle * heartbeat}
	for _, ts := range known {
		g.await = append(g.await, ts.Uuid)
	}
	slices.Sort(g.await)
	if d <= 0 {
		g.over, g.reason = true, "no grace configured"
	}
	return g
}

// inStartupGrace reports whether the session is still in its grace, and
// logs the moment it ends.
func (ls *leaderState) inStartupGrace(now time.Time) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	g := &ls.grace
	if g.over {
		return false
	}
	heard := 0
	for _, u := range g.await {
		if l := ls.leases[u]; l != nil && l.heard {
			heard++
		}
	}
	if len(g.await) == 0 && g.settle > 0 && !g.settling {
		for _, l := range ls.leases {
			if l.heard {
				// Seen by this tick (every Heartbeat/2), not at the
				// heartbeat itself: at most half an interval late.
				if t := now.Add(g.settle); t.Before(g.until) {
					g.until = t
				}
				g.settling = true
				break
			}
		}
	}
	switch {
	case len(g.await) > 0 && heard == len(g.await):
		g.reason = "every known tserver checked in"
	case !now.Before(g.until) && g.settling:
		g.reason = "first start: tservers settled after the first checked in"
	case !now.Before(g.until):
		g.reason = "grace period passed"
	default:
		return true
	}
	g.over = true
	live := len(ls.liveLocked(now))
	ls.m.log.Info("start-up grace over", "reason", g.reason, "after", now.Sub(ls.since), "known_tservers", len(g.await),
		"checked_in", heard, "live_tservers", live)
	ls.m.events.add("leader", "start-up grace over after %s (%s): %d of %d known tservers checked in, %d live",
		now.Sub(ls.since).Round(time.Millisecond), g.reason, heard, len(g.await), live)
	return false
}
