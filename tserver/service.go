package tserver

import (
	"bytes"
	"context"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
	"bighive/storage/mutation"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/tablet/filter"
)

// The write requests' bytes and strings are left in the buffer they were
// received in (wirecodec.Alias): the tserver copies each cell into the
// WAL's frame and into the memstore's entry, so copying every value out of
// the message first was one more copy and an allocation per cell (5 % of
// its CPU under Puts). A part of a request kept past its write keeps the
// request's whole buffer alive, so nothing on the write path keeps one.
func init() {
	wirecodec.Alias(&pb.BatchCommandsRequest{})
	wirecodec.Alias(&pb.MutateRowsRequest{})
	wirecodec.Alias(&pb.MutateRowRequest{})
}

// admitWrite is a tablet's write admission (replica.Options.Throttle):
// the backlog rule's delay while the tablet has too many TSFiles
// (checkpoint.Coordinator.SlowWrite, at most 1 s), then the wait for
// buffer memory.
func (s *Server) admitWrite(tabletID string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := s.eng.coord.SlowWrite(ctx, tabletID); err != nil {
			return err
		}
		return s.waitForMemory(ctx)
	}
}

// waitForMemory holds a write back while the write buffers are over the
// hard limit (a checkpoint is flushing them), and refuses it with
// ResourceExhausted if they stay there.
func (s *Server) waitForMemory(ctx context.Context) error {
	if !s.eng.coord.Throttled() {
		return nil // the common case: no timer, no context
	}
	s.metrics.throttled.Inc()
	wctx, cancel := context.WithTimeout(ctx, memoryWait)
	defer cancel()
	err := s.eng.coord.Throttle(wctx)
	if err != nil && ctx.Err() == nil {
		return apierr.ResourceExhausted("tserver %s: write buffers stayed over their hard limit (2 × %d bytes) for %v; retry later",
			s.addr, s.opts.MemLimit, memoryWait)
	}
	return err
}

// memoryWait bounds how long a write waits for buffer memory.
const memoryWait = 10 * time.Second

func (s *Server) MutateRow(ctx context.Context, req *pb.MutateRowRequest) (*pb.MutateRowResponse, error) {
	m, err := toMutation(req.Row)
	if err != nil {
		return nil, err
	}
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	if err := r.Write(ctx, m); err != nil {
		return nil, s.tabletErr(r, err)
	}
	return &pb.MutateRowResponse{}, nil
}

func (s *Server) MutateRows(ctx context.Context, req *pb.MutateRowsRequest) (*pb.MutateRowsResponse, error) {
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	statuses := make([]*pb.RowStatus, len(req.Rows))
	ms := make([]*mutation.RowMutation, 0, len(req.Rows))
	idx := make([]int, 0, len(req.Rows))
	for i, row := range req.Rows {
		m, err := toMutation(row)
		if err != nil {
			statuses[i] = rowStatus(err)
			continue
		}
		ms, idx = append(ms, m), append(idx, i)
	}
	// One WriteBatch: one admission, one group commit, one apply pass.
	for k, err := range r.WriteBatch(ctx, ms) {
		statuses[idx[k]] = rowStatus(s.tabletErr(r, err))
	}
	return &pb.MutateRowsResponse{Statuses: statuses}, nil
}

func rowStatus(err error) *pb.RowStatus { return apierr.RowStatus(err) }

// readOptions turns a request's selection and its serialized RowFilter
// (empty: none) into tablet read options, the RowFilter compiled once for
// the request.
func readOptions(f *pb.ReadFilter, rowFilter []byte) (tablet.ReadOptions, error) {
	var o tablet.ReadOptions
	if len(rowFilter) > 0 {
		var rf btpb.RowFilter
		if err := proto.Unmarshal(rowFilter, &rf); err != nil {
			return o, apierr.InvalidArgument("row_filter is not a serialized google.bigtable.v2.RowFilter: %v", err)
		}
		cf, err := filter.Compile(&rf)
		if err != nil {
			return o, apierr.InvalidArgument("%v", err)
		}
		o.Filter = cf
	}
	if f == nil {
		return o, nil
	}
	o.Families = f.Families
	for _, c := range f.Columns {
		o.Columns = append(o.Columns, tablet.Column{Family: c.Family, Qualifier: c.Qualifier})
	}
	if tr := f.TimeRange; tr != nil {
		if tr.StartMicros < 0 || tr.EndMicros < 0 || tr.EndMicros != 0 && tr.EndMicros <= tr.StartMicros {
			return o, apierr.InvalidArgument("time range [%d, %d) is empty or negative", tr.StartMicros, tr.EndMicros)
		}
		o.TimeRange = tablet.TimeRange{Start: tr.StartMicros, End: tr.EndMicros}
	}
	o.MaxVersions = int(f.MaxVersions)
	return o, nil
}

func checkFamilies(r *rp.Replica, o *tablet.ReadOptions) error {
	sch := r.Schema()
	for _, f := range o.Families {
		if _, ok := sch.Families[f]; !ok {
			return apierr.InvalidArgument("tablet %s: unknown column family %q", r.ID(), f)
		}
	}
	for _, c := range o.Columns {
		if _, ok := sch.Families[c.Family]; !ok {
			return apierr.InvalidArgument("tablet %s: unknown column family %q", r.ID(), c.Family)
		}
	}
	return nil
}

func rowToPB(row tablet.Row) *pb.Row {
	out := &pb.Row{Key: row.Key, Cells: make([]*pb.Cell, len(row.Cells))}
	for i, c := range row.Cells {
		out.Cells[i] = cellToPB(c)
	}
	return out
}

func cellToPB(c tablet.Cell) *pb.Cell {
	return &pb.Cell{Family: c.Family, Qualifier: c.Qualifier, TimestampMicros: c.Timestamp, Value: c.Value, Labels: c.Labels}
}

// cellSize estimates a cell's bytes in a message.
func cellSize(c tablet.Cell) int {
	n := len(c.Family) + len(c.Qualifier) + len(c.Value) + 16
	for _, l := range c.Labels {
		n += len(l) + 2
	}
	return n
}

// maxReadRowBytes bounds the cells ReadRow returns in its one message; a
// larger row is answered with chunked set, and the client reads it with
// ScanRows, which sends it in chunks.
const maxReadRowBytes = 32 << 20

func (s *Server) ReadRow(ctx context.Context, req *pb.ReadRowRequest) (*pb.ReadRowResponse, error) {
	if len(req.RowKey) == 0 {
		return nil, apierr.InvalidArgument("row key is empty")
	}
	opts, err := readOptions(req.Filter, req.RowFilter)
	if err != nil {
		return nil, err
	}
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	if err := checkFamilies(r, &opts); err != nil {
		return nil, err
	}
	row, found, err := r.Get(ctx, req.RowKey, opts)
	if err != nil {
		return nil, s.tabletErr(r, err)
	}
	if !found {
		return &pb.ReadRowResponse{Row: &pb.Row{Key: req.RowKey}}, nil
	}
	size := len(row.Key)
	for _, c := range row.Cells {
		size += cellSize(c)
	}
	if size > maxReadRowBytes {
		return &pb.ReadRowResponse{Row: &pb.Row{Key: req.RowKey}, Chunked: true}, nil
	}
	return &pb.ReadRowResponse{Row: rowToPB(row)}, nil
}

// scanRanges returns the row set of a scan: ranges if given, else range.
// The ranges must be sorted by start and disjoint, and only the last may
// be unbounded; a range that is empty (start at or after a bounded end)
// is dropped. Each is clipped to the tablet by the replica.
func scanRanges(req *pb.ScanRowsRequest) ([]tablet.KeyRange, error) {
	if len(req.Ranges) == 0 {
		return []tablet.KeyRange{{Start: req.GetRange().GetStartRow(), End: req.GetRange().GetEndRow()}}, nil
	}
	if req.Range != nil {
		return nil, apierr.InvalidArgument("scan: both range and ranges are set")
	}
	out := make([]tablet.KeyRange, 0, len(req.Ranges))
	for i, pr := range req.Ranges {
		kr := tablet.KeyRange{Start: pr.StartRow, End: pr.EndRow}
		if len(kr.End) == 0 {
			kr.End = nil
		}
		if kr.End != nil && bytes.Compare(kr.Start, kr.End) >= 0 {
			continue
		}
		if len(out) > 0 {
			p := out[len(out)-1]
			if p.End == nil || bytes.Compare(p.End, kr.Start) > 0 {
				return nil, apierr.InvalidArgument("scan: range %d [%q, %q) overlaps or precedes the range before it [%q, %q): ranges must be sorted and disjoint", i, kr.Start, kr.End, p.Start, p.End)
			}
		}
		out = append(out, kr)
	}
	return out, nil
}

func (s *Server) ScanRows(req *pb.ScanRowsRequest, stream pb.TServer_ScanRowsServer) error {
	opts, err := readOptions(req.Filter, req.RowFilter)
	if err != nil {
		return err
	}
	if req.Limit < 0 {
		return apierr.InvalidArgument("scan limit %d is negative", req.Limit)
	}
	ranges, err := scanRanges(req)
	if err != nil {
		return err
	}
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return err
	}
	if err := checkFamilies(r, &opts); err != nil {
		return err
	}
	out := newScanSender(stream, req.Flat)
	// A flat scan copies each row into its message before the next row
	// is read (scanSender.row): the engine may reuse a row's memory, and
	// read a long scan's pages without filling the block cache.
	opts.Lent = req.Flat
	if req.Stats {
		out.stats = &tablet.ReadStats{}
		opts.Stats = out.stats
	}
	emitRow := out.row
	if rows, ok := pointRows(ranges); ok && !req.Reversed {
		// A row list (every range one row; sorted and distinct): one
		// multi-get, the rows in key order like the scan's, the limit
		// counting rows delivered; rows outside the tablet are dropped
		// as the scan's clipping drops them.
		rows = clipRows(r, rows)
		n := 0
		err = r.GetRows(stream.Context(), rows, opts, func(_ int, row tablet.Row) bool {
			n++
			return emitRow(row) && (req.Limit == 0 || int64(n) < req.Limit)
		})
	} else {
		err = r.ScanRanges(stream.Context(), ranges, req.Reversed, int(req.Limit), opts, emitRow)
	}
	if out.err != nil {
		return out.err
	}
	if err != nil {
		return s.tabletErr(r, err)
	}
	if err := out.flush(false); err != nil {
		return err
	}
	return out.flushStats()
}

func (s *Server) Checkpoint(ctx context.Context, _ *pb.CheckpointRequest) (*pb.CheckpointResponse, error) {
	before := s.tsfileBytes()
	res, err := s.eng.coord.Checkpoint(ctx)
	if err != nil {
		return nil, apierr.Wrap(codes.Unavailable, err, "tserver %s: checkpoint", s.addr)
	}
	// The TSFile bytes the checkpoint added (a compaction running meanwhile
	// can make this an estimate).
	return &pb.CheckpointResponse{TabletsFlushed: int32(res.Flushed), BytesFlushed: max(0, s.tsfileBytes()-before),
		TabletsCovered: res.Covered}, nil
}

// CollectOrphans runs one orphan pass of this tserver's block store now
// (checkpoint.Coordinator.CollectOrphans): it deletes the blocks no
// tablet's or backup's metadata names and no tablet here uses, once seen
// so for grace. For tests and tools; the periodic pass runs on its own.
func (s *Server) CollectOrphans(ctx context.Context, grace time.Duration) (int, error) {
	return s.eng.coord.CollectOrphans(ctx, grace)
}

func (s *Server) tsfileBytes() int64 {
	var n int64
	for _, r := range s.tablets.all() {
		for _, f := range r.Files() {
			n += f.Size
		}
	}
	return n
}

func (s *Server) Compact(ctx context.Context, req *pb.CompactRequest) (*pb.CompactResponse, error) {
	var targets []*rp.Replica
	if req.TabletId != "" {
		r, err := s.serving(req.TabletId, 0)
		if err != nil {
			return nil, err
		}
		targets = []*rp.Replica{r}
	} else {
		for _, r := range s.tablets.all() {
			if r.Serving() {
				targets = append(targets, r)
			}
		}
	}
	for _, r := range targets {
		if err := s.eng.coord.Compact(ctx, r, req.Major); err != nil {
			return nil, apierr.Wrap(codes.Unavailable, err, "tserver %s: compact tablet %s", s.addr, r.ID())
		}
	}
	return &pb.CompactResponse{}, nil
}

func (s *Server) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	pos := s.wal.Position()
	resp := &pb.StatusResponse{Uuid: s.uuid, Address: s.addr, LogPosition: &pb.LogPosition{Prefix: pos.Prefix, FileTimestamp: pos.FileTS},
		MemstoreBytes: s.eng.coord.MemoryUsage(), Counters: map[string]int64{}}
	for _, r := range s.tablets.all() {
		st := &pb.TabletStatus{TabletId: r.ID(), Table: r.Table(), Range: &pb.RowRange{StartRow: r.Start(), EndRow: r.End()}, Epoch: r.Epoch(), State: "loading"}
		if r.Serving() {
			st.State = "serving"
		}
		st.MemstoreBytes = r.MemoryUsage()
		for _, f := range r.Files() {
			st.TsfileBytes += f.Size
			st.TsfileCount++
		}
		resp.Tablets = append(resp.Tablets, st)
	}
	cs := s.eng.coord.Stats()
	resp.Counters["checkpoints"] = cs.Checkpoints
	resp.Counters["compactions"] = cs.Compactions
	resp.Counters["deleted_log_files"] = cs.DeletedLogFiles
	p50, p99, mx := s.eng.coord.LockWindows()
	resp.Counters["lock_window_p50_ns"] = int64(p50)
	resp.Counters["lock_window_p99_ns"] = int64(p99)
	resp.Counters["lock_window_max_ns"] = int64(mx)
	ws := s.wal.Stats()
	resp.Counters["wal_appends"] = int64(ws.Records)
	resp.Counters["wal_bytes"] = int64(ws.Bytes)
	resp.Counters["wal_syncs"] = int64(ws.Syncs)
	resp.Counters["wal_files_started"] = int64(ws.Files)
	bc := s.cache.Stats()
	resp.Counters["cache_hits"] = bc.Hits
	resp.Counters["cache_misses"] = bc.Misses
	resp.Counters["cache_evictions"] = bc.Evictions
	resp.Counters["cache_bytes"] = bc.Charge
	resp.Counters["cache_capacity_bytes"] = bc.Capacity
	resp.Counters["lease_valid"] = 0
	if s.leaseValid() {
		resp.Counters["lease_valid"] = 1
	}
	resp.Counters["wal_records"] = int64(ws.Records)
	resp.Counters["wal_batches"] = int64(ws.Batches)
	return resp, nil
}

// AssignTablets applies what it carries and heartbeats at once: the
// master sends an empty one as a nudge when it has something new for this
// tserver (an assignment, a move's unassignment, log split tasks), so it
// arrives in one round trip rather than at the next heartbeat.
func (s *Server) AssignTablets(ctx context.Context, req *pb.AssignTabletsRequest) (*pb.AssignTabletsResponse, error) {
	s.applyAssignments(s.ctx, req.Assign, req.Unassign)
	s.member.Nudge()
	return &pb.AssignTabletsResponse{}, nil
}

func (s *Server) SetCachePriority(ctx context.Context, req *pb.SetCachePriorityRequest) (*pb.SetCachePriorityResponse, error) {
	s.setCachePriority(req.Table, req.Priority)
	return &pb.SetCachePriorityResponse{}, nil
}
