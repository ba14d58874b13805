package tserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"bighive/client"
	"bighive/testkit/wait"
)

// heartbeatKinds reads bighive_master_heartbeats_total by kind.
func heartbeatKinds(t *testing.T, n *node) map[string]float64 {
	t.Helper()
	mfs, err := n.master.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "bighive_master_heartbeats_total" {
			continue
		}
		for _, m := range mf.Metric {
			out[labelValue(m, "kind")] = m.GetCounter().GetValue()
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestHeartbeatsAreDeltas checks that a serving tserver's heartbeats are
// deltas the master applies without reading its tablets, and that a
// tablet's growth still reaches the master's size figures through them.
func TestHeartbeatsAreDeltas(t *testing.T) {
	t.Parallel()
	n := startNode(t, 1, 2*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"k5"}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	before := heartbeatKinds(t, n)
	wait.ForCtx(t, ctx, "5 skipped delta heartbeats", func() error {
		if now := heartbeatKinds(t, n); now["delta_skipped"] < before["delta_skipped"]+5 {
			return fmt.Errorf("heartbeats %v (before %v)", now, before)
		}
		return nil
	})
	kinds := heartbeatKinds(t, n)
	if kinds["send_full"] > 1 {
		t.Errorf("%v send_full answers to one tserver with one master, want at most one", kinds["send_full"])
	}
	// Writes grow the first tablet (its buffer); the size the master shows
	// follows (by a delta, or at the latest by the periodic full heartbeat).
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := tbl.Put(ctx, fmt.Sprintf("k%03d", i), "cf", "q", make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	wait.ForCtx(t, ctx, "the master's size of the first tablet after 200 KB of writes", func() error {
		tablets, err := c.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if tablets[0].SizeBytes < 200*1000 {
			return fmt.Errorf("the size of %s stays %d", tablets[0].ID, tablets[0].SizeBytes)
		}
		return nil
	})
}
