package tserver_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/storage/split"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// splitNode starts a master and tservers with split options. No split
// test kills a tserver, so the lease is long: with -race on a loaded
// machine a 2 s lease ran out now and then, and every expiry cost a log
// split and a reload of every tablet.
func splitNode(t *testing.T, tservers int, opt func(i int, o *tserver.Options)) *node {
	t.Helper()
	return startNode(t, tservers, 6*time.Second, func(i int, o *tserver.Options) {
		o.SplitThreshold = -1
		o.SplitInterval = 200 * time.Millisecond
		o.SplitCheckInterval = 50 * time.Millisecond
		if opt != nil {
			opt(i, o)
		}
	})
}

// acked records acknowledged writes (row → value) from many writers.
type acked struct {
	mu sync.Mutex
	m  map[string]string
}

func (a *acked) put(k, v string) { a.mu.Lock(); a.m[k] = v; a.mu.Unlock() }

func (a *acked) snapshot() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.m))
	for k, v := range a.m {
		out[k] = v
	}
	return out
}

// writeLoad runs writers until stop is closed; each row is written once
// (with its final value), so a scan can check it sees every row once.
func writeLoad(ctx context.Context, t *testing.T, tbl *client.Table, seed uint64, writers int, stop <-chan struct{}) (*acked, *sync.WaitGroup) {
	t.Helper()
	a := &acked{m: map[string]string{}}
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1)
				k := fmt.Sprintf("r%08d", rng.Uint32()%1_000_000*100+uint32(i%100))
				v := fmt.Sprintf("%d-%0*d", i, 200+rng.IntN(300), 0)
				if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err == nil {
					a.put(k, v)
				} else if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					t.Logf("put %s: %v (not acknowledged)", k, err)
				}
			}
		}()
	}
	return a, &wg
}

// checkRows reads every acknowledged row back, and scans the table once,
// checking each row appears once, in order, with its value.
func checkRows(t *testing.T, ctx context.Context, tbl *client.Table, want map[string]string) {
	t.Helper()
	for k, v := range want {
		r, err := tbl.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if len(r.Cells) == 0 || string(r.Cells[0].Value) != v {
			t.Fatalf("get %s: %d cells, want value %.12q", k, len(r.Cells), v)
		}
	}
	seen := map[string]bool{}
	last := ""
	err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
		if seen[r.Key] || r.Key <= last && last != "" {
			t.Errorf("scan: row %s out of order or twice (after %s)", r.Key, last)
		}
		seen[r.Key], last = true, r.Key
		return true
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	for k := range want {
		if !seen[k] {
			t.Fatalf("scan missed acknowledged row %s (saw %d rows)", k, len(seen))
		}
	}
}

func splitLogs(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "splitlog"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestAutoSplitUnderLoad: with a small threshold a table grows from one
// tablet into several under concurrent writers and scanners; nothing
// acknowledged is lost, no scan sees a row twice.
func TestAutoSplitUnderLoad(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	n := splitNode(t, 2, func(_ int, o *tserver.Options) { o.SplitThreshold = 192 << 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	a, wg := writeLoad(ctx, t, tbl, seed, 8, stop)
	// Scanners during the splits: every row acknowledged before a scan
	// starts is in it, once.
	var scans atomic.Int64
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer swg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			before := a.snapshot()
			seen := map[string]bool{}
			err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
				if seen[r.Key] {
					t.Errorf("scan saw %s twice", r.Key)
				}
				seen[r.Key] = true
				return true
			})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("scan during split: %v", err)
				}
				return
			}
			for k := range before {
				if !seen[k] {
					t.Errorf("scan missed %s, acknowledged before it started", k)
					return
				}
			}
			scans.Add(1)
		}
	}()
	var tablets []client.TabletInfo
	wait.ForCtx(t, ctx, "5 tablets", func() (err error) {
		if tablets, err = c.Tablets(ctx, "t"); err == nil && len(tablets) < 5 {
			err = fmt.Errorf("table has %d tablets", len(tablets))
		}
		return err
	})
	close(stop)
	wg.Wait()
	swg.Wait()
	waitServing(t, ctx, c, "t")
	want := a.snapshot()
	t.Logf("%d tablets, %d rows acknowledged, %d full scans during splits", len(tablets), len(want), scans.Load())
	checkRows(t, ctx, tbl, want)
	// Tablets tile the key space.
	tablets, _ = c.Tablets(ctx, "t")
	prev := ""
	for i, tb := range tablets {
		if tb.StartRow != prev {
			t.Fatalf("tablet %d starts at %q, want %q: %+v", i, tb.StartRow, prev, tablets)
		}
		prev = tb.EndRow
	}
	if prev != "" {
		t.Fatalf("last tablet ends at %q", prev)
	}
}

// TestSplitFaultAtEachStep injects a failure after each step. Before the
// commit the parent stays intact and serving, the leftovers are removed
// and the next attempt succeeds; after it the split is done.
func TestSplitFaultAtEachStep(t *testing.T) {
	t.Parallel()
	var failAt atomic.Int32
	n := splitNode(t, 1, func(_ int, o *tserver.Options) {
		o.SplitHook = func(s split.Step) error {
			if int32(s) == failAt.Load() {
				return split.ErrInjected
			}
			return nil
		}
	})
	// Each phase has its own deadline, so one slow phase on a loaded
	// machine does not leave the restart check seconds to run in.
	phase := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	ctx := phase()
	c := n.client(context.Background())
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	put := func(t *testing.T, ctx context.Context, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			k, v := fmt.Sprintf("k%05d", i), fmt.Sprintf("v%d", i)
			if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err != nil {
				t.Fatalf("put: %v", err)
			}
			want[k] = v
		}
	}
	put(t, ctx, 0, 400)
	for step := int(split.StepPrepare); step <= int(split.StepCommitted); step++ {
		t.Run(split.Step(step).String(), func(t *testing.T) {
			ctx := phase()
			before, _ := c.Tablets(ctx, "t")
			logsBefore := splitLogs(t, n.root)
			failAt.Store(int32(step))
			row := fmt.Sprintf("k%05d", 100+step*40)
			err := c.SplitTablet(ctx, "t", row)
			failAt.Store(0)
			after, _ := c.Tablets(ctx, "t")
			if step < int(split.StepCommitted) {
				if err == nil {
					t.Fatalf("split with a fault at step %d succeeded", step)
				}
				if len(after) != len(before) {
					t.Fatalf("fault at step %d: %d tablets, want %d", step, len(after), len(before))
				}
				for _, tb := range after {
					if tb.State != "serving" {
						t.Fatalf("tablet %s %s after a failed split", tb.ID, tb.State)
					}
				}
				// No new child log is left behind (older ones may be gone:
				// a child's first checkpoint retires its log for deletion).
				for _, l := range splitLogs(t, n.root) {
					if !slices.Contains(logsBefore, l) {
						t.Fatalf("child log %s left after a failed split (before: %v)", l, logsBefore)
					}
				}
				// Retried later: now without fault.
				if err := c.SplitTablet(ctx, "t", row); err != nil {
					t.Fatalf("retry: %v", err)
				}
			} else if err != nil {
				t.Fatalf("a fault after the commit failed the split: %v", err)
			}
			waitServing(t, ctx, c, "t")
			if got, _ := c.Tablets(ctx, "t"); len(got) != len(before)+1 {
				t.Fatalf("%d tablets after the split, want %d", len(got), len(before)+1)
			}
			put(t, ctx, 400+step*50, 450+step*50)
			checkRows(t, ctx, tbl, want)
		})
	}
	// Restart: the children recover from their TSFiles and child logs.
	ctx = phase()
	if err := n.servers[0].Close(); err != nil {
		t.Fatal(err)
	}
	n.start(0)
	waitServing(t, ctx, c, "t")
	checkRows(t, ctx, tbl, want)
}

// TestSplitBadRequests: rows outside the tablet or at its start are
// refused with a clear status; a one-row tablet does not split.
func TestSplitBadRequests(t *testing.T) {
	t.Parallel()
	n := splitNode(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	if err := c.SplitTablet(ctx, "t", "m"); err == nil {
		t.Fatal("split at a tablet's start row succeeded")
	}
	tbl, _ := c.Open(ctx, "t")
	if err := tbl.Put(ctx, "a", "cf", "q", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.SplitTablet(ctx, "t", "b"); err != nil {
		t.Fatalf("split of [\"\", m) at b: %v", err)
	}
	waitServing(t, ctx, c, "t")
	if got, _ := c.Tablets(ctx, "t"); len(got) != 3 {
		t.Fatalf("%d tablets, want 3", len(got))
	}
	checkRows(t, ctx, tbl, map[string]string{"a": "x"})
}
