package frontend

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"bighive/client"
	"bighive/internal/limits"
	"bighive/internal/wirecodec"
)

// maxResponseBytes is where a ReadRowsResponse is cut: after the row that
// takes its cell data to 1 MiB or more, or inside a row larger than the
// server's whole-row bound (DefaultWholeRowBytes), whose values are cut
// across CellChunks so that no response holds much more than 1 MiB of
// cell data.
const maxResponseBytes = 1 << 20

// DefaultWholeRowBytes bounds the rows that go whole in one response
// (with the rows before them while the response stays under it), unless
// the server is given another bound (Server.SetWholeRowBytes). The official Go
// client's reader refuses a response that ends inside a row, and through
// BIGTABLE_EMULATOR_HOST it dials with gRPC's default 4 MiB receive
// limit: a row under this bound, with its chunks' overhead, fits that
// limit, so the Go client reads every row it can. A larger row is
// streamed in responses of about maxResponseBytes, as the API allows
// (value_size on each chunk of a cut value but its last); clients that
// follow the CellChunk contract (Java, Node.js, Python, C++) read rows of
// any size with their default limits.
// A Go client dialed with a larger receive limit (as it dials Cloud
// Bigtable: 256 MiB) reads larger rows from a server whose bound is set
// at or above the largest row it reads.
const DefaultWholeRowBytes = 3<<20 + 512<<10

// ServerOptions are the gRPC server options the API needs beside
// Register: requests up to Bighive's request size limit (a row mutation
// of 256 MiB, so a 100 MiB value fits) and 1 MiB, where gRPC's default
// stops at 4 MiB, and wirecodec's codec.
func ServerOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{grpc.MaxRecvMsgSize(limits.MaxRequestBytes + 1<<20), grpc.NumStreamWorkers(limits.StreamWorkers)}, wirecodec.ServerOptions()...)
}

// viewNamed is a data request that may name an authorized or materialized
// view instead of a table.
type viewNamed interface {
	GetAuthorizedViewName() string
}

type matViewNamed interface {
	GetMaterializedViewName() string
}

// target returns the client table a data request names; a request naming
// a view is Unimplemented (Bighive has no views).
func (d *dataServer) target(ctx context.Context, table string, req any) (*client.Table, error) {
	if v, ok := req.(viewNamed); ok && v.GetAuthorizedViewName() != "" {
		return nil, reqErr(codes.Unimplemented, "authorized views are not served (authorized_view_name %q)", v.GetAuthorizedViewName())
	}
	if v, ok := req.(matViewNamed); ok && v.GetMaterializedViewName() != "" {
		return nil, reqErr(codes.Unimplemented, "materialized views are not served (materialized_view_name %q)", v.GetMaterializedViewName())
	}
	return d.s.table(ctx, table)
}

// ReadRows streams the rows of a row set in CellChunk form.
func (d *dataServer) ReadRows(req *btpb.ReadRowsRequest, stream btpb.Bigtable_ReadRowsServer) error {
	return d.s.apiErr(stream.Context(), tableCall("ReadRows", req.GetTableName()), d.readRows(req, stream))
}

func (d *dataServer) readRows(req *btpb.ReadRowsRequest, stream btpb.Bigtable_ReadRowsServer) error {
	start := time.Now()
	ctx := stream.Context()
	t, err := d.target(ctx, req.GetTableName(), req)
	if err != nil {
		return err
	}
	rs, err := rowSet(req.GetRows())
	if err != nil {
		return err
	}
	if req.GetRowsLimit() < 0 {
		return reqErr(codes.InvalidArgument, "rows_limit %d is negative", req.GetRowsLimit())
	}
	var opts []client.ReadOption
	if f := req.GetFilter(); f != nil {
		opts = append(opts, client.RowFilter(client.ProtoFilter(f)))
	}
	if n := req.GetRowsLimit(); n > 0 {
		opts = append(opts, client.LimitRows(n))
	}
	if req.GetReversed() {
		opts = append(opts, client.ReverseScan())
	}
	full := req.GetRequestStatsView() == btpb.ReadRowsRequest_REQUEST_STATS_FULL
	var seen client.ReadStats
	if full {
		opts = append(opts, client.CountSeen(&seen))
	}
	w := &chunkWriter{stream: stream, whole: d.s.wholeRowBytes}
	err = t.ReadRows(ctx, rs, func(r client.Row) bool {
		w.row(r)
		return w.err == nil
	}, opts...)
	if w.err != nil {
		return w.err
	}
	// The rows read before a failure go out first: a Bigtable client
	// resumes after the last row it received.
	if ferr := w.flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		return err
	}
	if full {
		// Seen: what the tservers examined, before the request's filter
		// (client.ReadStats); returned: what went out.
		return stream.Send(&btpb.ReadRowsResponse{RequestStats: &btpb.RequestStats{
			StatsView: &btpb.RequestStats_FullReadStatsView{FullReadStatsView: &btpb.FullReadStatsView{
				ReadIterationStats: &btpb.ReadIterationStats{
					RowsSeenCount: seen.RowsSeen, RowsReturnedCount: w.rows,
					CellsSeenCount: seen.CellsSeen, CellsReturnedCount: w.cells,
				},
				RequestLatencyStats: &btpb.RequestLatencyStats{FrontendServerLatency: durationpb.New(time.Since(start))},
			}},
		}})
	}
	return nil
}

// nodeNumberBytes is the length of a cut value's first chunk that the
// official Node.js client (@google-cloud/bigtable 6.5.1) may take for a
// whole value: it reads a cell's first chunk of 8 bytes as a 64-bit
// big-endian integer, a number when it is a safe one, and appends the
// continuation chunks to that number's digits, so the value it returns
// is wrong, even with decode: false. A cut value's first chunk is
// therefore never 8 bytes long (e2e/TestBigtableNodeClientLargeRows).
const nodeNumberBytes = 8

// cutAt returns where to cut v, whose first n bytes fit in the response
// (n < len(v)); first says the chunk is the value's first. The cut moves
// back, by 3 bytes at most, to the start of a UTF-8 sequence: the
// official Node.js client decodes each chunk of a value to a string on
// its own by default (UTF-8), so a character cut across chunks would
// come back as two replacement characters; and a first chunk is never
// nodeNumberBytes long. Binary values lose nothing but a few bytes of a
// response.
func cutAt(v []byte, n int, first bool) int {
	for {
		for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(v[n]); i++ {
			n--
		}
		if !first || n != nodeNumberBytes {
			return n
		}
		n--
	}
}

// chunkWriter turns rows into ReadRowsResponses: whole rows, cut after
// about maxResponseBytes of cell data, and a row over whole bytes
// streamed across responses of about maxResponseBytes. Whole rows are
// encoded straight into the wire form of a response (enc, see
// appendRowChunks), sent with wirecodec.Encoded; a row over the bound is
// built as CellChunk messages (resp) and cut by large.
type chunkWriter struct {
	stream btpb.Bigtable_ReadRowsServer
	whole  int     // the server's whole-row bound
	enc    *[]byte // the response being encoded (see reserve); nil: none
	resp   *btpb.ReadRowsResponse
	size   int // the cell data of the response being built (enc or resp)
	err    error

	rows, cells int64
}

func (w *chunkWriter) flush() error {
	if w.enc != nil {
		buf := w.enc
		w.enc, w.size = nil, 0
		// gRPC gives the buffer back to Pool once written.
		return w.stream.SendMsg(&wirecodec.Encoded{Data: mem.BufferSlice{mem.NewBuffer(buf, wirecodec.Pool)}})
	}
	if w.resp == nil {
		return nil
	}
	resp := w.resp
	w.resp, w.size = nil, 0
	return w.stream.Send(resp)
}

// commitRow ends a row's last chunk; shared by every response.
var commitRow = &btpb.ReadRowsResponse_CellChunk_CommitRow{CommitRow: true}

// rowBytes is what a row counts toward a response's cell data.
func rowBytes(r client.Row) int {
	n := len(r.Key)
	for _, c := range r.Cells {
		n += len(c.Family) + len(c.Qualifier) + len(c.Value) + 16
	}
	return n
}

// row writes one row: its first chunk names the row key, a chunk names
// the family when it changes and the qualifier of every cell, and the
// row's last chunk carries commit_row. A row that would take the
// response past the whole-row bound goes out after the rows before it,
// alone, or through large when it is over the bound itself.
func (w *chunkWriter) row(r client.Row) {
	if len(r.Cells) == 0 {
		return
	}
	w.rows++
	w.cells += int64(len(r.Cells))
	n := rowBytes(r)
	if w.size+n > w.whole {
		if w.err = w.flush(); w.err != nil {
			return
		}
		if n > w.whole {
			w.large(chunksOf(r))
			return
		}
	}
	w.reserve(encBound(r))
	*w.enc = appendRowChunks(*w.enc, r)
	w.size += n
	if w.size >= maxResponseBytes {
		w.err = w.flush()
	}
}

// reserve makes room in enc for need more bytes, from wirecodec.Pool: a
// response's first row gets a buffer of its own size (a ReadRow's whole
// response), and a second row one with room for a full response
// (maxResponseBytes and a row), so a scan's response is copied once, at
// its second row, and never grows again.
func (w *chunkWriter) reserve(need int) {
	if w.enc != nil && len(*w.enc)+need <= cap(*w.enc) {
		return
	}
	size := need
	if w.enc != nil {
		size = max(maxResponseBytes, len(*w.enc)) + need
	}
	buf := wirecodec.Pool.Get(size)
	*buf = (*buf)[:0]
	if w.enc != nil {
		*buf = append(*buf, *w.enc...)
		wirecodec.Pool.Put(w.enc)
	}
	w.enc = buf
}

// encBound bounds the bytes appendRowChunks writes for r: its rowBytes,
// and 16 more bytes for the key's tag and length, 48 more per cell (64
// in all for its tags, lengths, timestamp and commit_row) and each
// label with 16.
func encBound(r client.Row) int {
	n := rowBytes(r) + 16 + 48*len(r.Cells)
	for _, c := range r.Cells {
		for _, l := range c.Labels {
			n += len(l) + 16
		}
	}
	return n
}

// chunksOf is r as CellChunk messages, the form large cuts. The row's
// chunks and their qualifier wrappers are two allocations, not four or
// five per cell; a family's name wrapper is made once per run of its
// cells, and the commit flag is one shared value (marshalling only reads
// them).
func chunksOf(r client.Row) []*btpb.ReadRowsResponse_CellChunk {
	chunks := make([]btpb.ReadRowsResponse_CellChunk, len(r.Cells))
	quals := make([]wrapperspb.BytesValue, len(r.Cells))
	out := make([]*btpb.ReadRowsResponse_CellChunk, len(r.Cells))
	var fam *wrapperspb.StringValue
	for i, c := range r.Cells {
		quals[i].Value = []byte(c.Qualifier)
		ch := &chunks[i]
		ch.Qualifier, ch.TimestampMicros, ch.Labels, ch.Value = &quals[i], c.Timestamp, c.Labels, c.Value
		if i == 0 {
			ch.RowKey = []byte(r.Key)
		}
		if fam == nil || c.Family != fam.Value {
			fam = wrapperspb.String(c.Family)
			ch.FamilyName = fam
		}
		if i == len(r.Cells)-1 {
			ch.RowStatus = commitRow
		}
		out[i] = ch
	}
	return out
}

// CellChunk's and ReadRowsResponse's field numbers (the Bigtable API's
// bigtable.proto); a wrapper's value is its field 1.
const (
	respChunks      protowire.Number = 1
	chunkRowKey     protowire.Number = 1
	chunkFamilyName protowire.Number = 2
	chunkQualifier  protowire.Number = 3
	chunkTimestamp  protowire.Number = 4
	chunkLabels     protowire.Number = 5
	chunkValue      protowire.Number = 6
	chunkCommitRow  protowire.Number = 9
	wrapperValue    protowire.Number = 1
	tagBytes                         = protowire.BytesType
	tagVarint                        = protowire.VarintType
)

// appendRowChunks appends r's chunks to b as ReadRowsResponse.chunks
// fields, the bytes proto.Marshal writes for chunksOf(r) (in field
// order; TestAppendRowChunksMatchesProto): the row key on the first
// chunk, the family wrapper where the family changes, the qualifier
// wrapper on every chunk (an empty qualifier is an empty wrapper, which
// still says a cell starts), the timestamp when not 0, the labels, the
// value when not empty, and commit_row on the last.
func appendRowChunks(b []byte, r client.Row) []byte {
	fam := ""
	for i, c := range r.Cells {
		famChanged := i == 0 || c.Family != fam
		fam = c.Family
		n := 0
		if i == 0 && len(r.Key) > 0 {
			n += protowire.SizeTag(chunkRowKey) + protowire.SizeBytes(len(r.Key))
		}
		if famChanged {
			n += protowire.SizeTag(chunkFamilyName) + protowire.SizeBytes(wrapperSize(len(c.Family)))
		}
		n += protowire.SizeTag(chunkQualifier) + protowire.SizeBytes(wrapperSize(len(c.Qualifier)))
		if c.Timestamp != 0 {
			n += protowire.SizeTag(chunkTimestamp) + protowire.SizeVarint(uint64(c.Timestamp))
		}
		for _, l := range c.Labels {
			n += protowire.SizeTag(chunkLabels) + protowire.SizeBytes(len(l))
		}
		if len(c.Value) > 0 {
			n += protowire.SizeTag(chunkValue) + protowire.SizeBytes(len(c.Value))
		}
		last := i == len(r.Cells)-1
		if last {
			n += protowire.SizeTag(chunkCommitRow) + protowire.SizeVarint(1)
		}
		b = protowire.AppendTag(b, respChunks, tagBytes)
		b = protowire.AppendVarint(b, uint64(n))
		if i == 0 && len(r.Key) > 0 {
			b = protowire.AppendTag(b, chunkRowKey, tagBytes)
			b = protowire.AppendString(b, r.Key)
		}
		if famChanged {
			b = appendWrapper(protowire.AppendTag(b, chunkFamilyName, tagBytes), c.Family)
		}
		b = appendWrapper(protowire.AppendTag(b, chunkQualifier, tagBytes), c.Qualifier)
		if c.Timestamp != 0 {
			b = protowire.AppendTag(b, chunkTimestamp, tagVarint)
			b = protowire.AppendVarint(b, uint64(c.Timestamp))
		}
		for _, l := range c.Labels {
			b = protowire.AppendTag(b, chunkLabels, tagBytes)
			b = protowire.AppendString(b, l)
		}
		if len(c.Value) > 0 {
			b = protowire.AppendTag(b, chunkValue, tagBytes)
			b = protowire.AppendBytes(b, c.Value)
		}
		if last {
			b = protowire.AppendTag(b, chunkCommitRow, tagVarint)
			b = protowire.AppendVarint(b, 1)
		}
	}
	return b
}

// wrapperSize is the encoded size of a StringValue or BytesValue holding
// n bytes: its value field, absent when empty.
func wrapperSize(n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(wrapperValue) + protowire.SizeBytes(n)
}

// appendWrapper appends a StringValue or BytesValue holding v, with its
// length, as a message field's payload.
func appendWrapper(b []byte, v string) []byte {
	b = protowire.AppendVarint(b, uint64(wrapperSize(len(v))))
	if len(v) > 0 {
		b = protowire.AppendTag(b, wrapperValue, tagBytes)
		b = protowire.AppendString(b, v)
	}
	return b
}

// large streams a row over the whole-row bound (row: its chunks), the
// rows before it already sent, in responses of about maxResponseBytes,
// a value cut where a response fills: each chunk of a cut value but its
// last sets value_size to the value's length, the cell's key and labels
// go on its first chunk only, and commit_row on the row's last; cutAt
// says where a value is cut.
func (w *chunkWriter) large(row []*btpb.ReadRowsResponse_CellChunk) {
	w.resp, w.size = &btpb.ReadRowsResponse{}, 0
	for _, ch := range row {
		if w.size >= maxResponseBytes {
			if w.err = w.flush(); w.err != nil {
				return
			}
			w.resp = &btpb.ReadRowsResponse{}
		}
		w.size += len(ch.RowKey) + len(ch.GetFamilyName().GetValue()) + len(ch.GetQualifier().GetValue()) + 16
		v, status, full := ch.Value, ch.RowStatus, int32(len(ch.Value))
		for first := true; w.size+len(v) > maxResponseBytes; first = false {
			// Cut the value: what fits goes in this chunk, marked
			// unfinished, the rest in continuation chunks.
			piece := cutAt(v, max(maxResponseBytes-w.size, 0), first)
			ch.Value, ch.ValueSize, ch.RowStatus = v[:piece], full, nil
			w.resp.Chunks = append(w.resp.Chunks, ch)
			if w.err = w.flush(); w.err != nil {
				return
			}
			w.resp = &btpb.ReadRowsResponse{}
			ch = &btpb.ReadRowsResponse_CellChunk{}
			v = v[piece:]
		}
		ch.Value, ch.RowStatus = v, status
		w.resp.Chunks = append(w.resp.Chunks, ch)
		w.size += len(v)
	}
	// The row's end goes out now: the rows after it are encoded (enc),
	// and must follow it.
	w.err = w.flush()
}

// rowSet is the request's row set: its keys and ranges as one list of
// ranges; no keys and no ranges is the whole table.
func rowSet(p *btpb.RowSet) (client.RowSet, error) {
	if len(p.GetRowKeys()) == 0 && len(p.GetRowRanges()) == 0 {
		return client.InfiniteRange(""), nil
	}
	var out client.RowRangeList
	for _, k := range p.GetRowKeys() {
		if len(k) == 0 {
			return nil, reqErr(codes.InvalidArgument, "row set: a row key is empty")
		}
		out = append(out, client.NewClosedRange(string(k), string(k)))
	}
	for _, r := range p.GetRowRanges() {
		// An empty bound is unbounded, as in Bigtable. An open start is the
		// closed start of its successor (the key with a zero byte added).
		var start string
		switch s := r.GetStartKey().(type) {
		case *btpb.RowRange_StartKeyClosed:
			start = string(s.StartKeyClosed)
		case *btpb.RowRange_StartKeyOpen:
			if len(s.StartKeyOpen) > 0 {
				start = string(s.StartKeyOpen) + "\x00"
			}
		}
		var rr client.RowRange
		switch e := r.GetEndKey().(type) {
		case *btpb.RowRange_EndKeyClosed:
			rr = client.NewClosedRange(start, string(e.EndKeyClosed))
		case *btpb.RowRange_EndKeyOpen:
			rr = client.NewRange(start, string(e.EndKeyOpen))
		default:
			rr = client.InfiniteRange(start)
		}
		out = append(out, rr)
	}
	return out, nil
}

// mutation converts the API's mutations of one row of t. The tablets
// check a timestamp against the table's granularity; only a
// CLIENT_AUTO_GENERATED one (timestamp_origin) is truncated here to a
// millisecond table's whole milliseconds, as the API says.
func mutation(what string, t *client.Table, ms []*btpb.Mutation) (*client.Mutation, error) {
	if len(ms) == 0 {
		return nil, reqErr(codes.InvalidArgument, "no %s", what)
	}
	m := client.NewMutation()
	skipped := 0 // MergeToCells of NULL
	for i, op := range ms {
		switch x := op.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			// timestamp_micros -1 is the server's time, client.ServerTime.
			ts := x.SetCell.GetTimestampMicros()
			if op.GetTimestampOrigin() == btpb.Mutation_CLIENT_AUTO_GENERATED && ts > 0 && t.Granularity() == client.GranularityMillis {
				ts -= ts % 1000
			}
			m.Set(x.SetCell.GetFamilyName(), string(x.SetCell.GetColumnQualifier()), ts, x.SetCell.GetValue())
		case *btpb.Mutation_DeleteFromColumn_:
			dc := x.DeleteFromColumn
			if tr := dc.GetTimeRange(); tr != nil {
				m.DeleteTimestampRange(dc.GetFamilyName(), string(dc.GetColumnQualifier()), tr.GetStartTimestampMicros(), tr.GetEndTimestampMicros())
			} else {
				m.DeleteCellsInColumn(dc.GetFamilyName(), string(dc.GetColumnQualifier()))
			}
		case *btpb.Mutation_DeleteFromFamily_:
			m.DeleteCellsInFamily(x.DeleteFromFamily.GetFamilyName())
		case *btpb.Mutation_DeleteFromRow_:
			m.DeleteRow()
		case *btpb.Mutation_AddToCell_:
			a := x.AddToCell
			q, ts, err := aggregateCell(what, i, "AddToCell", a.GetFamilyName(), a.GetColumnQualifier(), a.GetTimestamp())
			if err != nil {
				return nil, err
			}
			v, err := int64Input(a.GetInput())
			if err != nil {
				return nil, reqErr(codes.InvalidArgument, "%s[%d]: AddToCell to family %q: input: %v", what, i, a.GetFamilyName(), err)
			}
			m.AddToCell(a.GetFamilyName(), q, ts, v)
		case *btpb.Mutation_MergeToCell_:
			mc := x.MergeToCell
			q, ts, err := aggregateCell(what, i, "MergeToCell", mc.GetFamilyName(), mc.GetColumnQualifier(), mc.GetTimestamp())
			if err != nil {
				return nil, err
			}
			if mc.GetInput().GetKind() == nil {
				skipped++ // merging NULL has no effect, as the API says
				continue
			}
			v, err := int64Input(mc.GetInput())
			if err != nil {
				return nil, reqErr(codes.InvalidArgument, "%s[%d]: MergeToCell to family %q: input: %v", what, i, mc.GetFamilyName(), err)
			}
			m.AddToCell(mc.GetFamilyName(), q, ts, v)
		case nil:
			return nil, reqErr(codes.InvalidArgument, "%s[%d] sets no operation", what, i)
		default:
			return nil, reqErr(codes.Unimplemented, "%s[%d]: %T is not supported", what, i, x)
		}
	}
	if skipped == len(ms) {
		// A row mutation holds at least one operation in Bighive.
		return nil, reqErr(codes.InvalidArgument, "%s: every one is a MergeToCell of a NULL input, which has no effect: nothing to write", what)
	}
	return m, nil
}

// aggregateCell checks the cell of an AddToCell or MergeToCell: the
// qualifier must be a raw_value and the timestamp a raw_timestamp_micros
// (the table's granularity is checked by the tablets), as the API says.
func aggregateCell(what string, i int, kind, family string, qual, ts *btpb.Value) (string, int64, error) {
	q, ok := qual.GetKind().(*btpb.Value_RawValue)
	if !ok {
		return "", 0, reqErr(codes.InvalidArgument, "%s[%d]: %s to family %q: the column qualifier must be a raw_value, not %T", what, i, kind, family, qual.GetKind())
	}
	t, ok := ts.GetKind().(*btpb.Value_RawTimestampMicros)
	if !ok {
		return "", 0, reqErr(codes.InvalidArgument, "%s[%d]: %s to family %q: the timestamp must be a raw_timestamp_micros, not %T", what, i, kind, family, ts.GetKind())
	}
	return string(q.RawValue), t.RawTimestampMicros, nil
}

// int64Input is an aggregate's Int64 input or state: an int_value, or a
// raw_value of its 8-byte big-endian encoding (what MergeToCell's state
// and a read's value are).
func int64Input(v *btpb.Value) (int64, error) {
	switch k := v.GetKind().(type) {
	case *btpb.Value_IntValue:
		return k.IntValue, nil
	case *btpb.Value_RawValue:
		if len(k.RawValue) != 8 {
			return 0, fmt.Errorf("a raw_value of %d bytes is not an 8-byte big-endian int64", len(k.RawValue))
		}
		return int64(binary.BigEndian.Uint64(k.RawValue)), nil
	}
	return 0, fmt.Errorf("want an int_value or an 8-byte raw_value, not %T", v.GetKind())
}

// MutateRow applies one row's mutations atomically.
func (d *dataServer) MutateRow(ctx context.Context, req *btpb.MutateRowRequest) (*btpb.MutateRowResponse, error) {
	resp, err := d.mutateRow(ctx, req)
	if err != nil {
		return nil, d.s.apiErr(ctx, rowCall("MutateRow", req.GetTableName(), req.GetRowKey()), err)
	}
	return resp, nil
}

func (d *dataServer) mutateRow(ctx context.Context, req *btpb.MutateRowRequest) (*btpb.MutateRowResponse, error) {
	t, err := d.target(ctx, req.GetTableName(), req)
	if err != nil {
		return nil, err
	}
	m, err := mutation("mutations", t, req.GetMutations())
	if err != nil {
		return nil, err
	}
	if err := t.Apply(ctx, string(req.GetRowKey()), m); err != nil {
		return nil, err
	}
	return &btpb.MutateRowResponse{}, nil
}

// MutateRows applies each entry atomically on its row and answers one
// status per entry, by index.
func (d *dataServer) MutateRows(req *btpb.MutateRowsRequest, stream btpb.Bigtable_MutateRowsServer) error {
	return d.s.apiErr(stream.Context(), tableCall("MutateRows", req.GetTableName()), d.mutateRows(req, stream))
}

func (d *dataServer) mutateRows(req *btpb.MutateRowsRequest, stream btpb.Bigtable_MutateRowsServer) error {
	ctx := stream.Context()
	t, err := d.target(ctx, req.GetTableName(), req)
	if err != nil {
		return err
	}
	entries := req.GetEntries()
	if len(entries) == 0 {
		return reqErr(codes.InvalidArgument, "no entries")
	}
	statuses := make([]error, len(entries))
	var rows []string
	var ms []*client.Mutation
	var idx []int
	for i, e := range entries {
		m, err := mutation("mutations", t, e.GetMutations())
		if err != nil {
			statuses[i] = err
			continue
		}
		rows, ms, idx = append(rows, string(e.GetRowKey())), append(ms, m), append(idx, i)
	}
	if len(rows) > 0 {
		errs, err := t.ApplyBulk(ctx, rows, ms)
		if err != nil {
			return err
		}
		for j, err := range errs {
			statuses[idx[j]] = err
		}
	}
	resp := &btpb.MutateRowsResponse{Entries: make([]*btpb.MutateRowsResponse_Entry, len(entries))}
	for i, err := range statuses {
		st := status.New(codes.OK, "")
		if err != nil {
			c := rowCall("MutateRows", req.GetTableName(), entries[i].GetRowKey())
			c.entry = i
			st = d.s.apiStatus(ctx, c, err)
		}
		resp.Entries[i] = &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: st.Proto()}
	}
	return stream.Send(resp)
}

// CheckAndMutateRow applies the true or the false mutations depending on
// whether the predicate filter yields a cell of the row.
func (d *dataServer) CheckAndMutateRow(ctx context.Context, req *btpb.CheckAndMutateRowRequest) (*btpb.CheckAndMutateRowResponse, error) {
	resp, err := d.checkAndMutateRow(ctx, req)
	if err != nil {
		return nil, d.s.apiErr(ctx, rowCall("CheckAndMutateRow", req.GetTableName(), req.GetRowKey()), err)
	}
	return resp, nil
}

func (d *dataServer) checkAndMutateRow(ctx context.Context, req *btpb.CheckAndMutateRowRequest) (*btpb.CheckAndMutateRowResponse, error) {
	t, err := d.target(ctx, req.GetTableName(), req)
	if err != nil {
		return nil, err
	}
	var mtrue, mfalse *client.Mutation
	if len(req.GetTrueMutations()) > 0 {
		if mtrue, err = mutation("true_mutations", t, req.GetTrueMutations()); err != nil {
			return nil, err
		}
	}
	if len(req.GetFalseMutations()) > 0 {
		if mfalse, err = mutation("false_mutations", t, req.GetFalseMutations()); err != nil {
			return nil, err
		}
	}
	if mtrue == nil && mfalse == nil {
		return nil, reqErr(codes.InvalidArgument, "true_mutations and false_mutations are both empty")
	}
	var matched bool
	cm := client.NewCondMutation(client.ProtoFilter(req.GetPredicateFilter()), mtrue, mfalse)
	if err := t.Apply(ctx, string(req.GetRowKey()), cm, client.GetCondMutationResult(&matched)); err != nil {
		return nil, err
	}
	return &btpb.CheckAndMutateRowResponse{PredicateMatched: matched}, nil
}

// ReadModifyWriteRow applies append and increment rules and answers the
// new cells.
func (d *dataServer) ReadModifyWriteRow(ctx context.Context, req *btpb.ReadModifyWriteRowRequest) (*btpb.ReadModifyWriteRowResponse, error) {
	resp, err := d.readModifyWriteRow(ctx, req)
	if err != nil {
		return nil, d.s.apiErr(ctx, rowCall("ReadModifyWriteRow", req.GetTableName(), req.GetRowKey()), err)
	}
	return resp, nil
}

func (d *dataServer) readModifyWriteRow(ctx context.Context, req *btpb.ReadModifyWriteRowRequest) (*btpb.ReadModifyWriteRowResponse, error) {
	t, err := d.target(ctx, req.GetTableName(), req)
	if err != nil {
		return nil, err
	}
	if len(req.GetRules()) == 0 {
		return nil, reqErr(codes.InvalidArgument, "no rules")
	}
	m := client.NewReadModifyWrite()
	for i, r := range req.GetRules() {
		switch x := r.GetRule().(type) {
		case *btpb.ReadModifyWriteRule_AppendValue:
			m.AppendValue(r.GetFamilyName(), string(r.GetColumnQualifier()), x.AppendValue)
		case *btpb.ReadModifyWriteRule_IncrementAmount:
			m.Increment(r.GetFamilyName(), string(r.GetColumnQualifier()), x.IncrementAmount)
		default:
			return nil, reqErr(codes.InvalidArgument, "rule %d sets neither append_value nor increment_amount", i)
		}
	}
	row, err := t.ApplyReadModifyWrite(ctx, string(req.GetRowKey()), m)
	if err != nil {
		return nil, err
	}
	return &btpb.ReadModifyWriteRowResponse{Row: rowProto(row)}, nil
}

// rowProto is a row as the API's nested Row (cells come ordered by
// family then qualifier).
func rowProto(r client.Row) *btpb.Row {
	out := &btpb.Row{Key: []byte(r.Key)}
	var fam *btpb.Family
	var col *btpb.Column
	for _, c := range r.Cells {
		if fam == nil || fam.Name != c.Family {
			fam = &btpb.Family{Name: c.Family}
			out.Families = append(out.Families, fam)
			col = nil
		}
		if col == nil || string(col.Qualifier) != c.Qualifier {
			col = &btpb.Column{Qualifier: []byte(c.Qualifier)}
			fam.Columns = append(fam.Columns, col)
		}
		col.Cells = append(col.Cells, &btpb.Cell{TimestampMicros: c.Timestamp, Value: c.Value, Labels: c.Labels})
	}
	return out
}

// SampleRowKeys streams row keys splitting the table into pieces of
// roughly equal size, with the table's size before each; the last key is
// empty (the end of the table).
func (d *dataServer) SampleRowKeys(req *btpb.SampleRowKeysRequest, stream btpb.Bigtable_SampleRowKeysServer) error {
	return d.s.apiErr(stream.Context(), tableCall("SampleRowKeys", req.GetTableName()), d.sampleRowKeys(req, stream))
}

func (d *dataServer) sampleRowKeys(req *btpb.SampleRowKeysRequest, stream btpb.Bigtable_SampleRowKeysServer) error {
	ctx := stream.Context()
	t, err := d.target(ctx, req.GetTableName(), req)
	if err != nil {
		return err
	}
	samples, err := t.SampleRowKeyOffsets(ctx, 0)
	if err != nil {
		return err
	}
	for _, s := range samples {
		if err := stream.Send(&btpb.SampleRowKeysResponse{RowKey: []byte(s.Key), OffsetBytes: s.OffsetBytes}); err != nil {
			return err
		}
	}
	return nil
}

// PingAndWarm checks the instance name and answers OK: a frontend has no
// connections to warm beyond its client's, which dial on first use.
func (d *dataServer) PingAndWarm(ctx context.Context, req *btpb.PingAndWarmRequest) (*btpb.PingAndWarmResponse, error) {
	if _, err := parseInstance(req.GetName()); err != nil {
		return nil, d.s.apiErr(ctx, instanceCall("PingAndWarm", req.GetName()), err)
	}
	return &btpb.PingAndWarmResponse{}, nil
}
