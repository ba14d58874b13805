package demo

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// The demo cluster's lease, short so the failover chapter is quick.
const (
	failoverLease     = 2 * time.Second
	failoverHeartbeat = 200 * time.Millisecond
)

// failoverChapter kills a tserver with SIGKILL while writers run, prints
// when each of its tablets served again elsewhere, and reads back every
// acknowledged row.
func failoverChapter(ctx context.Context, t *tour, c *cluster.Cluster, cl *client.Client, tbl *client.Table, table string, rows int) error {
	victim := c.NumTServers() - 1
	addr := c.TServerAddr(victim)
	done := t.stepf("Failover: SIGKILL tserver %s while 4 writers run (lease %v)", addr, failoverLease)
	before, err := cl.Tablets(ctx, table)
	if err != nil {
		return err
	}
	var mine []string
	for _, tb := range before {
		if tb.TServer == addr {
			mine = append(mine, tb.ID)
		}
	}

	wctx, stop := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked = map[string]string{}
		fails int
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				row := rowKey((i*4+w)*7919%rows) + fmt.Sprintf("-fo-%d-%d", w, i)
				val := fmt.Sprintf("failover %d/%d", w, i)
				m := client.NewMutation()
				m.Set("profile", "name", time.Now().UnixMicro(), []byte(val))
				actx, cancel := context.WithTimeout(wctx, 20*time.Second)
				err := tbl.Apply(actx, row, m)
				cancel()
				mu.Lock()
				if err == nil {
					acked[row] = val
				} else if wctx.Err() == nil {
					fails++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	if err := c.KillTServer(victim); err != nil {
		stop()
		wg.Wait()
		return err
	}
	t.printf("killed %s at +%v; it served %d tablets", addr, time.Since(t.began).Round(time.Millisecond), len(mine))
	back := map[string]time.Duration{}
	for len(back) < len(mine) {
		if ctx.Err() != nil {
			stop()
			wg.Wait()
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
		tabs, err := cl.Tablets(ctx, table)
		if err != nil {
			continue
		}
		for _, tb := range tabs {
			if _, seen := back[tb.ID]; !seen && tb.State == "serving" && tb.TServer != "" && tb.TServer != addr {
				for _, id := range mine {
					if id == tb.ID {
						back[tb.ID] = time.Since(killed)
						t.printf("%-18s serving again on %s after %v (epoch %d)", tb.ID, tb.TServer, back[tb.ID].Round(time.Millisecond), tb.Epoch)
					}
				}
			}
		}
	}
	time.Sleep(500 * time.Millisecond) // writes land on the new owners
	stop()
	wg.Wait()
	var worst time.Duration
	for _, d := range back {
		worst = max(worst, d)
	}
	t.printf("every tablet served again %v after the kill; %d writes acknowledged meanwhile, %d failed (never acknowledged)",
		worst.Round(time.Millisecond), len(acked), fails)

	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, err := tbl.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("read back %s: %w", k, err)
		}
		if v, _ := r.Value("profile", "name"); string(v) != acked[k] {
			return fmt.Errorf("acknowledged row %s reads %q, want %q", k, v, acked[k])
		}
	}
	t.printf("all %d acknowledged rows read back with their values", len(keys))
	done()
	return nil
}
