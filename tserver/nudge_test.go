package tserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/client"
	"bighive/master"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// TestMasterNudgesTServers: with 30 s heartbeats, a new table's tablets
// serve, and a rebalancing move finishes, within seconds, because the
// master nudges each tserver it has something new for (an assignment, a
// move's unassignment) instead of waiting for its next heartbeat
// (master/nudge.go; TServer.AssignTablets heartbeats at once).
func TestMasterNudgesTServers(t *testing.T) {
	const hb = 30 * time.Second
	slow := func(o *tserver.Options) { o.HeartbeatInterval = hb }
	n := startNodeWith(t, 1, func(c *master.Config) {
		c.Lease, c.Heartbeat, c.TickInterval, c.StartupGrace, c.RebalanceWarmup = 2*hb, hb, 50*time.Millisecond, -1, -1
	}, func(_ int, o *tserver.Options) { slow(o) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := n.client(ctx)
	began := time.Now()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	if d := time.Since(began); d > hb/3 {
		t.Errorf("a new table served %v after its creation: the tserver waited for its next heartbeat", d)
	}

	// A second tserver: one tablet moves to it.
	n.add(slow)
	joined := time.Now()
	second := n.opts[1].Listen
	wait.ForCtx(t, ctx, "a tablet moved to the second tserver", func() error {
		tabs, err := c.Tablets(ctx, "t")
		if err != nil {
			return err
		}
		for _, tb := range tabs {
			if tb.TServer == second && tb.State == "serving" {
				return nil
			}
		}
		return fmt.Errorf("tablets %+v", tabs)
	})
	if d := time.Since(joined); d > hb/3 {
		t.Errorf("the move took %v: its steps waited for heartbeats", d)
	}
	t.Logf("new table served after %v; a move finished %v after the second tserver started", joined.Sub(began).Round(time.Millisecond), time.Since(joined).Round(time.Millisecond))
}
