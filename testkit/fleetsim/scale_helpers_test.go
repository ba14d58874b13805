package fleetsim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

var (
	flagFull      = flag.Bool("scale.full", false, "full size: 1000 tservers, 1000000 tablets, production heartbeat (1 s) and lease (5 s), 100000 split keys")
	flagTServers  = flag.Int("scale.tservers", 20, "fake tservers")
	flagTablets   = flag.Int("scale.tablets", 2000, "tablets")
	flagSplits    = flag.Int("scale.splits", 2000, "split keys of the big-DDL table")
	flagHeartbeat = flag.Duration("scale.heartbeat", time.Second, "heartbeat interval (production: 1 s); the lease is 5 of them, as in production")
	flagWindow    = flag.Duration("scale.window", 3*time.Second, "steady-state measuring window")
	flagSeed      = flag.Uint64("scale.seed", 0, "seed of the churn and phases (0: from the clock)")
)

// size is one run's dimensions.
type size struct {
	tservers, tablets, splits int
	heartbeat, lease          time.Duration
	window                    time.Duration
	seed                      uint64
	procs                     bool // masters as OS processes
}

func sizes(t *testing.T) size {
	if testing.Short() {
		t.Skip("scale scenario of 3 master processes and fake tservers: runs without -short")
	}
	s := size{tservers: *flagTServers, tablets: *flagTablets, splits: *flagSplits, heartbeat: *flagHeartbeat, window: *flagWindow, seed: *flagSeed, procs: *flagProcs}
	if *flagFull {
		s.tservers, s.tablets, s.splits, s.heartbeat, s.window = 1000, 1_000_000, 100_000, time.Second, 30*time.Second
	}
	if s.seed == 0 {
		s.seed = uint64(time.Now().UnixNano())
	}
	s.lease = 5 * s.heartbeat
	t.Logf("size: %d tservers, %d tablets, heartbeat %v, lease %v, seed %d", s.tservers, s.tablets, s.heartbeat, s.lease, s.seed)
	return s
}

// tweak gives the masters the run's heartbeat and lease (dead margin and
// resend as the defaults derive them).
func (s size) tweak(extra func(*master.Config)) func(*master.Config) {
	return func(c *master.Config) {
		c.Heartbeat, c.Lease = s.heartbeat, s.lease
		if extra != nil {
			extra(c)
		}
	}
}

// world is masters, a fleet and the tables.
type world struct {
	t  *testing.T
	s  size
	ms *Masters
	fl *Fleet
	u0 []Usage // the masters' usage once the leader was ready
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// budget is a generous bound for waits that scale with the tablets (the
// tests never assert on speed; this only keeps a hang from lasting forever).
func (s size) budget() time.Duration {
	return 2*time.Minute + time.Duration(s.tablets)*time.Millisecond
}

// newWorld starts 3 masters and the fleet, creates s.tablets tablets and
// waits until every tablet is served. It returns the time from the
// fleet's start until then.
func newWorld(t *testing.T, s size, fc Config, extra func(*master.Config)) (*world, time.Duration) {
	w := &world{t: t, s: s, ms: startWorldMasters(t, s, extra)}
	ctx := ctxFor(t, s.budget())
	if _, err := w.ms.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	w.u0 = w.masterUsages()
	fc.Addrs, fc.N, fc.Seed = w.ms.Addrs(), s.tservers, s.seed
	w.fl = New(t, fc)
	// The fleet registers first: tablets created before any tserver is
	// live would all go to the first one to register and then trickle
	// out by rebalancing, MaxMoves at a time.
	began := time.Now()
	if err := w.fl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.createTables(ctx, "scale", s.tablets)
	w.waitServed(ctx, s.tablets)
	return w, time.Since(began)
}

// createTables creates tables named prefix0, prefix1, ... holding n
// tablets in all (at most 100 001 per table, the split-key limit).
func (w *world) createTables(ctx context.Context, prefix string, n int) {
	w.t.Helper()
	for i := 0; n > 0; i++ {
		k := min(n, 100_001)
		w.createTable(ctx, fmt.Sprintf("%s%d", prefix, i), k-1)
		n -= k
	}
}

func (w *world) createTable(ctx context.Context, name string, splits int) {
	w.t.Helper()
	req := &pb.CreateTableRequest{Schema: &pb.TableSchema{Name: name, Families: []*pb.FamilySpec{{Name: "f", MaxVersions: 1}}}}
	for j := 1; j <= splits; j++ {
		req.SplitKeys = append(req.SplitKeys, []byte(fmt.Sprintf("r%08d", j)))
	}
	err := w.fl.Call(ctx, func(mc pb.MasterClient) error {
		_, err := mc.CreateTable(ctx, req)
		if status.Code(err) == codes.AlreadyExists {
			// The names are new: an earlier try (ours, or a follower's
			// forwarding) timed out after its command committed.
			return nil
		}
		return err
	})
	if err != nil {
		w.t.Fatalf("create table %s (%d split keys): %v", name, splits, err)
	}
}

// waitServed waits until the fleet serves n tablets.
func (w *world) waitServed(ctx context.Context, n int) {
	w.t.Helper()
	wait.ForCtx(w.t, ctx, fmt.Sprintf("the fleet serving %d tablets", n), func() error {
		if s := w.fl.Served(); s != n {
			return fmt.Errorf("fleet serves %d tablets (%d load errors, the last: %v; %d loads, %d assignments, %d heartbeat errors, heartbeats %s)",
				s, w.fl.LoadErrors.Load(), w.fl.lastLoadErr.Load(), w.fl.Loads.Load(), w.fl.Assignments.Load(),
				w.fl.HBErrors.Load(), w.fl.HeartbeatLatency(time.Time{}, time.Now()))
		}
		return nil
	})
}

func (w *world) noViolations() {
	w.t.Helper()
	if v := w.fl.Violations(); len(v) > 0 {
		w.t.Fatalf("%d tablets served twice, e.g. %s", len(v), v[0])
	}
}

// leader is the index of the ready leader.
func (w *world) leader() int {
	w.t.Helper()
	i, err := w.ms.Leader(ctxFor(w.t, 30*time.Second))
	if err != nil {
		w.t.Fatal(err)
	}
	return i
}

// commands counts the commands of a type the running masters proposed and
// had applied (a leader change moves the proposing to another master).
func (w *world) commands(typ string) float64 {
	var n float64
	for i := range w.ms.Peers {
		if w.ms.Running(i) {
			n += commands(w.ms.Metrics(i), typ)
		}
	}
	return n
}

// commands counts a master's applied commands of a type.
func commands(reg prometheus.Gatherer, typ string) float64 {
	mfs, _ := reg.Gather()
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "bighive_master_commands_total" {
			continue
		}
		for _, m := range mf.Metric {
			if label(m, "type") == typ && label(m, "result") == "applied" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histogramQuantile is the upper bound of the bucket holding quantile q of
// a histogram's observations since the last call (before: the previous
// cumulative counts), as Prometheus' histogram_quantile without
// interpolation.
func histogramQuantile(reg prometheus.Gatherer, name string, q float64, before map[float64]uint64) (float64, map[float64]uint64) {
	mfs, _ := reg.Gather()
	now := map[float64]uint64{}
	var total uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		h := mf.Metric[0].GetHistogram()
		for _, b := range h.Bucket {
			now[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		now[inf] = h.GetSampleCount()
		total = h.GetSampleCount() - before[inf]
	}
	if total == 0 {
		return 0, now
	}
	want := uint64(q * float64(total))
	best := inf
	for ub, c := range now {
		if c-before[ub] >= want && ub < best {
			best = ub
		}
	}
	return best, now
}

const inf = 1e308

// usage is the process's CPU time and memory at one moment.
type usage struct {
	at        time.Time
	cpu       time.Duration
	heap, rss uint64
}

func readUsage() usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{at: time.Now(), cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), heap: ms.HeapInuse, rss: rss()}
}

// rss is the process's resident set (VmRSS of /proc/self/status), 0 where
// there is none.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
