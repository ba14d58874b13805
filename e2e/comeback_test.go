package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// Issue 31's master-side targets, with the default lease (5 s) and
// heartbeat (1 s): a tserver stopped past its lease has every tablet
// served elsewhere within lease + 3 s of the stop, and once resumed it
// takes no tablet from the others during its rebalancing warm-up (two
// leases; docs/design.md 'Rebalancing is gradual'), then its share by
// moves that each leave their tablet unserved under 2 s (the master's
// "tablet available again" lines, master/unavail.go).
const (
	cbLease   = 5 * time.Second // the master's default --lease
	cbTablets = 12
)

func TestFailoverPausedTServerDefaultLease(t *testing.T) {
	skipShort(t, "SIGSTOP of a tserver past the default lease")
	sd := seed(t)
	c := cluster.New(t, cluster.Options{Masters: 1, TServers: 3, Flags: []string{"--mem-limit=1073741824"}})
	cl := failoverClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, w := writing(t, ctx, c, cl, "cb", cbTablets, 4, 300, sd)

	addr, before, back, _ := stopServedElsewhere(t, ctx, c, cl, "cb", sd, c.PauseTServer)
	moved := logServedAgain(t, before, back, addr, "SIGSTOP")
	worst := maxDur(back)
	// The target is lease + 3 s (6.5-7.2 s measured), logged against the
	// figure. The check allows 1.5 s more, for a loaded CI machine: it
	// catches a recovery that waits for something else, not the 8.7-8.9 s
	// of before the leader declared a death at its lease's expiry, which
	// master's TestDeadDeclaredAtExpiry guards.
	target := cbLease + 3*time.Second
	t.Logf("SIGSTOP of %s (%d tablets): every tablet served elsewhere after %v (lease %v; target %v met: %v)", addr, moved,
		worst.Round(time.Millisecond), cbLease, target, worst <= target)
	if worst > target+1500*time.Millisecond {
		t.Errorf("the stopped tserver's tablets served again %v after the stop, want within lease + 3 s and 1.5 s of slack (%v)", worst, target+1500*time.Millisecond)
	}
	w.waitAcks(t, ctx, 100)

	if err := c.ResumeTServer(indexOf(c, addr)); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitLive(t, ctx, cl, addr, true) // it registered again
	// Its warm-up is two leases from its registration: for most of it,
	// no tablet moves to it.
	for time.Since(resumed) < cbLease {
		for id, a := range owners(t, ctx, cl, "cb") {
			if a == addr {
				t.Fatalf("tablet %s moved to %s %v after it resumed, within its warm-up", id, addr, time.Since(resumed).Round(time.Millisecond))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// After the warm-up it takes its share, a few moves per interval.
	wait.ForCtx(t, ctx, "the resumed tserver to take its share", func() error {
		n := 0
		for _, a := range owners(t, ctx, cl, "cb") {
			if a == addr {
				n++
			}
		}
		if n < cbTablets/c.NumTServers() {
			return fmt.Errorf("%s serves %d tablets", addr, n)
		}
		return nil
	})
	t.Logf("the resumed tserver had its share %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
	w.waitAcks(t, ctx, 100)
	w.stop()
	w.verify(t, ctx)
	for _, cause := range []string{"recovery", "move"} {
		ds := unavailableFigures(t, c, cause)
		t.Logf("master's unserved time per tablet, %s: %v", cause, ds)
		for _, d := range ds {
			if cause == "move" && d > 2*time.Second {
				t.Errorf("a move left its tablet unserved %v", d)
			}
		}
	}
}

// unavailableFigures reads the leader's "tablet available again" log lines
// of cause (master/unavail.go).
func unavailableFigures(t *testing.T, c *cluster.Cluster, cause string) []time.Duration {
	t.Helper()
	var out []time.Duration
	re := regexp.MustCompile(` unavailable=(\S+)`)
	for _, line := range processLogLines(t, c) {
		if !strings.Contains(line, `msg="tablet available again"`) || !strings.Contains(line, " cause="+cause+" ") {
			continue
		}
		if m := re.FindStringSubmatch(line); m != nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				out = append(out, d.Round(time.Millisecond))
			}
		}
	}
	return out
}
