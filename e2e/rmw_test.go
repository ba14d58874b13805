package e2e_test

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
)

// TestIncrementAcrossSplitAndKill: goroutines increment one counter
// through ReadModifyWriteRow while its tablet splits at the counter's row
// and then its tserver process is SIGKILLed (its tablets fail over and its
// log is replayed elsewhere). The counter ends at least at the number of
// acknowledged increments and at most that plus the increments whose
// outcome is unknown (the client returned an error after the request may
// have reached a tserver); the client never retries one itself.
func TestIncrementAcrossSplitAndKill(t *testing.T) {
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
	waitFor := func(n int64) {
		t.Helper()
		for acked.Load() < n {
			if ctx.Err() != nil {
				t.Fatalf("only %d increments acknowledged, waiting for %d", acked.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(100)
	if err := cl.SplitTablet(ctx, "ctr", row); err != nil {
		t.Fatalf("split: %v", err)
	}
	waitFor(acked.Load() + 100)
	holder := ""
	tabs, err := cl.Tablets(ctx, "ctr")
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
	waitServedElsewhere(t, ctx, cl, "ctr", killed, holder)
	waitFor(acked.Load() + 100) // increments go on after the recovery
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
