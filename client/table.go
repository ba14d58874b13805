package client

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
)

// Table reads and writes the rows of one table. It is safe for concurrent
// use; Tables of the same name opened from one Client share their location
// cache.
type Table struct {
	c    *Client
	name string
	lc   *locCache
}

// TableOption configures Open.
type TableOption func(*tableOptions)

type tableOptions struct {
	priority    CachePriority
	setPriority bool
}

// WithCachePriority asks the master to give the table's blocks this
// priority in the tservers' block caches (a hint held in the master's
// memory, not stored as table metadata).
func WithCachePriority(p CachePriority) TableOption {
	return func(o *tableOptions) { o.priority, o.setPriority = p, true }
}

// Open returns the table, after checking with the master that it exists
// (NotFound if not) and caching the locations of its first tablets.
func (c *Client) Open(ctx context.Context, table string, opts ...TableOption) (*Table, error) {
	prefix := errorPrefix("open table %q", table)
	if err := limits.ValidateTableName(table); err != nil {
		return nil, statusError(err, prefix)
	}
	var o tableOptions
	for _, opt := range opts {
		opt(&o)
	}
	t := &Table{c: c, name: table, lc: c.tableCache(table)}
	// A lookup proves the table exists; a tablet without a tserver yet is
	// fine here (requests wait for it).
	if _, err := t.lc.lookup(ctx, ""); err != nil && apierr.CodeOf(err) != codes.Unavailable {
		return nil, statusError(err, prefix)
	}
	if o.setPriority {
		err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
			_, err := m.SetCachePriority(ctx, &pb.SetCachePriorityRequest{Table: table, Priority: o.priority.proto()})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

// Granularity is the table's timestamp granularity, as the master said
// when the table's locations were last looked up (Open looks them up; a
// table's granularity never changes).
func (t *Table) Granularity() TimestampGranularity {
	if t.lc.millis.Load() {
		return GranularityMillis
	}
	return GranularityMicros
}

// Put writes value to (row, family:qualifier) with the client's clock as
// its timestamp (microseconds; truncated to whole milliseconds in a table
// of GranularityMillis, as the official Go client truncates every
// timestamp); it returns once the write is durable. Because the timestamp
// is the client's, Put is idempotent and retried on any retryable failure.
func (t *Table) Put(ctx context.Context, row, family, qualifier string, value []byte) error {
	m := NewMutation()
	ts := t.c.opts.now().UnixMicro()
	if t.Granularity() == GranularityMillis {
		ts -= ts % 1000
	}
	m.Set(family, qualifier, ts, value)
	return t.apply(ctx, func() string {
		return errorPrefix("table %q: put row %q column %s:%s", t.name, row, family, qualifier)
	}, row, m)
}

// Apply applies m to row atomically: readers see all of it or none, before
// and after a crash. It returns once the mutation is durable. See the
// package documentation for when a failed Apply is retried.
//
// A conditional mutation (NewCondMutation) is applied with one
// CheckAndMutateRow: its predicate and the chosen mutation are atomic
// with respect to every other write of the row. It is never coalesced
// with other writes, and, not being idempotent, never retried after it
// may have reached a tserver (as ApplyReadModifyWrite); opts
// (GetCondMutationResult) receive its outcome. opts do nothing for a
// plain mutation.
func (t *Table) Apply(ctx context.Context, row string, m *Mutation, opts ...ApplyOption) error {
	if m != nil && m.isConditional {
		return t.applyCond(ctx, row, m, opts)
	}
	return t.apply(ctx, func() string { return errorPrefix("table %q: apply to row %q", t.name, row) }, row, m)
}

// apply writes m to row. prefix makes the prefix of its errors; it is
// called only when needed, keeping the formatting off the fast path.
func (t *Table) apply(ctx context.Context, prefix func() string, row string, m *Mutation) error {
	if m == nil {
		return status.Error(codes.InvalidArgument, prefix()+": mutation is nil")
	}
	if m.isConditional {
		return status.Error(codes.InvalidArgument, prefix()+": a conditional mutation is applied only by Apply")
	}
	rm := m.proto(row)
	if err := limits.ValidateRowMutation(rm); err != nil {
		return statusError(err, prefix())
	}
	if t.c.coalesce != nil && m.idempotent() {
		// The coalesced attempt and the retries after it share one
		// retry timeout.
		var cancel context.CancelFunc
		ctx, cancel = t.c.withDeadline(ctx)
		defer cancel()
		if handled, err := t.coalescedApply(ctx, prefix, rm); handled {
			return err
		}
	}
	k := write
	if !m.idempotent() {
		k = writeOnce
	}
	return t.c.do(ctx, prefix, k, func(ctx context.Context, p *peer.Peer) error {
		loc, err := t.lc.lookup(ctx, row)
		if err != nil {
			return unsent(err)
		}
		follow(ctx, t.lc, loc)
		err = t.c.mutateRow(ctx, loc.addr, &pb.MutateRowRequest{TabletId: loc.tabletID, Epoch: loc.epoch, Row: rm}, p)
		if err != nil {
			return t.failed(loc, err)
		}
		return nil
	})
}

// maxBatchBytes bounds the rows of one MutateRows request, well under the
// gRPC message limit; a row mutation larger than it goes alone (a row
// mutation fits one message: limits.MaxRequestBytes).
const maxBatchBytes = 16 << 20

// ApplyBulk applies ms[i] to rows[i], each atomically on its row, grouping
// rows by tablet and writing to the tablets concurrently. It returns nil,
// nil when every mutation was applied; otherwise a slice of per-row errors
// (nil for rows that were applied), or a non-nil second error when the
// whole call failed (rows and ms of different lengths, an unknown table).
// Failed rows are retried under the same rules as Apply.
func (t *Table) ApplyBulk(ctx context.Context, rows []string, ms []*Mutation) ([]error, error) {
	prefix := errorPrefix("table %q: apply bulk", t.name)
	if len(rows) != len(ms) {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %d rows but %d mutations", prefix, len(rows), len(ms))
	}
	errs := make([]error, len(rows))
	failed := false
	b := &bulk{t: t, rms: make([]*pb.RowMutation, len(rows)), idem: make([]bool, len(rows)), errs: errs}
	var pending []int
	for i, row := range rows {
		rp := errorPrefix("table %q: apply to row %q", t.name, row)
		if ms[i] == nil {
			errs[i], failed = status.Error(codes.InvalidArgument, rp+": mutation is nil"), true
			continue
		}
		if ms[i].isConditional {
			return nil, status.Errorf(codes.InvalidArgument, "%s: conditional mutations cannot be applied in bulk (row %q)", prefix, row)
		}
		b.rms[i] = ms[i].proto(row)
		b.idem[i] = ms[i].idempotent()
		if err := limits.ValidateRowMutation(b.rms[i]); err != nil {
			errs[i], failed = statusError(err, rp), true
			continue
		}
		pending = append(pending, i)
	}
	bo := newBackoff(t.c.opts.minBackoff, t.c.opts.maxBackoff)
	st := streak{timeout: t.c.opts.retryTimeout}
	for attempt := 1; len(pending) > 0; attempt++ {
		n := len(pending)
		var fatal error
		pending, fatal = b.round(ctx, pending)
		if fatal != nil {
			return nil, statusError(fatal, prefix)
		}
		if len(pending) == 0 {
			break
		}
		if len(pending) < n {
			st.progress()
		}
		if st.expired(ctx) {
			for _, i := range pending {
				rp := errorPrefix("table %q: apply to row %q", t.name, rows[i])
				if b.unknown[i] {
					errs[i] = unknownOutcome(rp, apierr.Wrap(codes.Unavailable, b.last[i], "failing for over %v", st.timeout))
				} else {
					errs[i] = statusError(apierr.Wrap(codes.Unavailable, b.last[i], "failing for over %v", st.timeout), rp)
				}
			}
			break
		}
		if sleep(ctx, bo.next()) != nil {
			for _, i := range pending {
				errs[i] = deadlineError(ctx, errorPrefix("table %q: apply to row %q", t.name, rows[i]), attempt, b.last[i], b.unknown[i])
			}
			pending = nil
		}
	}
	for _, err := range errs {
		failed = failed || err != nil
	}
	if !failed {
		return nil, nil
	}
	return errs, nil
}

// bulk is the state of one ApplyBulk.
type bulk struct {
	t    *Table
	rms  []*pb.RowMutation
	idem []bool
	errs []error

	mu      sync.Mutex
	last    map[int]error // the last retryable failure of each pending row
	unknown map[int]bool  // rows an attempt may have applied (it reached a tserver, no answer says what became of it)
}

// round sends every pending row once, grouped by tablet, and returns the
// rows to retry. fatal is a failure of the whole call (unknown table).
func (b *bulk) round(ctx context.Context, pending []int) (retry []int, fatal error) {
	if b.last == nil {
		b.last, b.unknown = map[int]error{}, map[int]bool{}
	}
	groups := map[*location][]int{}
	var order []*location
	for _, i := range pending {
		loc, err := b.t.lc.lookup(ctx, string(b.rms[i].RowKey))
		if err != nil {
			if ctx.Err() == nil && classifyErr(err, false) == permanent {
				return nil, err
			}
			b.last[i] = unsent(err)
			retry = append(retry, i)
			continue
		}
		if _, ok := groups[loc]; !ok {
			order = append(order, loc)
		}
		groups[loc] = append(groups[loc], i)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, b.t.c.opts.bulkConcurrency)
	for _, loc := range order {
		for _, chunk := range chunks(b.rms, groups[loc]) {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				r := b.send(ctx, loc, chunk)
				b.mu.Lock()
				retry = append(retry, r...)
				b.mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return retry, nil
}

// chunks splits idx into runs whose row mutations stay under maxBatchBytes.
func chunks(rms []*pb.RowMutation, idx []int) [][]int {
	var out [][]int
	start, size := 0, 0
	for j, i := range idx {
		n := wirecodec.Size(rms[i])
		if j > start && size+n > maxBatchBytes {
			out = append(out, idx[start:j])
			start, size = j, 0
		}
		size += n
	}
	return append(out, idx[start:])
}

// send writes the rows idx to loc's tablet and records their outcomes;
// it returns the rows to retry.
func (b *bulk) send(ctx context.Context, loc *location, idx []int) (retry []int) {
	t := b.t
	req := &pb.MutateRowsRequest{TabletId: loc.tabletID, Epoch: loc.epoch}
	for _, i := range idx {
		req.Rows = append(req.Rows, b.rms[i])
	}
	var p peer.Peer
	resp, err := func() (*pb.MutateRowsResponse, error) {
		ts, err := t.c.tserver(loc.addr)
		if err != nil {
			return nil, err
		}
		actx, w := t.watch(ctx, loc)
		defer w.stop()
		resp, err := ts.MutateRows(actx, req, grpc.Peer(&p))
		return resp, w.err(err)
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	rowPrefix := func(i int) string {
		return errorPrefix("table %q: apply to row %q", t.name, b.rms[i].RowKey)
	}
	if err != nil {
		t.failed(loc, err)
		f := classify(ctx, err, p.Addr != nil)
		for _, i := range idx {
			b.unknown[i] = b.unknown[i] || f == ambiguous
			switch {
			case f.retry(b.idem[i]):
				b.last[i] = err
				retry = append(retry, i)
			case f == ambiguous:
				b.errs[i] = unknownOutcome(rowPrefix(i), err)
			default:
				b.errs[i] = statusError(err, rowPrefix(i))
			}
		}
		return retry
	}
	if len(resp.Statuses) != len(idx) {
		err := status.Errorf(codes.Internal, "tserver %s answered %d statuses for %d rows", loc.addr, len(resp.Statuses), len(idx))
		for _, i := range idx {
			b.errs[i] = statusError(err, rowPrefix(i))
		}
		return nil
	}
	for j, i := range idx {
		err := apierr.FromRowStatus(resp.Statuses[j])
		if err == nil {
			b.errs[i] = nil
			delete(b.last, i)
			continue
		}
		// The row reached the tserver, so only idempotent rows are retried,
		// unless it was refused for routing (its TabletError detail says
		// nothing of it was applied).
		f := classify(ctx, err, true)
		b.unknown[i] = b.unknown[i] || f == ambiguous
		if f.retry(b.idem[i]) {
			t.lc.invalidate(loc)
			b.last[i] = err
			retry = append(retry, i)
			continue
		}
		if f == ambiguous {
			b.errs[i] = unknownOutcome(rowPrefix(i), err)
			continue
		}
		b.errs[i] = statusError(err, rowPrefix(i))
	}
	return retry
}
