package tserver

import (
	"context"
	"sync/atomic"
	"time"
)

// lease is the time until which the master lets this tserver serve. It is
// renewed by each heartbeat reply, counted from when the heartbeat was
// sent, so the tserver's view never outlives the master's: the tserver
// stops serving before the master may declare it dead and reassign its
// tablets.
//
// The expiry is a time.Time derived from time.Now() at the send, so it
// carries Go's monotonic clock reading, and valid and remaining compare
// monotonic readings when given a time.Now() too. A step of the wall clock
// (NTP, an operator) neither extends nor shortens the lease; the master
// measures its side on the monotonic clock as well. Never store the expiry
// as Unix time (UnixNano drops the monotonic reading) or strip it with
// Round(0).
type lease struct {
	expiry atomic.Pointer[time.Time] // nil: no lease
}

// renew extends the lease to sent+d; it never shortens it.
func (l *lease) renew(sent time.Time, d time.Duration) {
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

func (l *lease) revoke() { l.expiry.Store(nil) }

// valid reports whether the lease holds at now (a time.Now() reading).
func (l *lease) valid(now time.Time) bool {
	exp := l.expiry.Load()
	return exp != nil && now.Before(*exp)
}

// remaining is the lease left at now (negative once run out, 0 if none).
func (l *lease) remaining(now time.Time) time.Duration {
	exp := l.expiry.Load()
	if exp == nil {
		return 0
	}
	return exp.Sub(now)
}

// updateHealth sets the health service from the lease: SERVING only
// while the lease is valid (and the log has not failed).
func (s *Server) updateHealth() {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	s.health.Set(s.leaseValid())
}

// watchLease keeps the health service true when the lease runs out with
// nobody renewing it (the master unreachable, the process stopped): it
// wakes at the expiry, and at least every second. Renewals and revocations
// update the health service themselves.
func (s *Server) watchLease(ctx context.Context) {
	defer s.wg.Done()
	for {
		s.updateHealth()
		wait := time.Second
		if left := s.lease.remaining(time.Now()); left > 0 && left < wait {
			wait = left + time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
