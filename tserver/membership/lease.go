package membership

import (
	"sync/atomic"
	"time"
)

// Lease is the time until which the master lets this tserver serve. It is
// renewed by each heartbeat reply, counted from when the heartbeat was
// sent, so the tserver's view never outlives the master's: the tserver
// stops serving before the master may declare it dead and reassign its
// tablets.
//
// The expiry is a time.Time derived from time.Now() at the send, so it
// carries Go's monotonic clock reading, and Valid and Remaining compare
// monotonic readings when given a time.Now() too. A step of the wall clock
// (NTP, an operator) neither extends nor shortens the lease; the master
// measures its side on the monotonic clock as well. Never store the expiry
// as Unix time (UnixNano drops the monotonic reading) or strip it with
// Round(0).
//
// The zero Lease holds no lease. A Lease is safe for concurrent use.
type Lease struct {
	expiry atomic.Pointer[time.Time] // nil: no lease
}

// Renew extends the lease to sent+d; it never shortens it.
func (l *Lease) Renew(sent time.Time, d time.Duration) {
	exp := sent.Add(d)
	for {
		old := l.expiry.Load()
		if old != nil && !exp.After(*old) {
			return
		}
		if l.expiry.CompareAndSwap(old, &exp) {
			return
		}
	}
}

// Revoke ends the lease now.
func (l *Lease) Revoke() { l.expiry.Store(nil) }

// Valid reports whether the lease holds at now (a time.Now() reading).
func (l *Lease) Valid(now time.Time) bool {
	exp := l.expiry.Load()
	return exp != nil && now.Before(*exp)
}

// Remaining is the lease left at now (negative once run out, 0 if none).
func (l *Lease) Remaining(now time.Time) time.Duration {
	exp := l.expiry.Load()
	if exp == nil {
		return 0
	}
	return exp.Sub(now)
}
