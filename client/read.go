package client

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// Row is a row's cells ordered by family, qualifier, then newest first.
// A row that does not exist (or of which nothing matched) has no cells.
type Row struct {
	Key   string
	Cells []Cell
}

// Cell is one version of one column of a row.
type Cell struct {
	Family, Qualifier string
	// Timestamp in microseconds since the Unix epoch.
	Timestamp int64
	Value     []byte
	// Labels are set by a LabelFilter.
	Labels []string
}

// Value returns the newest value of the column, if the row has one.
func (r Row) Value(family, qualifier string) ([]byte, bool) {
	for _, c := range r.Cells {
		if c.Family == family && c.Qualifier == qualifier {
			return c.Value, true
		}
	}
	return nil, false
}

func rowFromProto(p *pb.Row) Row {
	r := Row{Key: string(p.GetKey())}
	if len(p.GetCells()) > 0 {
		r.Cells = make([]Cell, len(p.Cells))
		for i, c := range p.Cells {
			r.Cells[i] = Cell{Family: c.Family, Qualifier: string(c.Qualifier), Timestamp: c.TimestampMicros, Value: c.Value, Labels: c.Labels}
		}
	}
	return r
}

// ReadOption narrows what Get and Scan return.
type ReadOption interface{ apply(*readSettings) }

type readSettings struct {
	filter    *pb.ReadFilter
	rowFilter Filter
	rowProto  []byte // rowFilter serialized
	limit     int64
	err       error
}

type readOptionFunc func(*readSettings)

func (f readOptionFunc) apply(s *readSettings) { f(s) }

// Families returns only cells of these column families (several Families
// and Column options add up).
func Families(families ...string) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		for _, f := range families {
			if err := limits.ValidateFamilyName(f); err != nil && s.err == nil {
				s.err = err
			}
		}
		s.filter.Families = append(s.filter.Families, families...)
	})
}

// Column returns the cells of one column (with Families: the union).
func Column(family, qualifier string) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if err := limits.ValidateFamilyName(family); err != nil && s.err == nil {
			s.err = err
		}
		s.filter.Columns = append(s.filter.Columns, &pb.Column{Family: family, Qualifier: []byte(qualifier)})
	})
}

// TimeRange returns only cells with a timestamp in [start, end)
// microseconds; end 0 is unbounded.
func TimeRange(start, end int64) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		r := &pb.TimestampRange{StartMicros: start, EndMicros: end}
		if err := limits.ValidateTimestampRange(r); err != nil && s.err == nil {
			s.err = err
		}
		s.filter.TimeRange = r
	})
}

// LatestN returns at most n versions of each column, newest first.
func LatestN(n int) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if n < 1 && s.err == nil {
			s.err = apierr.InvalidArgument("LatestN(%d): want at least 1 version", n)
		}
		s.filter.MaxVersions = uint32(n)
	})
}

// LimitRows stops a Scan after n rows. Get ignores it.
func LimitRows(n int64) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if n < 1 && s.err == nil {
			s.err = apierr.InvalidArgument("LimitRows(%d): want at least 1 row", n)
		}
		s.limit = n
	})
}

func readSettingsOf(opts []ReadOption) (readSettings, error) {
	s := readSettings{filter: &pb.ReadFilter{}}
	for _, o := range opts {
		o.apply(&s)
	}
	if s.err == nil {
		s.rowProto, s.err = marshalFilter(s.rowFilter)
	}
	return s, s.err
}

// Get reads one row. A missing row is a Row with no cells and a nil error.
func (t *Table) Get(ctx context.Context, row string, opts ...ReadOption) (Row, error) {
	prefix := errorPrefix("table %q: get row %q", t.name, row)
	s, err := readSettingsOf(opts)
	if err == nil {
		err = limits.ValidateRowKey([]byte(row))
	}
	if err != nil {
		return Row{}, statusError(err, prefix)
	}
	var out Row
	chunked := false
	err = t.c.do(ctx, prefix, true, func(ctx context.Context, p *peer.Peer) error {
		loc, err := t.lc.lookup(ctx, row)
		if err != nil {
			return unsent(err)
		}
		ts, err := t.c.tserver(loc.addr)
		if err != nil {
			return err
		}
		resp, err := ts.ReadRow(ctx, &pb.ReadRowRequest{
			TabletId: loc.tabletID, Epoch: loc.epoch, RowKey: []byte(row), Filter: s.filter,
			RowFilter: s.rowProto,
		}, grpc.Peer(p))
		if err != nil {
			return t.failed(loc, err)
		}
		chunked = resp.GetChunked()
		out = rowFromProto(resp.GetRow())
		out.Key = row
		return nil
	})
	if err != nil || !chunked {
		return out, err
	}
	// The row is too large for one message: the tserver streams it in
	// chunks of cells, which Scan merges.
	out = Row{Key: row}
	err = t.Scan(ctx, row, row+"\x00", func(r Row) bool { out = r; return false }, opts...)
	return out, err
}

// failed drops loc from the cache when err will be retried, and returns err.
func (t *Table) failed(loc *location, err error) error {
	if retryable(err) {
		t.lc.invalidate(loc)
	}
	return err
}

// Scan calls fn for each row of [start, end) in row order (end "" scans to
// the end of the table) until fn returns false, the rows run out, or the
// LimitRows option's count is reached. Rows without matching cells are
// not delivered. A scan crosses tablets and rides through tablet moves and
// splits: on a retryable failure it resumes after the last row it
// delivered, so fn sees every row at most once, in strictly increasing
// key order. fn runs on the calling goroutine.
func (t *Table) Scan(ctx context.Context, start, end string, fn func(Row) bool, opts ...ReadOption) error {
	prefix := errorPrefix("table %q: scan [%q, %q)", t.name, start, end)
	s, err := readSettingsOf(opts)
	if err != nil {
		return statusError(err, prefix)
	}
	if end != "" && end <= start {
		return nil
	}
	st := streak{timeout: t.c.opts.retryTimeout}
	sc := &scan{t: t, filter: s.filter, rowFilter: s.rowProto, remaining: s.limit, end: end, cur: start, fn: fn}
	bo := newBackoff(t.c.opts.minBackoff, t.c.opts.maxBackoff)
	var last error
	for attempt := 1; ; attempt++ {
		from := sc.cur
		loc, err := t.lc.lookup(ctx, sc.cur)
		if err == nil {
			var done bool
			done, err = sc.tablet(ctx, loc)
			if err == nil {
				if done {
					return nil
				}
				bo.reset()
				st.progress()
				continue
			}
			t.failed(loc, err)
		} else {
			err = unsent(err)
		}
		if ctx.Err() != nil {
			return deadlineError(ctx, prefix, attempt, cmp.Or(last, err))
		}
		if !classify(ctx, err, true).retry(true) {
			return statusError(err, prefix)
		}
		if sc.cur != from {
			st.progress()
		}
		if st.expired(ctx) {
			return statusError(apierr.Wrap(codes.DeadlineExceeded, err, "failing for over %v", st.timeout), prefix)
		}
		last = err
		t.c.opts.log.Debug("client: retrying scan", "table", t.name, "from", sc.cur, "attempt", attempt, "err", err)
		if sleep(ctx, bo.next()) != nil {
			return deadlineError(ctx, prefix, attempt, last)
		}
	}
}

// scan is the state of one Table.Scan across tablets and retries.
type scan struct {
	t         *Table
	filter    *pb.ReadFilter
	rowFilter []byte // a serialized RowFilter, or nil
	remaining int64  // rows still wanted; 0 is unlimited
	end       string
	cur       string // the next row key that may be delivered
	delivered bool
	last      string // the last row key delivered, if delivered
	fn        func(Row) bool
}

// tablet streams the rows of [sc.cur, end) that loc holds. done reports
// that the scan is over (fn said stop, the limit was reached, or this was
// the last tablet of the range); otherwise sc.cur is the start of the next
// tablet.
func (sc *scan) tablet(ctx context.Context, loc *location) (done bool, err error) {
	segEnd := loc.end
	if sc.end != "" && (segEnd == "" || sc.end < segEnd) {
		segEnd = sc.end
	}
	ts, err := sc.t.c.tserver(loc.addr)
	if err != nil {
		return false, err
	}
	idle := sc.t.c.opts.attemptTimeout
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(idle, func() { cancel(errIdle) })
	defer timer.Stop()
	stream, err := ts.ScanRows(sctx, &pb.ScanRowsRequest{
		TabletId: loc.tabletID, Epoch: loc.epoch,
		Range:     &pb.RowRange{StartRow: []byte(sc.cur), EndRow: []byte(segEnd)},
		Limit:     sc.remaining,
		Filter:    sc.filter,
		RowFilter: sc.rowFilter,
	})
	if err != nil {
		return false, idleErr(sctx, err)
	}
	// part is a row whose chunks are still arriving: a row larger than
	// one message comes in several, each but the last flagged
	// last_row_continues. It is delivered only once whole; a stream that
	// fails in the middle of it resumes at that row.
	var part *pb.Row
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, idleErr(sctx, err)
		}
		timer.Reset(idle)
		rows := resp.Rows
		if part != nil {
			if len(rows) == 0 || !bytes.Equal(rows[0].Key, part.Key) {
				return false, apierr.Unavailable("tserver %s: scan stream broke off inside row %q", loc.addr, part.Key)
			}
			rows[0] = &pb.Row{Key: part.Key, Cells: append(part.Cells, rows[0].Cells...)}
			part = nil
		}
		if resp.LastRowContinues && len(rows) > 0 {
			part, rows = rows[len(rows)-1], rows[:len(rows)-1]
		}
		for _, pr := range rows {
			key := string(pr.Key)
			if sc.delivered && key <= sc.last || key < sc.cur || segEnd != "" && key >= segEnd {
				// Never deliver a row twice or out of order, whatever the server sends.
				continue
			}
			if len(pr.Cells) == 0 {
				continue
			}
			sc.delivered, sc.last = true, key
			sc.cur = key + "\x00"
			if !sc.fn(rowFromProto(pr)) {
				return true, nil
			}
			if sc.remaining > 0 {
				sc.remaining--
				if sc.remaining == 0 {
					return true, nil
				}
			}
		}
	}
	if part != nil {
		return false, apierr.Unavailable("tserver %s: scan stream ended inside row %q", loc.addr, part.Key)
	}
	if loc.end == "" || sc.end != "" && loc.end >= sc.end {
		return true, nil
	}
	sc.cur = loc.end
	return false, nil
}

// idleErr turns the failure of a stream the idle timer cancelled into a
// retryable DeadlineExceeded.
func idleErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errIdle) {
		return apierr.Wrap(codes.DeadlineExceeded, err, "%v", errIdle)
	}
	return err
}
