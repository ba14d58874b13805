package master

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bighive/testkit/wait"
)

// unavailable is the count and sum of the leader's
// bighive_master_tablet_unavailable_seconds of cause.
func unavailable(t *testing.T, reg *prometheus.Registry, cause string) (n int, sum float64) {
	t.Helper()
	got := gathered(t, reg, "bighive_master_tablet_unavailable_seconds")
	return int(got[cause]), got[cause+"/sum"]
}

// TestTabletUnavailableMetric: each tablet a rebalancing move or a
// recovery took from its owner is one observation of
// bighive_master_tablet_unavailable_seconds under its cause, of the time
// it was not served: a move's is short, a recovery's is at least the
// lease plus the margin (counted from the dead tserver's last heartbeat).
func TestTabletUnavailableMetric(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, cl, mc, o := servedFleet(t, func(cfg *Config) { cfg.Metrics, cfg.RebalanceWarmup = reg, -1 }, 2, 6)
	cfg := c.masters[0].cfg
	if n, _ := unavailable(t, reg, "move"); n != 0 {
		t.Fatalf("%d move observations before any move", n)
	}

	// A third tserver: two tablets move to it.
	f := newFakeTS(t, "ts9", cl, o)
	f.start(50 * time.Millisecond)
	wait.For(t, 30*time.Second, "two tablets moved to ts9", func() error {
		if n := servingCounts(t, mc, "t", 6)["ts9"]; n != 2 {
			return fmt.Errorf("ts9 serves %d", n)
		}
		return nil
	})
	wait.For(t, 10*time.Second, "two move observations", func() error {
		if n, _ := unavailable(t, reg, "move"); n != 2 {
			return fmt.Errorf("%d move observations", n)
		}
		return nil
	})
	n, sum := unavailable(t, reg, "move")
	t.Logf("moves: %d tablets, %.3f s unavailable on average", n, sum/float64(n))
	if sum/float64(n) > 2 {
		t.Errorf("a move left its tablet unserved %.3f s on average", sum/float64(n))
	}

	// ts9 crashes: its two tablets are recovered on the others.
	f.stop()
	wait.For(t, 30*time.Second, "two recovery observations", func() error {
		if n, _ := unavailable(t, reg, "recovery"); n != 2 {
			return fmt.Errorf("%d recovery observations", n)
		}
		return nil
	})
	n, sum = unavailable(t, reg, "recovery")
	t.Logf("recovery: %d tablets, %.3f s unavailable on average (lease %v + margin %v)", n, sum/float64(n), cfg.Lease, cfg.DeadMargin)
	if floor := (cfg.Lease + cfg.DeadMargin).Seconds(); sum/float64(n) < floor || sum/float64(n) > floor+5 {
		t.Errorf("a recovered tablet was unserved %.3f s on average, want from the lease plus the margin (%.3f s) to 5 s more", sum/float64(n), floor)
	}
	if n, _ := unavailable(t, reg, "move"); n != 2 {
		t.Errorf("%d move observations after the recovery, want still 2", n)
	}
}
