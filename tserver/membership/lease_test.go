package membership

import (
	"testing"
	"time"
	"unsafe"
)

// steppedWall returns t with its wall-clock reading moved by d (whole
// seconds) and its monotonic reading unchanged: what time.Now() returns
// after the system clock is stepped by d. The time package cannot build
// such a value, so this edits time.Time's first word (with the monotonic
// flag set, bits 30-62 hold the wall seconds); the test skips itself if
// that layout ever changes.
func steppedWall(t *testing.T, tm time.Time, d time.Duration) time.Time {
	t.Helper()
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if unsafe.Sizeof(tm) != unsafe.Sizeof(layout{}) {
		t.Skip("time.Time layout changed")
	}
	out := tm
	p := (*layout)(unsafe.Pointer(&out))
	p.wall = uint64(int64(p.wall) + int64(d/time.Second)<<30)
	if out.Sub(tm) != 0 || out.UnixNano()-tm.UnixNano() != int64(d/time.Second*time.Second) {
		t.Skip("time.Time layout changed")
	}
	return out
}

// TestLeaseIgnoresWallClockSteps: the lease is judged on the monotonic
// clock. A clock stepped back after the lease ran out must not make it
// valid again (a stale server would serve tablets the master reassigned),
// and a clock stepped forward must not end it early.
func TestLeaseIgnoresWallClockSteps(t *testing.T) {
	sent := time.Now() // carries a monotonic reading, as in a heartbeat
	const d = time.Second
	tests := []struct {
		name  string
		now   time.Time // the injected clock's reading
		valid bool
	}{
		{"within the lease", sent.Add(d / 2), true},
		{"after the lease", sent.Add(2 * d), false},
		{"after the lease, wall clock stepped back an hour", steppedWall(t, sent.Add(2*d), -time.Hour), false},
		{"after the lease, wall clock stepped back a day", steppedWall(t, sent.Add(2*d), -24*time.Hour), false},
		{"within the lease, wall clock stepped forward an hour", steppedWall(t, sent.Add(d/2), time.Hour), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l Lease
			l.Renew(sent, d)
			if got := l.Valid(tc.now); got != tc.valid {
				t.Fatalf("valid = %v, want %v (remaining %v)", got, tc.valid, l.Remaining(tc.now))
			}
			if rem := l.Remaining(tc.now); (rem > 0) != tc.valid {
				t.Fatalf("remaining = %v, inconsistent with valid = %v", rem, tc.valid)
			}
		})
	}
}

func TestLeaseRenewRevoke(t *testing.T) {
	var l Lease
	now := time.Now()
	if l.Valid(now) || l.Remaining(now) != 0 {
		t.Fatal("a lease never renewed is valid")
	}
	l.Renew(now, 2*time.Second)
	l.Renew(now, time.Second) // a late reply of an older heartbeat: no shortening
	if !l.Valid(now.Add(1500 * time.Millisecond)) {
		t.Fatal("renew shortened the lease")
	}
	l.Revoke()
	if l.Valid(now) {
		t.Fatal("a revoked lease is valid")
	}
	l.Renew(now, time.Second)
	if !l.Valid(now) {
		t.Fatal("renew after revoke did not take")
	}
}
