package e2e_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// TestIncrementAcrossSplitAndKill: goroutines increment one counter
// through ReadModifyWriteRow while its tablet splits at the counter's row
// and then its tserver process is SIGKILLed (its tablets fail over and its
// log is replayed elsewhere). The counter ends at least at the number of
// acknowledged increments and at most that plus the increments whose
// outcome is unknown (the client returned an error after the request may
// have reached a tserver); the client never retries one itself.
func TestIncrementAcrossSplitAndKill(t *testing.T) {
	skipShort(t, "increments across a split and a SIGKILL")
	c, cl := spCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "ctr", 1)
	const row = "m-counter"
	var acked, unknown atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m := client.NewReadModifyWrite()
				m.Increment("cf", "n", 1)
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := tbl.ApplyReadModifyWrite(wctx, row, m)
				cancel()
				if err != nil {
					unknown.Add(1)
				} else {
					acked.Add(1)
				}
			}
		}()
	}
	splitThenKillRowOwner(t, ctx, c, cl, "ctr", row, &acked, 100, "increments")
	close(stop)
	wg.Wait()
	r, err := tbl.Get(ctx, row, client.LatestN(1))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := r.Value("cf", "n")
	if !ok || len(v) != 8 {
		t.Fatalf("counter cell %x (present %v)", v, ok)
	}
	got, a, u := int64(binary.BigEndian.Uint64(v)), acked.Load(), unknown.Load()
	t.Logf("counter %d, acknowledged %d, unknown %d", got, a, u)
	if got < a || got > a+u {
		t.Fatalf("counter %d, want within [acknowledged %d, acknowledged+unknown %d]", got, a, a+u)
	}
}

// splitThenKillRowOwner is the disruption of the single-row atomicity
// tests: once step more calls are acknowledged it splits table's tablet
// at row; after step more it SIGKILLs the tserver serving row and waits
// until every tablet of the table serves elsewhere; then it waits for step
// more (the calls go on after the recovery). what names the calls.
func splitThenKillRowOwner(t *testing.T, ctx context.Context, c *cluster.Cluster, cl *client.Client, table, row string, acked *atomic.Int64, step int64, what string) {
	t.Helper()
	waitFor := func(n int64) {
		t.Helper()
		wait.ForCtx(t, ctx, fmt.Sprintf("%d %s acknowledged", n, what), func() error {
			if got := acked.Load(); got < n {
				return fmt.Errorf("only %d", got)
			}
			return nil
		})
	}
	waitFor(step)
	if err := cl.SplitTablet(ctx, table, row); err != nil {
		t.Fatalf("split: %v", err)
	}
	waitFor(acked.Load() + step)
	holder := ""
	tabs, err := cl.Tablets(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tabs {
		if tb.StartRow <= row && (tb.EndRow == "" || row < tb.EndRow) {
			holder = tb.TServer
		}
	}
	victim := -1
	for i := 0; i < c.NumTServers(); i++ {
		if c.TServerAddr(i) == holder {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("no tserver serves row %q (tablets %+v)", row, tabs)
	}
	killed := time.Now()
	if err := c.KillTServer(victim); err != nil {
		t.Fatal(err)
	}
	waitServedElsewhere(t, ctx, cl, table, killed, holder)
	waitFor(acked.Load() + step)
}
