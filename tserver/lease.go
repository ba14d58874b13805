package tserver

import (
	"sync/atomic"
	"time"
)

// lease is the time until which the master lets this tserver serve. It is
// renewed by each heartbeat reply, counted from when the heartbeat was
// sent, so the tserver's view never outlives the master's (DESIGN.md
// invariant 6: the tserver stops serving before the master may reassign).
type lease struct {
	expiry atomic.Int64 // unix nanoseconds; 0: none
}

func (l *lease) renew(sent time.Time, d time.Duration) {
	exp := sent.Add(d).UnixNano()
	for {
		old := l.expiry.Load()
		if exp <= old || l.expiry.CompareAndSwap(old, exp) {
			return
		}
	}
}

func (l *lease) revoke() { l.expiry.Store(0) }

func (l *lease) valid(now time.Time) bool { return now.UnixNano() < l.expiry.Load() }

func (l *lease) remaining(now time.Time) time.Duration {
	return time.Duration(l.expiry.Load() - now.UnixNano())
}
