package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// splitChapter: a table that starts as one tablet grows under write load
// into several by automatic splits (the six steps of package split on the tserver,
// one metadata transaction at the master). It runs its own small cluster
// with a 1 MiB split threshold, so the main tour's tablets stay as they are.
func splitChapter(ctx context.Context, t *tour, dir string) error {
	done := t.stepf("Split: a second cluster (1 master, 2 tservers, --split-threshold=1MiB); table %q starts as one tablet", "events")
	c, err := cluster.Start(ctx, cluster.Options{Masters: 1, TServers: 2, Dir: filepath.Join(dir, "split-cluster"),
		Flags: []string{"--split-threshold=1048576", "--split-interval=1s", "--mem-limit=4194304"}})
	if err != nil {
		return fmt.Errorf("start split cluster: %w", err)
	}
	defer c.Close()
	cl, err := client.Dial(ctx, c.MasterAddrs())
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "events", Families: []client.FamilySpec{{Name: "e"}}}); err != nil {
		return err
	}
	if err := c.WaitServing(ctx, "events"); err != nil {
		return err
	}
	tbl, err := cl.Open(ctx, "events")
	if err != nil {
		return err
	}
	if err := printTablets(ctx, t, cl, "events"); err != nil {
		return err
	}
	done()

	const want = 6
	done = t.stepf("Write with 16 writers until the table has %d tablets; every write acknowledged is kept", want)
	var (
		mu    sync.Mutex
		acked = map[string]string{}
		next  atomic.Int64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		began = time.Now()
	)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1)
				k := fmt.Sprintf("ev%08d", (i*7919)%100_000_000)
				v := fmt.Sprintf("%d-%0400d", i, 0)
				if err := tbl.Put(ctx, k, "e", "v", []byte(v)); err == nil {
					mu.Lock()
					acked[k] = v
					mu.Unlock()
				}
			}
		}()
	}
	var tablets []client.TabletInfo
	for ctx.Err() == nil {
		if tablets, err = cl.Tablets(ctx, "events"); err == nil && len(tablets) >= want {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	t.printf("%d tablets after %v, %d writes acknowledged meanwhile", len(tablets), time.Since(began).Round(time.Millisecond), len(acked))
	if err := c.WaitServing(ctx, "events"); err != nil {
		return err
	}
	if err := printTablets(ctx, t, cl, "events"); err != nil {
		return err
	}
	done()

	done = t.stepf("Read every acknowledged row back across the children")
	for k, v := range acked {
		r, err := tbl.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("get %s: %w", k, err)
		}
		if got := mustValue(r, "e", "v"); got != v {
			return fmt.Errorf("row %s lost or changed by a split (%d bytes, want %d)", k, len(got), len(v))
		}
	}
	t.printf("%d rows, all there", len(acked))
	done()
	return nil
}
