package client

import (
	"cmp"
	"context"
	"io"

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
	filter    *pb.ReadFilter // nil: every column, every version
	rowFilter Filter
	rowProto  []byte // rowFilter serialized
	limit     int64
	reversed  bool
	stats     *ReadStats
	err       error
}

// readFilter is the read's filter, made by the first option that sets a
// field of it: a read without such options (most Gets) allocates none.
func (s *readSettings) readFilter() *pb.ReadFilter {
	if s.filter == nil {
		s.filter = &pb.ReadFilter{}
	}
	return s.filter
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
		f := s.readFilter()
		f.Families = append(f.Families, families...)
	})
}

// Column returns the cells of one column (with Families: the union).
func Column(family, qualifier string) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if err := limits.ValidateFamilyName(family); err != nil && s.err == nil {
			s.err = err
		}
		f := s.readFilter()
		f.Columns = append(f.Columns, &pb.Column{Family: family, Qualifier: []byte(qualifier)})
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
		s.readFilter().TimeRange = r
	})
}

// LatestN returns at most n versions of each column, newest first.
func LatestN(n int) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if n < 1 && s.err == nil {
			s.err = apierr.InvalidArgument("LatestN(%d): want at least 1 version", n)
		}
		s.readFilter().MaxVersions = uint32(n)
	})
}

// LimitRows stops a Scan or ReadRows after n delivered rows (with
// ReverseScan: the last n rows). Get ignores it.
func LimitRows(n int64) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if n < 1 && s.err == nil {
			s.err = apierr.InvalidArgument("LimitRows(%d): want at least 1 row", n)
		}
		s.limit = n
	})
}

// ReverseScan returns the rows in descending key order; the cells of each
// row keep their usual order. The row set is still given in ascending
// terms ([a, c) with a <= c). With LimitRows it reads the last N rows of
// the set.
func ReverseScan() ReadOption {
	return readOptionFunc(func(s *readSettings) { s.reversed = true })
}

// ReadStats counts what the tservers examined for a Scan or ReadRows
// (CountSeen).
type ReadStats struct {
	// RowsSeen counts the rows that had a cell after deletes, the GC rule
	// and the read's selection (Families, Columns, time range, versions),
	// and CellsSeen those cells, before the RowFilter ran on them: rows
	// and cells it dropped count, rows deleted entirely do not.
	RowsSeen, CellsSeen int64
}

// CountSeen has a Scan or ReadRows add to s what the tservers examined
// for it (ReadStats): a Cloud Bigtable ReadRows's rows_seen_count and
// cells_seen_count. A row that a retried attempt reads again counts
// again. Get ignores it; ReadRows of one row then scans it, as a Get
// reports nothing.
func CountSeen(s *ReadStats) ReadOption {
	return readOptionFunc(func(rs *readSettings) { rs.stats = s })
}

func readSettingsOf(opts []ReadOption) (readSettings, error) {
	if len(opts) == 0 {
		// The options get a pointer through an interface, which moves
		// the settings to the heap: a read without options needs none.
		return readSettings{}, nil
	}
	s := new(readSettings)
	for _, o := range opts {
		o.apply(s)
	}
	if s.err == nil {
		s.rowProto, s.err = marshalFilter(s.rowFilter)
	}
	return *s, s.err
}

// sentFilter is f, or nil when f selects everything (as a missing filter
// does): the tserver then groups the read with others without comparing
// filters, and neither side encodes or allocates one.
func sentFilter(f *pb.ReadFilter) *pb.ReadFilter {
	if len(f.GetFamilies()) == 0 && len(f.GetColumns()) == 0 && f.GetTimeRange() == nil && f.GetMaxVersions() == 0 {
		return nil
	}
	return f
}

// Get reads one row. A missing row is a Row with no cells and a nil error.
// The row's values share the memory of the message they arrived in, which
// may carry other calls' results: a value kept long keeps that message.
func (t *Table) Get(ctx context.Context, row string, opts ...ReadOption) (Row, error) {
	prefix := func() string { return errorPrefix("table %q: get row %q", t.name, row) }
	s, err := readSettingsOf(opts)
	if err == nil {
		err = limits.ValidateRowKey([]byte(row))
	}
	if err != nil {
		return Row{}, statusError(err, prefix())
	}
	var out Row
	chunked := false
	filter := sentFilter(s.filter)
	err = t.c.do(ctx, prefix, read, func(ctx context.Context, p *peer.Peer) error {
		loc, err := t.lc.lookup(ctx, row)
		if err != nil {
			return unsent(err)
		}
		follow(ctx, t.lc, loc)
		resp, err := t.c.readRow(ctx, loc.addr, &pb.ReadRowRequest{
			TabletId: loc.tabletID, Epoch: loc.epoch, RowKey: []byte(row), Filter: filter,
			RowFilter: s.rowProto,
		}, p)
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
// LimitRows option's count is reached: ReadRows of NewRange(start, end).
// Rows without matching cells are not delivered. A scan crosses tablets
// and rides through tablet moves and splits: on a retryable failure it
// resumes after the last row it delivered, so fn sees every row at most
// once, in strictly increasing key order (decreasing with ReverseScan).
// fn runs on the calling goroutine. A row is the caller's to keep; its
// strings and values share the memory of the message it came in (up to
// about 1 MiB of rows), which stays allocated while any of them is
// referenced, so a caller keeping a little of a long scan copies it.
func (t *Table) Scan(ctx context.Context, start, end string, fn func(Row) bool, opts ...ReadOption) error {
	prefix := errorPrefix("table %q: scan [%q, %q)", t.name, start, end)
	s, err := readSettingsOf(opts)
	if err != nil {
		return statusError(err, prefix)
	}
	if end != "" && end <= start {
		return nil
	}
	return t.read(ctx, prefix, &s, []span{{start, end}}, fn)
}

// ReadRows calls fn for each row of rows that has matching cells, in key
// order (descending with ReverseScan), until fn returns false, the rows
// run out, or the LimitRows option's count is reached. A nil rows reads
// the whole table; an empty RowList or RowRangeList is InvalidArgument
// ("empty row set") and reads nothing. Each tablet gets one request with
// all of its part of the set; on a retryable failure the read resumes
// after the last row delivered, so fn sees every row at most once and in
// order, and the limit counts delivered rows. fn runs on the calling
// goroutine.
func (t *Table) ReadRows(ctx context.Context, rows RowSet, fn func(Row) bool, opts ...ReadOption) error {
	spans := []span{{}}
	var err error
	if rows != nil {
		spans, err = rows.spans()
	}
	prefix := errorPrefix("table %q: read rows %s", t.name, describeSpans(spans))
	if err != nil {
		return statusError(err, prefix)
	}
	s, err := readSettingsOf(opts)
	if err != nil {
		return statusError(err, prefix)
	}
	if len(spans) == 0 {
		return nil
	}
	if len(spans) == 1 && spans[0].end == spans[0].start+"\x00" && s.stats == nil {
		// One row: a Get, one command on the batch stream, instead of a
		// scan stream opened and closed for it (what a Bigtable client's
		// ReadRow asks of the frontend).
		r, err := t.Get(ctx, spans[0].start, opts...)
		if err == nil && len(r.Cells) > 0 {
			fn(r)
		}
		return err
	}
	return t.read(ctx, prefix, &s, spans, fn)
}

// ReadRow reads one row: Get under the official client's name.
func (t *Table) ReadRow(ctx context.Context, row string, opts ...ReadOption) (Row, error) {
	return t.Get(ctx, row, opts...)
}

// read runs a scan of spans (sorted, disjoint, not empty) across tablets
// and retries.
func (t *Table) read(ctx context.Context, prefix string, s *readSettings, spans []span, fn func(Row) bool) error {
	st := streak{timeout: t.c.opts.retryTimeout}
	sc := &scan{t: t, filter: s.filter, rowFilter: s.rowProto, remaining: s.limit, reversed: s.reversed, stats: s.stats, spans: spans, fn: fn}
	bo := newBackoff(t.c.opts.minBackoff, t.c.opts.maxBackoff)
	var last error
	for attempt := 1; ; attempt++ {
		from := sc.progress
		loc, err := sc.locate(ctx)
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
			return deadlineError(ctx, prefix, attempt, cmp.Or(last, err), false)
		}
		if !classify(ctx, err, true).retry(true) {
			return statusError(err, prefix)
		}
		if sc.progress != from {
			st.progress()
		}
		if st.expired(ctx) {
			return statusError(apierr.Wrap(codes.Unavailable, err, "failing for over %v", st.timeout), prefix)
		}
		last = err
		t.c.opts.log.Debug("client: retrying scan", "table", t.name, "rows", describeSpans(sc.spans), "attempt", attempt, "err", err)
		if sleep(ctx, bo.next()) != nil {
			return deadlineError(ctx, prefix, attempt, last, false)
		}
	}
}

// scan is the state of one read across tablets and retries.
type scan struct {
	t         *Table
	filter    *pb.ReadFilter
	rowFilter []byte // a serialized RowFilter, or nil
	remaining int64  // rows still wanted; 0 is unlimited
	reversed  bool
	stats     *ReadStats // counts what the tservers examined, or nil
	// spans are the rows not read yet, sorted and disjoint: each tablet's
	// stream, when it ends, trims them to after its last row delivered,
	// and each tablet finished trims them past it (from the front, or
	// from the back when reversed).
	spans    []span
	progress int // rows delivered and tablets finished
	fn       func(Row) bool
}

// trim drops from the spans the rows at and before (reversed: at and
// after) row, the last one delivered.
func (sc *scan) trim(row string) {
	if sc.reversed {
		sc.spans = before(sc.spans, row)
	} else {
		sc.spans = after(sc.spans, row+"\x00")
	}
}

// locate returns the tablet to read next: the one holding the first row
// of spans, or, reversed, the one holding the greatest row below their
// end.
func (sc *scan) locate(ctx context.Context) (*location, error) {
	if !sc.reversed {
		return sc.t.lc.lookup(ctx, sc.spans[0].start)
	}
	return sc.t.lc.lookupBelow(ctx, sc.spans[0].start, sc.spans[len(sc.spans)-1].end)
}

// tablet streams the rows of spans that loc holds, in one request. done
// reports that the read is over (fn said stop, the limit was reached, or
// no span is left); otherwise the spans have lost the tablet's rows.
func (sc *scan) tablet(ctx context.Context, loc *location) (done bool, err error) {
	var ranges []*pb.RowRange
	for _, s := range sc.spans {
		if s.end != "" && s.end <= loc.start || loc.end != "" && s.start >= loc.end {
			continue
		}
		if s.start < loc.start {
			s.start = loc.start
		}
		if loc.end != "" && (s.end == "" || s.end > loc.end) {
			s.end = loc.end
		}
		ranges = append(ranges, &pb.RowRange{StartRow: []byte(s.start), EndRow: []byte(s.end)})
	}
	if len(ranges) == 0 {
		// Not reached: locate returns a tablet holding rows of the set.
		// A request without ranges would read the whole tablet.
		return false, apierr.Unavailable("tablet %s [%q, %q) holds none of the rows %s", loc.tabletID, loc.start, loc.end, describeSpans(sc.spans))
	}
	sctx, heard := sc.t.watch(ctx, loc)
	defer heard.stop()
	req := &pb.ScanRowsRequest{
		TabletId: loc.tabletID, Epoch: loc.epoch,
		Limit:     sc.remaining,
		Filter:    sc.filter,
		RowFilter: sc.rowFilter,
		Reversed:  sc.reversed,
		Flat:      !sc.t.c.opts.noFlatScan,
		Stats:     sc.stats != nil,
	}
	if len(ranges) == 1 && !sc.reversed {
		req.Range = ranges[0] // what a tserver without row sets understands
	} else {
		req.Ranges = ranges
	}
	recv, err := sc.t.c.scanRows(sctx, loc.addr, req)
	if err != nil {
		return false, heard.err(err)
	}
	// The messages are received and decoded one ahead (prefetch); each
	// one, like each one taken, holds the idle timer back.
	chunks := prefetch(sctx, loc.addr, recv, heard.message)
	// part is a row whose chunks are still arriving: a row larger than
	// one message comes in several, each but the last flagged
	// last_row_continues. It is delivered only once whole; a stream that
	// fails in the middle of it resumes at that row.
	var part *Row
	ended := false // the stream's io.EOF came
	// last is the last row delivered from this stream, if delivered:
	// the spans are trimmed to the rows after (reversed: before) it when
	// the stream is done with, not at every row, which cost a string and
	// a slice per row.
	var last string
	delivered := false
	defer func() {
		if delivered {
			sc.trim(last)
		}
	}()
	for ch := range chunks {
		if ch.err == io.EOF {
			ended = true
			break
		}
		if ch.err != nil {
			return false, heard.err(ch.err)
		}
		heard.message()
		if st := ch.stats; st != nil && sc.stats != nil {
			sc.stats.RowsSeen += st.RowsSeen
			sc.stats.CellsSeen += st.CellsSeen
		}
		rows := ch.rows
		if part != nil {
			if len(rows) == 0 || rows[0].Key != part.Key {
				return false, apierr.Unavailable("tserver %s: scan stream broke off inside row %q", loc.addr, part.Key)
			}
			rows[0] = Row{Key: part.Key, Cells: append(part.Cells, rows[0].Cells...)}
			part = nil
		}
		if ch.continues && len(rows) > 0 {
			part, rows = &rows[len(rows)-1], rows[:len(rows)-1]
		}
		for _, r := range rows {
			key := r.Key
			// Never deliver a row twice, out of order or outside the set,
			// whatever the server sends: only rows of the spans after
			// (reversed: before) the last one delivered.
			if !loc.contains(key) || !inSpans(sc.spans, key) || len(r.Cells) == 0 {
				continue
			}
			if delivered && (!sc.reversed && key <= last || sc.reversed && key >= last) {
				continue
			}
			last, delivered = key, true
			sc.progress++
			if !sc.fn(r) {
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
	if !ended {
		// The prefetching goroutine stopped because sctx is done (the
		// idle timer or the caller's context), maybe before it could
		// pass the stream's error on: not the end of the tablet's rows.
		return false, heard.err(apierr.Wrap(codes.Canceled, context.Cause(sctx), "tserver %s: scan stream stopped", loc.addr))
	}
	if part != nil {
		return false, apierr.Unavailable("tserver %s: scan stream ended inside row %q", loc.addr, part.Key)
	}
	sc.progress++
	if sc.reversed {
		if loc.start == "" {
			return true, nil
		}
		sc.spans = before(sc.spans, loc.start)
	} else {
		if loc.end == "" {
			return true, nil
		}
		sc.spans = after(sc.spans, loc.end)
	}
	return len(sc.spans) == 0, nil
}
