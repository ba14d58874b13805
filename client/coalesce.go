package client

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
)

// Write coalescing (see the package documentation, "Write coalescing").
//
// Each tablet location has a queue. A write to a location with no request
// in flight is sent at once, alone, as a MutateRow on the caller's
// goroutine. A write that arrives while a request to its location is in
// flight waits in the queue; when the request in flight ends, everything
// queued (up to coalesceMaxRows rows and maxBatchBytes bytes) goes in one
// MutateRows, sent by a goroutine of the queue. This is the WAL's group
// commit moved to the client: no timer, a lone writer never waits, and
// under load a batch holds the writes that arrived during one round trip.
//
// Only idempotent mutations are coalesced: after any failure of the
// coalesced attempt other than a permanent one, the write is sent again on
// its own through the ordinary retry loop, which is correct only for a
// mutation that may be applied twice. (A per-row status of MutateRows
// carries a code but no TabletError detail, so it cannot tell a routing
// error, known not to be logged, from a lost lease after logging.)

// coalesceMaxRows bounds the rows of one coalesced MutateRows.
const coalesceMaxRows = 256

// coalesceInflight is how many requests to one tablet location a queue
// keeps in flight at once.
const coalesceInflight = 1

// coalescer holds the write queues of a Client, one per tablet location.
type coalescer struct {
	c *Client

	mu     sync.Mutex
	queues map[*location]*writeQueue
}

// writeQueue is the queue of one tablet location. Guarded by coalescer.mu.
type writeQueue struct {
	loc      *location
	inflight int
	pending  []*queuedWrite
}

// queuedWrite is one caller's write.
type queuedWrite struct {
	ctx  context.Context // the caller's: a write abandoned before it is sent is dropped
	rm   *pb.RowMutation
	size int
	done chan writeOutcome // buffered: the sender never blocks
}

// writeOutcome is the result of a write's coalesced attempt.
type writeOutcome struct {
	err error
	// sent reports that the request reached a transport stream (see classify).
	sent bool
	// rowStatus reports that err is a per-row status of MutateRows, which
	// carries no TabletError detail.
	rowStatus bool
}

func newCoalescer(c *Client) *coalescer {
	return &coalescer{c: c, queues: map[*location]*writeQueue{}}
}

// write sends rm to loc's tablet, alone or together with concurrent writes
// to the same tablet, and returns the outcome of that one attempt. ctx is
// the caller's; if it ends first, write returns its error (the write may
// still be sent and applied).
func (co *coalescer) write(ctx context.Context, loc *location, rm *pb.RowMutation) writeOutcome {
	co.mu.Lock()
	q := co.queues[loc]
	if q == nil {
		q = &writeQueue{loc: loc}
		co.queues[loc] = q
	}
	if q.inflight < coalesceInflight && len(q.pending) == 0 {
		// Nothing waits: send at once, on this goroutine.
		q.inflight++
		co.mu.Unlock()
		out := co.sendOne(ctx, loc, rm)
		co.finish(q)
		return out
	}
	w := &queuedWrite{ctx: ctx, rm: rm, size: wirecodec.Size(rm), done: make(chan writeOutcome, 1)}
	q.pending = append(q.pending, w)
	co.mu.Unlock()
	select {
	case out := <-w.done:
		return out
	case <-ctx.Done():
		return writeOutcome{err: ctx.Err()}
	}
}

// finish ends one request of q: it sends what queued up meanwhile, or
// drops q when it is idle.
func (co *coalescer) finish(q *writeQueue) {
	co.mu.Lock()
	batch := co.take(q)
	if len(batch) == 0 {
		q.inflight--
		if q.inflight == 0 && co.queues[q.loc] == q {
			delete(co.queues, q.loc)
		}
		co.mu.Unlock()
		return
	}
	co.mu.Unlock()
	go co.drain(q, batch)
}

// drain sends batch and then whatever queued up while it was in flight,
// until q is empty.
func (co *coalescer) drain(q *writeQueue, batch []*queuedWrite) {
	for len(batch) > 0 {
		co.sendBatch(q.loc, batch)
		co.mu.Lock()
		batch = co.take(q)
		if len(batch) == 0 {
			q.inflight--
			if q.inflight == 0 && len(q.pending) == 0 && co.queues[q.loc] == q {
				delete(co.queues, q.loc)
			}
		}
		co.mu.Unlock()
	}
}

// take removes the next batch from q's pending writes, skipping writes
// whose caller gave up. Caller holds mu.
func (co *coalescer) take(q *writeQueue) []*queuedWrite {
	var batch []*queuedWrite
	n, size := 0, 0
	for n < len(q.pending) {
		w := q.pending[n]
		if w.ctx.Err() != nil {
			n++
			continue
		}
		if len(batch) > 0 && (len(batch) == coalesceMaxRows || size+w.size > maxBatchBytes) {
			break
		}
		batch = append(batch, w)
		size += w.size
		n++
	}
	clear(q.pending[:n])
	q.pending = q.pending[n:]
	if len(q.pending) == 0 {
		q.pending = nil
	}
	return batch
}

// sendOne is one MutateRow attempt of a lone write, under the caller's
// context bounded by the attempt timeout.
func (co *coalescer) sendOne(ctx context.Context, loc *location, rm *pb.RowMutation) writeOutcome {
	ts, err := co.c.tserver(loc.addr)
	if err != nil {
		return writeOutcome{err: err}
	}
	actx, cancel := context.WithTimeout(ctx, co.c.opts.attemptTimeout)
	defer cancel()
	var p peer.Peer
	_, err = ts.MutateRow(actx, &pb.MutateRowRequest{TabletId: loc.tabletID, Epoch: loc.epoch, Row: rm}, grpc.Peer(&p))
	return writeOutcome{err: err, sent: p.Addr != nil}
}

// sendBatch sends batch to loc's tablet and hands each write its outcome.
// A batch of one is a MutateRow. The request is bounded by the attempt
// timeout, not by a caller's context: it carries other callers' writes.
func (co *coalescer) sendBatch(loc *location, batch []*queuedWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), co.c.opts.attemptTimeout)
	defer cancel()
	if len(batch) == 1 {
		batch[0].done <- co.sendOne(ctx, loc, batch[0].rm)
		return
	}
	req := &pb.MutateRowsRequest{TabletId: loc.tabletID, Epoch: loc.epoch, Rows: make([]*pb.RowMutation, len(batch))}
	for i, w := range batch {
		req.Rows[i] = w.rm
	}
	var p peer.Peer
	resp, err := func() (*pb.MutateRowsResponse, error) {
		ts, err := co.c.tserver(loc.addr)
		if err != nil {
			return nil, err
		}
		return ts.MutateRows(ctx, req, grpc.Peer(&p))
	}()
	if err == nil && len(resp.Statuses) != len(batch) {
		err = status.Errorf(codes.Internal, "tserver %s answered %d statuses for %d rows", loc.addr, len(resp.Statuses), len(batch))
	}
	for i, w := range batch {
		switch {
		case err != nil:
			w.done <- writeOutcome{err: err, sent: p.Addr != nil}
		case resp.Statuses[i].Code == int32(codes.OK):
			w.done <- writeOutcome{sent: true}
		default:
			w.done <- writeOutcome{err: apierr.FromRowStatus(resp.Statuses[i]), sent: true, rowStatus: true}
		}
	}
}

// coalescedApply is Table.apply for an idempotent mutation with write
// coalescing on. handled is false when the write should go through the
// ordinary path instead (its location is not known yet, or its coalesced
// attempt failed in a way that a retry may fix).
func (t *Table) coalescedApply(ctx context.Context, prefix func() string, rm *pb.RowMutation) (handled bool, err error) {
	loc, err := t.lc.lookup(ctx, string(rm.RowKey))
	if err != nil {
		return false, nil
	}
	if t.c.localTServer(loc.addr) != nil {
		return false, nil // a command in this process: nothing to coalesce
	}
	out := t.c.coalesce.write(ctx, loc, rm)
	if out.err == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		return true, deadlineError(ctx, prefix(), 1, out.err, classifyErr(out.err, out.sent) == ambiguous)
	}
	f := classify(ctx, out.err, out.sent)
	if out.rowStatus && status.Code(out.err) == codes.FailedPrecondition {
		// Perhaps a row outside the tablet (a split), perhaps not: the
		// ordinary path's MutateRow answers with the detail that tells.
		f = ambiguous
	}
	if f == permanent {
		return true, statusError(out.err, prefix())
	}
	t.lc.invalidate(loc)
	t.c.opts.log.Debug("client: retrying a coalesced write alone", "table", t.name, "row", string(rm.RowKey), "err", out.err)
	if sleep(ctx, newBackoff(t.c.opts.minBackoff, t.c.opts.maxBackoff).next()) != nil {
		return true, deadlineError(ctx, prefix(), 1, out.err, classifyErr(out.err, out.sent) == ambiguous)
	}
	return false, nil
}
