package tserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// blockingSender stands in for the master at the reporter's one seam: it
// records each call's loads and holds the call until released.
type blockingSender struct {
	mu      sync.Mutex
	calls   [][]string
	release chan struct{}
	refuse  map[string]error // per-load refusals
	fail    error            // fails whole calls
}

func (b *blockingSender) send(ctx context.Context, loads []*pb.TabletLoadReport) ([]error, error) {
	ids := make([]string, len(loads))
	for i, l := range loads {
		ids[i] = l.TabletId
	}
	b.mu.Lock()
	b.calls = append(b.calls, ids)
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.fail != nil {
		return nil, b.fail
	}
	errs := make([]error, len(loads))
	for i, l := range loads {
		errs[i] = b.refuse[l.TabletId]
	}
	return errs, nil
}

func (b *blockingSender) callSizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n []int
	for _, c := range b.calls {
		n = append(n, len(c))
	}
	return n
}

func queued(lr *loadReporter) int {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return len(lr.queue)
}

// callsN is nil once b was called n times.
func callsN(b *blockingSender, n int) error {
	if got := len(b.callSizes()); got != n {
		return fmt.Errorf("%d calls", got)
	}
	return nil
}

// queuedN is nil once lr queues n reports.
func queuedN(lr *loadReporter, n int) error {
	if got := queued(lr); got != n {
		return fmt.Errorf("%d reports queued", got)
	}
	return nil
}

// TestLoadReporterBatches: a report finding no call in flight goes alone
// and at once; the reports made while it is in flight go together in the
// next call (at most limits.MaxTabletLoads per call), and each gets its own
// outcome.
func TestLoadReporterBatches(t *testing.T) {
	refused := apierr.FailedPrecondition("stale epoch")
	tests := []struct {
		name  string
		later int   // reports made while the first call is in flight
		want  []int // call sizes
		fail  error
	}{
		{"one", 0, []int{1}, nil},
		{"group", 99, []int{1, 99}, nil},
		{"bounded", limits.MaxTabletLoads + 5, []int{1, limits.MaxTabletLoads, 5}, nil},
		{"call fails", 20, []int{1, 20}, apierr.Unavailable("no master")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			b := &blockingSender{release: make(chan struct{}), refuse: map[string]error{"t3": refused}, fail: tc.fail}
			lr := newLoadReporter(ctx, &wg, b.send)
			results := make([]error, 1+tc.later)
			var loads sync.WaitGroup
			do := func(i int) {
				loads.Add(1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer loads.Done()
					results[i] = lr.report(ctx, &pb.TabletLoadReport{TabletId: fmt.Sprintf("t%d", i), Epoch: 1})
				}()
			}
			do(0)
			wait.For(t, 10*time.Second, "the first call", func() error { return callsN(b, 1) })
			for i := 1; i <= tc.later; i++ {
				do(i)
			}
			wait.For(t, 10*time.Second, "the later reports queued", func() error { return queuedN(lr, tc.later) })
			close(b.release)
			loads.Wait()
			wg.Wait() // the sender ends once the queue is empty
			if got := fmt.Sprint(b.callSizes()); got != fmt.Sprint(tc.want) {
				t.Fatalf("calls of sizes %s, want %v", got, tc.want)
			}
			for i, err := range results {
				want := codes.OK
				switch {
				case tc.fail != nil:
					want = apierr.CodeOf(tc.fail)
				case i == 3:
					want = codes.FailedPrecondition
				}
				if got := apierr.CodeOf(err); got != want {
					t.Errorf("load t%d: %v, want %v", i, err, want)
				}
			}
			// The reporter starts a new sender for the next report.
			b.release = make(chan struct{})
			close(b.release)
			if err := lr.report(ctx, &pb.TabletLoadReport{TabletId: "next", Epoch: 1}); tc.fail == nil && err != nil {
				t.Fatalf("report after the batch: %v", err)
			}
		})
	}
}

// TestLoadReporterCallerGivesUp: a load whose context ends stops waiting;
// the others of its batch still get their outcomes.
func TestLoadReporterCallerGivesUp(t *testing.T) {
	var wg sync.WaitGroup
	b := &blockingSender{release: make(chan struct{})}
	lr := newLoadReporter(context.Background(), &wg, b.send)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() { errc <- lr.report(ctx, &pb.TabletLoadReport{TabletId: "a"}) }()
	wait.For(t, 10*time.Second, "the call", func() error { return callsN(b, 1) })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled load: %v", err)
	}
	go func() { errc <- lr.report(context.Background(), &pb.TabletLoadReport{TabletId: "b"}) }()
	wait.For(t, 10*time.Second, "b queued", func() error { return queuedN(lr, 1) })
	close(b.release)
	if err := <-errc; err != nil {
		t.Fatalf("load b: %v", err)
	}
	wg.Wait()
}
