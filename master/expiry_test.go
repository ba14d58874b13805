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
