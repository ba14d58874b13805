package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// spLease is the split and merge tests' lease: short, so that a dead
// tserver's tablets move quickly.
const spLease = 3 * time.Second

// spCluster starts a cluster with one master, the short lease and the
// given tserver flags.
func spCluster(t *testing.T, tservers int, flags ...string) (*cluster.Cluster, *client.Client) {
	t.Helper()
	return startCluster(t, spOptions(cluster.Options{}, tservers, flags...))
}

// spOptions is opts (its Hosts, say) with spCluster's masters, tservers,
// lease, heartbeat and flags.
func spOptions(opts cluster.Options, tservers int, flags ...string) cluster.Options {
	opts.Masters, opts.TServers, opts.Flags, opts.Lease, opts.Heartbeat = 1, tservers, flags, spLease, 300*time.Millisecond
	return opts
}

// spLoad is a seeded write load; every row is written once, so reads can
// check value and uniqueness.
type spLoad struct {
	mu    sync.Mutex
	acked map[string]string
	stop  chan struct{}
	wg    sync.WaitGroup
	n     atomic.Int64
}

func spStartLoad(ctx context.Context, tbl *client.Table, seed uint64, writers int) *spLoad {
	l := &spLoad{acked: map[string]string{}, stop: make(chan struct{})}
	for w := 0; w < writers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				i := l.n.Add(1)
				k := fmt.Sprintf("u%06d-%d", rng.IntN(1_000_000), i)
				v := fmt.Sprintf("%d:%0*d", i, 100+rng.IntN(400), 0)
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := tbl.Put(wctx, k, "cf", "q", []byte(v))
				cancel()
				if err == nil {
					l.mu.Lock()
					l.acked[k] = v
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

func (l *spLoad) halt() map[string]string {
	close(l.stop)
	l.wg.Wait()
	return l.acked
}

func (l *spLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// spVerify reads every acknowledged row back and scans the table once:
// each row once, in order. It logs how many acknowledged rows it found
// lost (missing or with another value) and fails if any.
func spVerify(t *testing.T, ctx context.Context, tbl *client.Table, want map[string]string) {
	t.Helper()
	// The gets by 8 readers at once: a run on hosts acknowledges tens of
	// thousands of rows.
	var (
		mu     sync.Mutex
		lost   []string
		getErr error
		wg     sync.WaitGroup
	)
	keys := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				r, err := tbl.Get(ctx, k)
				mu.Lock()
				switch {
				case err != nil:
					getErr = fmt.Errorf("get %s: %w", k, err)
				case len(r.Cells) != 1 || string(r.Cells[0].Value) != want[k]:
					lost = append(lost, fmt.Sprintf("get %s: %d cells, want one with %.10q", k, len(r.Cells), want[k]))
				}
				mu.Unlock()
			}
		}()
	}
	for k := range want {
		keys <- k
	}
	close(keys)
	wg.Wait()
	if getErr != nil {
		t.Fatal(getErr)
	}
	seen := map[string]bool{}
	last := ""
	if err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
		if seen[r.Key] || last != "" && r.Key <= last {
			t.Errorf("scan: %s twice or out of order (after %s)", r.Key, last)
		}
		seen[r.Key], last = true, r.Key
		return true
	}); err != nil {
		t.Fatalf("scan: %v", err)
	}
	for k := range want {
		if !seen[k] {
			lost = append(lost, "scan missed acknowledged row "+k)
		}
	}
	t.Logf("%d rows acknowledged, %d lost", len(want), len(lost))
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged rows lost, the first: %s", len(lost), lost[0])
	}
}

// TestSplitGrowsToEightTablets: a table written from one tablet grows by
// automatic splits to at least 8 tablets under write load; every
// acknowledged row reads back; the tablets spread over the tservers.
func TestSplitGrowsToEightTablets(t *testing.T) {
	skipShort(t, "automatic splits under load")
	splitGrows(t, cluster.Options{}, nil)
}

// TestHostsSplitGluster is TestSplitGrowsToEightTablets on hosts over a
// GlusterFS volume of three replicas, with faults applied while the
// table splits: the busiest tserver (the one most likely splitting) cut
// from the masters, then cut from its clients, then a brick of the volume
// stopped and restarted. Every acknowledged row reads back.
func TestHostsSplitGluster(t *testing.T) {
	hostsTest(t, "automatic splits on hosts over GlusterFS with partitions")
	splitGrows(t, cluster.Options{Hosts: hostsOptions()}, func(c *cluster.Cluster, cl *client.Client, sd int64) []fault {
		k := faultKit{c: c, lease: spLease, pick: busiest(c, cl, "grow", sd)}
		return k.all(t)
	})
}

// splitGrows is TestSplitGrowsToEightTablets's body over opts (its
// Hosts; spOptions sets the rest): once the table has split in two,
// it applies the faults faults returns (nil: none) while the writers run
// and splits go on, then waits for 8 tablets and checks every
// acknowledged row.
func splitGrows(t *testing.T, opts cluster.Options, faults func(*cluster.Cluster, *client.Client, int64) []fault) {
	sd := seed(t)
	c, cl := suiteCluster(t, spOptions(opts, 3, "--split-threshold=262144", "--split-interval=500ms", "--mem-limit=1048576"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "grow", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "grow"); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "grow")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	load := spStartLoad(ctx, tbl, uint64(sd), 16)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	var tablets []client.TabletInfo
	waitTablets := func(n int) {
		if err := wait.Until(ctx, func() (err error) {
			if tablets, err = cl.Tablets(ctx, "grow"); err == nil && len(tablets) < n {
				err = fmt.Errorf("%d tablets", len(tablets))
			}
			return err
		}); err != nil {
			t.Fatalf("only %d tablets after %v: %v", len(tablets), time.Since(began), err)
		}
	}
	if faults != nil {
		waitTablets(2)
		applyFaults(t, ctx, cl, tbl, "grow", faults(c, cl, sd), load.count)
	}
	waitTablets(8)
	grew := time.Since(began)
	want := load.halt()
	t.Logf("8 tablets after %v, %d rows acknowledged (%.0f rows/s)", grew, len(want), float64(len(want))/time.Since(began).Seconds())
	if err := c.WaitServing(ctx, "grow"); err != nil {
		t.Fatal(err)
	}
	spVerify(t, ctx, tbl, want)
	// The master balances the children over the tservers.
	wait.ForCtx(t, ctx, "tablets spread over the tservers", func() error {
		tablets, _ = cl.Tablets(ctx, "grow")
		owners := map[string]int{}
		for _, tb := range tablets {
			owners[tb.TServer]++
		}
		if len(owners) < 2 {
			return fmt.Errorf("tablets per tserver %v", owners)
		}
		t.Logf("%d tablets over %d tservers: %v", len(tablets), len(owners), owners)
		return nil
	})
	if err := c.WaitServing(ctx, "grow"); err != nil {
		t.Fatal(err)
	}
	spVerify(t, ctx, tbl, want)
}

// TestSplitSIGKILLAtEachStep kills the splitting tserver at each step of
// the split (a fault file read by its split hook) while writers run. The
// dead tserver's tablets are recovered by the other one. Before the
// commit the parent is intact (same tablet count); after it the children
// hold every acknowledged write.
func TestSplitSIGKILLAtEachStep(t *testing.T) {
	skipShort(t, "SIGKILL at each step of a split")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	fault := filepath.Join(t.TempDir(), "split-fault")
	c, cl := spCluster(t, 2, "--split-threshold=-1", "--split-fault-file="+fault, "--mem-limit=1048576")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "kill", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "kill"); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	load := spStartLoad(ctx, tbl, seed, 4)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	for step := 1; step <= 7; step++ {
		wait.ForCtx(t, ctx, fmt.Sprintf("%d acknowledged writes", step*150), func() error {
			if n := load.count(); n < step*150 {
				return fmt.Errorf("%d acknowledged", n)
			}
			return nil
		})
		before, err := cl.Tablets(ctx, "kill")
		if err != nil {
			t.Fatal(err)
		}
		// Split the tablet holding the most recent rows in the middle of
		// the key space of writers ("u5…").
		row := "u500000"
		var victim string
		for _, tb := range before {
			if tb.StartRow <= row && (tb.EndRow == "" || row < tb.EndRow) {
				victim = tb.TServer
				if tb.StartRow == row {
					row = "u" + strconv.Itoa(250000+step*1000)
				}
			}
		}
		if err := os.WriteFile(fault, []byte(strconv.Itoa(step)), 0o644); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		err = cl.SplitTablet(sctx, "kill", row)
		scancel()
		if _, serr := os.Stat(fault); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("step %d: the split did not reach the fault (err %v)", step, err)
		}
		if err == nil && step < 7 {
			t.Fatalf("step %d: split succeeded though its tserver died", step)
		}
		if err := c.WaitServing(ctx, "kill"); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		after, _ := cl.Tablets(ctx, "kill")
		wantCount := len(before)
		if step == 7 {
			wantCount++
		}
		if len(after) != wantCount {
			t.Fatalf("step %d: %d tablets after the crash, want %d", step, len(after), wantCount)
		}
		t.Logf("step %d: killed %s; %d tablets, %d writes acknowledged so far", step, victim, len(after), load.count())
		if i := spIndex(c, victim); i >= 0 {
			if err := c.RestartTServer(i); err != nil {
				t.Fatalf("restart %s: %v", victim, err)
			}
		}
	}
	want := load.halt()
	if err := c.WaitServing(ctx, "kill"); err != nil {
		t.Fatal(err)
	}
	spVerify(t, ctx, tbl, want)
	t.Logf("%d acknowledged rows read back after 7 crashes", len(want))
}

func spIndex(c *cluster.Cluster, addr string) int {
	for i := 0; i < c.NumTServers(); i++ {
		if c.TServerAddr(i) == addr {
			return i
		}
	}
	return -1
}
