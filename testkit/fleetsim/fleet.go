package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"bighive/internal/masterconn"
	pb "bighive/proto/bighivepb"
)

// Config configures a fleet.
type Config struct {
	// Addrs are the masters' gRPC addresses.
	Addrs []string
	// N is the number of fake tservers.
	N int
	// LoadConcurrency bounds the ReportTabletLoads calls in flight over the
	// whole fleet (default 64), as a real tserver bounds its loaders.
	LoadConcurrency int
	// ChurnEvery: once StartChurn is called, kill a random running fake
	// this often (0: no churn); it comes back as a new incarnation after
	// ChurnDown (default 2 s).
	ChurnEvery time.Duration
	ChurnDown  time.Duration
	// Seed seeds the churn's choices and the heartbeat phases.
	Seed uint64
}

// Fleet is N fake tservers sharing one gRPC connection per master for
// their load reports and log-split answers, and one leader-following
// connection (internal/masterconn, as a tserver's) for their membership.
type Fleet struct {
	cfg    Config
	conns  []*grpc.ClientConn
	leader atomic.Int32     // index into conns the fakes try first
	hb     *masterconn.Conn // registrations and heartbeats (package membership)
	Fakes  []*Fake
	load   chan struct{}

	mu         sync.Mutex
	rnd        *rand.Rand
	served     map[string]string    // tablet → uuid of the fake serving it
	violations []string             // a tablet served by two fakes
	gone       map[string]time.Time // tablet → when its fake stopped serving it
	maxGap     time.Duration        // longest time a tablet went unserved, then served again
	lat        []sample             // heartbeat round trips

	Reregisters   atomic.Int64 // Reregister answers
	HBErrors      atomic.Int64 // failed heartbeats
	Loads         atomic.Int64 // accepted tablet loads
	SplitTasks    atomic.Int64 // log-split tasks answered
	Assignments   atomic.Int64 // assignments received
	Unassignments atomic.Int64 // unassignments received
	Killed        atomic.Int64 // fakes the churn killed
	LoadErrors    atomic.Int64 // tablet loads refused, or in a failed ReportTabletLoads call
	lastLoadErr   atomic.Value

	ctx         context.Context
	cancel      context.CancelFunc
	churnCancel context.CancelFunc
	wg          sync.WaitGroup // churn and restarts
	calls       sync.WaitGroup // loads and log-split answers in flight
	closeOnce   sync.Once
}

type sample struct {
	at time.Time
	d  time.Duration
}

// New connects the fleet to the masters; Start starts the fakes.
func New(tb testing.TB, cfg Config) *Fleet {
	tb.Helper()
	if cfg.LoadConcurrency <= 0 {
		cfg.LoadConcurrency = 64
	}
	if cfg.ChurnDown <= 0 {
		cfg.ChurnDown = 2 * time.Second
	}
	f := &Fleet{cfg: cfg, load: make(chan struct{}, cfg.LoadConcurrency), rnd: rand.New(rand.NewPCG(cfg.Seed, 21)),
		served: map[string]string{}, gone: map[string]time.Time{}}
	for _, a := range cfg.Addrs {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			tb.Fatal(err)
		}
		f.conns = append(f.conns, conn)
	}
	var err error
	if f.hb, err = masterconn.New(cfg.Addrs, masterconn.Options{}); err != nil {
		tb.Fatal(err)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for i := 0; i < cfg.N; i++ {
		f.Fakes = append(f.Fakes, newFake(f, fmt.Sprintf("fake%05d", i)))
	}
	tb.Cleanup(f.Close)
	return f
}

// Start registers every fake and starts its heartbeats, each at a random
// phase of the interval.
func (f *Fleet) Start(ctx context.Context) error {
	errs := make(chan error, len(f.Fakes))
	sem := make(chan struct{}, 32)
	for _, fk := range f.Fakes {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- fk.Start(ctx)
		}()
	}
	var all []error
	for range f.Fakes {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	return nil
}

// StartChurn starts killing a random fake every Config.ChurnEvery (if
// set), each coming back as a new incarnation after Config.ChurnDown.
func (f *Fleet) StartChurn() {
	if f.cfg.ChurnEvery > 0 && f.churnCancel == nil {
		var cctx context.Context
		cctx, f.churnCancel = context.WithCancel(f.ctx)
		f.wg.Add(1)
		go f.churn(cctx)
	}
}

// Close stops every fake and the churn and closes the connections.
func (f *Fleet) Close() {
	f.closeOnce.Do(func() {
		f.cancel()
		f.wg.Wait()
		for _, fk := range f.Fakes {
			fk.Kill()
		}
		f.calls.Wait()
		for _, c := range f.conns {
			_ = c.Close()
		}
		_ = f.hb.Close()
	})
}

// StopChurn stops killing fakes; the ones down come back as scheduled.
func (f *Fleet) StopChurn() {
	if f.churnCancel != nil {
		f.churnCancel()
	}
}

func (f *Fleet) churn(ctx context.Context) {
	defer f.wg.Done()
	t := time.NewTicker(f.cfg.ChurnEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		fk := f.Fakes[f.rnd.IntN(len(f.Fakes))]
		f.mu.Unlock()
		if !fk.Running() {
			continue
		}
		fk.Kill()
		f.Killed.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(f.cfg.ChurnDown):
			}
			_ = fk.Start(f.ctx)
		}()
	}
}

// Pick returns k distinct random fakes (seeded).
func (f *Fleet) Pick(k int) []*Fake {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.rnd.Perm(len(f.Fakes))[:k]
	out := make([]*Fake, k)
	for i, j := range idx {
		out[i] = f.Fakes[j]
	}
	return out
}

// client returns the master the fakes try first.
func (f *Fleet) client() (pb.MasterClient, int) {
	i := int(f.leader.Load()) % len(f.conns)
	return pb.NewMasterClient(f.conns[i]), i
}

// missed moves the fakes on from master i after a failed call.
func (f *Fleet) missed(i int) {
	f.leader.CompareAndSwap(int32(i), int32((i+1)%len(f.conns)))
}

// call runs fn at the masters until it returns something other than
// Unavailable, or ctx ends.
func (f *Fleet) call(ctx context.Context, fn func(pb.MasterClient) error) error {
	for {
		mc, i := f.client()
		err := fn(mc)
		if status.Code(err) != codes.Unavailable {
			return err
		}
		f.missed(i)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Call runs fn at the leader, retrying other masters while unavailable.
func (f *Fleet) Call(ctx context.Context, fn func(pb.MasterClient) error) error {
	return f.call(ctx, fn)
}

func (f *Fleet) take(tablet, uuid string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.served[tablet]; ok && cur != uuid {
		f.violations = append(f.violations, fmt.Sprintf("tablet %s served by %s and %s", tablet, cur, uuid))
	}
	f.served[tablet] = uuid
	if g, ok := f.gone[tablet]; ok {
		f.maxGap = max(f.maxGap, now.Sub(g))
		delete(f.gone, tablet)
	}
}

func (f *Fleet) drop(tablets []string, uuid string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tablets {
		if f.served[t] == uuid {
			delete(f.served, t)
			f.gone[t] = now
		}
	}
}

// Served is the number of tablets some fake serves.
func (f *Fleet) Served() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.served)
}

// ServedBy returns tablet → serving fake's uuid.
func (f *Fleet) ServedBy() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.served))
	for k, v := range f.served {
		out[k] = v
	}
	return out
}

// Violations lists tablets seen served by two fakes at once.
func (f *Fleet) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.violations)
}

// MaxGap is the longest a tablet went unserved before a fake served it
// again, and the longest a still-unserved tablet has been waiting.
func (f *Fleet) MaxGap(now time.Time) (served, waiting time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.gone {
		waiting = max(waiting, now.Sub(g))
	}
	return f.maxGap, waiting
}

// ResetGaps forgets the gaps measured so far.
func (f *Fleet) ResetGaps() {
	f.mu.Lock()
	f.maxGap = 0
	f.mu.Unlock()
}

// heartbeated records one fake's heartbeat: its round trip when
// answered, else an error.
func (f *Fleet) heartbeated(sent time.Time, err error) {
	if err != nil {
		f.HBErrors.Add(1)
		return
	}
	d := time.Since(sent)
	f.mu.Lock()
	f.lat = append(f.lat, sample{sent, d})
	f.mu.Unlock()
}

// Latency summarizes the heartbeat round trips that began in [from, to).
type Latency struct {
	Count         int
	P50, P99, Max time.Duration
}

func (l Latency) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", l.Count, l.P50.Round(10*time.Microsecond),
		l.P99.Round(10*time.Microsecond), l.Max.Round(10*time.Microsecond))
}

// HeartbeatLatency is the client-side round trip of the heartbeats that
// began in [from, to): the master's handling plus gRPC over loopback.
func (f *Fleet) HeartbeatLatency(from, to time.Time) Latency {
	f.mu.Lock()
	var ds []time.Duration
	for _, s := range f.lat {
		if !s.at.Before(from) && s.at.Before(to) {
			ds = append(ds, s.d)
		}
	}
	f.mu.Unlock()
	slices.Sort(ds)
	if len(ds) == 0 {
		return Latency{}
	}
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return Latency{Count: len(ds), P50: q(0.5), P99: q(0.99), Max: ds[len(ds)-1]}
}
