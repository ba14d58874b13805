package master

import (
	"errors"
	"testing"
	"time"

	"bighive/testkit/wait"
)

// TestDeadDeclaredAtExpiry: the leader declares a tserver dead as soon as
// its lease plus the margin has run out, not at its next tick (an hour
// here): the leader loop's wait ends at the next lease's end too.
func TestDeadDeclaredAtExpiry(t *testing.T) {
	c := startCluster(t, 1, func(cfg *Config) { cfg.TickInterval, cfg.StartupGrace = time.Hour, -1 })
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	f := newFakeTS(t, "ts0", cl, newOwners())
	f.start(50 * time.Millisecond)
	time.Sleep(200 * time.Millisecond) // a few heartbeats
	ls, err := c.masters[0].ready()
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.masters[0].cfg
	f.stop()
	var late time.Duration
	wait.For(t, 10*time.Second, "ts0 declared dead", func() error {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		l := ls.leases["ts0"]
		if l == nil || !l.dead {
			return errors.New("not dead yet")
		}
		late = time.Since(l.last) - cfg.Lease - cfg.DeadMargin
		return nil
	})
	t.Logf("declared dead %v after its lease plus the margin ran out (polled every 20 ms at most)", late.Round(time.Millisecond))
	if late > time.Second { // a tick an hour away would never come; a second is load's slack
		t.Errorf("declared dead %v after its lease plus the margin ran out", late)
	}
}

// TestDeadAfter: a tserver this leader heard from is dead a lease and the
// dead margin after its last heartbeat; one it never heard from (its
// lease counted from the leader's start) a lease and the confirm window
// after, since the earlier leader granted its last lease within the
// window of a confirmation that came before this leader's election.
func TestDeadAfter(t *testing.T) {
	t.Parallel()
	cfg := Config{Lease: 5 * time.Second, Heartbeat: time.Second}
	cfg.setDefaults()
	if cfg.ConfirmWindow != 250*time.Millisecond || cfg.DeadMargin != 2*time.Second {
		t.Fatalf("defaults: confirm window %v, dead margin %v; want 250ms, 2s", cfg.ConfirmWindow, cfg.DeadMargin)
	}
	ls := &leaderState{m: &Master{cfg: cfg}}
	start := time.Now()
	for _, tc := range []struct {
		name  string
		heard bool
		after time.Duration
	}{
		{"heard from", true, cfg.Lease + cfg.DeadMargin},
		{"never heard from", false, cfg.Lease + cfg.ConfirmWindow},
	} {
		l := &lease{last: start, heard: tc.heard}
		if got := ls.deadAfter(l); got != tc.after {
			t.Errorf("%s: dead after %v, want %v", tc.name, got, tc.after)
		}
		if ls.expired(l, start.Add(tc.after)) || !ls.expired(l, start.Add(tc.after+time.Millisecond)) {
			t.Errorf("%s: expired does not turn at %v", tc.name, tc.after)
		}
	}
	// The window never exceeds the margin, whatever is configured.
	wide := Config{Heartbeat: time.Second, DeadMargin: 300 * time.Millisecond, ConfirmWindow: time.Second}
	wide.setDefaults()
	if wide.ConfirmWindow != 300*time.Millisecond {
		t.Errorf("confirm window %v with a 300ms margin, want 300ms", wide.ConfirmWindow)
	}
}
