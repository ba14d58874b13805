package tserver

import (
	"context"
	"fmt"
	"sync"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// loadReporter sends the load reports of tablets whose loads finished
// close together in one ReportTabletLoads call, one raft command at the
// master, instead of one call and one command per tablet (10 000 of them
// limited a tserver's startup to about 100 tablets/s; docs/scale.md).
//
// It batches as a group commit does, with no timer: a report that finds
// no call in flight is sent at once, alone; reports that arrive while a
// call is in flight queue, and all of them (up to limits.MaxTabletLoads)
// go in the next call when it returns. So a lone load waits for no
// linger, and at most one call per tserver is in flight: under many loads
// a batch holds what finished during one call's round trip.
//
// Each load gets its own outcome: nil once the master committed its log
// position (only then may its tablet serve, invariant 9), else its
// per-load refusal or, when the whole call failed, the call's error.
type loadReporter struct {
	ctx  context.Context // the sender's: the server's lifetime
	wg   *sync.WaitGroup // tracks the sender goroutine
	send func(ctx context.Context, loads []*pb.TabletLoadReport) ([]error, error)

	mu      sync.Mutex
	queue   []*loadWait
	sending bool // a sender goroutine runs
}

type loadWait struct {
	load *pb.TabletLoadReport
	done chan error // buffered: the sender never blocks on it
}

func newLoadReporter(ctx context.Context, wg *sync.WaitGroup,
	send func(context.Context, []*pb.TabletLoadReport) ([]error, error)) *loadReporter {
	return &loadReporter{ctx: ctx, wg: wg, send: send}
}

// report queues load and waits for its outcome or for ctx. The caller is
// itself tracked by wg (a load goroutine), so adding the sender to it here
// cannot race with a Wait that already saw zero.
func (lr *loadReporter) report(ctx context.Context, load *pb.TabletLoadReport) error {
	w := &loadWait{load: load, done: make(chan error, 1)}
	lr.mu.Lock()
	lr.queue = append(lr.queue, w)
	start := !lr.sending
	lr.sending = true
	if start {
		lr.wg.Add(1)
	}
	lr.mu.Unlock()
	if start {
		go lr.run()
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends the queue in batches until it finds it empty.
func (lr *loadReporter) run() {
	defer lr.wg.Done()
	for {
		lr.mu.Lock()
		n := min(len(lr.queue), limits.MaxTabletLoads)
		if n == 0 {
			lr.sending = false
			lr.mu.Unlock()
			return
		}
		batch := lr.queue[:n:n]
		lr.queue = lr.queue[n:]
		lr.mu.Unlock()
		lr.flush(batch)
	}
}

func (lr *loadReporter) flush(batch []*loadWait) {
	loads := make([]*pb.TabletLoadReport, len(batch))
	for i, w := range batch {
		loads[i] = w.load
	}
	errs, err := lr.send(lr.ctx, loads)
	if err == nil && len(errs) != len(batch) {
		err = fmt.Errorf("tserver: master answered %d of %d load reports", len(errs), len(batch))
	}
	for i, w := range batch {
		if err != nil {
			w.done <- err
		} else {
			w.done <- errs[i]
		}
	}
}

// sendLoads is the reporter's call: one ReportTabletLoads, retried as
// every master call (masterconn); a load applied by an attempt that is
// retried is applied again unchanged (its position is not added twice).
func (s *Server) sendLoads(ctx context.Context, loads []*pb.TabletLoadReport) ([]error, error) {
	var resp *pb.ReportTabletLoadsResponse
	err := s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) (err error) {
		resp, err = mc.ReportTabletLoads(ctx, &pb.ReportTabletLoadsRequest{TserverUuid: s.uuid, Loads: loads})
		return err
	})
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(resp.Results))
	for i, r := range resp.Results {
		errs[i] = apierr.FromRowStatus(r.GetStatus())
	}
	return errs, nil
}
