package clienttest

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet/filter"
)

type tserver struct {
	pb.UnimplementedTServerServer
	c    *Cluster
	idx  int
	addr string
}

func (s *tserver) address() string { return s.addr }

// serving locks the cluster and returns the table and tablet if this
// tserver serves tabletID at epoch and it holds row (nil: no row check).
func (s *tserver) serving(tabletID string, epoch int64, row []byte) (*table, *tablet, error) {
	s.c.mu.Lock()
	for _, t := range s.c.tables {
		for _, tb := range t.tablets {
			if tb.id != tabletID {
				continue
			}
			switch {
			case tb.owner != s.idx || tb.epoch != epoch:
				s.c.mu.Unlock()
				return nil, nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch, "tablet %s is not served here at epoch %d", tabletID, epoch)
			case tb.recovering:
				s.c.mu.Unlock()
				return nil, nil, apierr.Tablet(pb.TabletError_RECOVERING, tabletID, epoch, "tablet %s is recovering", tabletID)
			case row != nil && !tb.contains(string(row)):
				s.c.mu.Unlock()
				return nil, nil, apierr.Tablet(pb.TabletError_WRONG_TABLET, tabletID, epoch, "row %q is outside tablet %s", row, tabletID)
			}
			return t, tb, nil
		}
	}
	s.c.mu.Unlock()
	return nil, nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch, "tablet %s is not served here", tabletID)
}

func (s *tserver) MutateRow(ctx context.Context, req *pb.MutateRowRequest) (*pb.MutateRowResponse, error) {
	if err := limits.ValidateRowMutation(req.Row); err != nil {
		return nil, err
	}
	t, _, err := s.serving(req.TabletId, req.Epoch, req.Row.RowKey)
	if err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	if err := s.c.applyLocked(t, req.Row); err != nil {
		return nil, err
	}
	return &pb.MutateRowResponse{}, nil
}

func (s *tserver) MutateRows(ctx context.Context, req *pb.MutateRowsRequest) (*pb.MutateRowsResponse, error) {
	t, tb, err := s.serving(req.TabletId, req.Epoch, nil)
	if err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	resp := &pb.MutateRowsResponse{}
	for _, rm := range req.Rows {
		err := limits.ValidateRowMutation(rm)
		if err == nil && !tb.contains(string(rm.RowKey)) {
			err = apierr.FailedPrecondition("row %q is outside tablet %s", rm.RowKey, tb.id)
		}
		if err == nil {
			err = s.c.applyLocked(t, rm)
		}
		st := apierr.RowStatus(err)
		if err != nil {
			st.Message = err.Error()
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}

// checkFamilies fails if an operation of rm names a family t lacks.
func checkFamilies(t *table, rm *pb.RowMutation) error {
	fam := func(name string) error {
		for _, f := range t.schema.Families {
			if f.Name == name {
				return nil
			}
		}
		return apierr.InvalidArgument("table %q: unknown column family %q", t.schema.Name, name)
	}
	millis := t.schema.Granularity == pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS
	for i, m := range rm.Mutations {
		var err error
		switch op := m.Mutation.(type) {
		case *pb.Mutation_SetCell_:
			err = fam(op.SetCell.Family)
			if ts := op.SetCell.TimestampMicros; err == nil && millis && ts != -1 && ts%1000 != 0 {
				err = apierr.InvalidArgument("timestamp granularity mismatch: op %d of row %q has timestamp %d µs, not a multiple of 1000 (the table has millisecond granularity)",
					i, rm.RowKey, ts)
			}
		case *pb.Mutation_DeleteFromColumn_:
			err = fam(op.DeleteFromColumn.Family)
		case *pb.Mutation_DeleteFromFamily_:
			err = fam(op.DeleteFromFamily.Family)
		case *pb.Mutation_MergeToCell_:
			// The fake keeps cells of bytes only: aggregate families are
			// tested on real servers.
			err = apierr.InvalidArgument("op %d of row %q: the fake cluster has no aggregate families (family %q)", i, rm.RowKey, op.MergeToCell.Family)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) applyLocked(t *table, rm *pb.RowMutation) error {
	if err := checkFamilies(t, rm); err != nil {
		return err
	}
	row := string(rm.RowKey)
	cells := t.rows[row]
	// A table of millisecond granularity gives every server-timestamped
	// cell of one mutation the same millisecond, as the tablet does; a
	// µs table gives each its own.
	msTS := int64(-1)
	for _, m := range rm.Mutations {
		switch op := m.Mutation.(type) {
		case *pb.Mutation_SetCell_:
			sc := op.SetCell
			ts := sc.TimestampMicros
			if ts == -1 {
				ts = max(time.Now().UnixMicro(), c.lastTS+1)
				if t.schema.Granularity == pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS {
					// Whole milliseconds, not decreasing, as the tablet.
					if msTS == -1 {
						now := time.Now().UnixMicro()
						msTS = max(now-now%1000, (c.lastTS+999)/1000*1000)
					}
					ts = msTS
				}
				c.lastTS = ts
			}
			cells = slices.DeleteFunc(cells, func(x *pb.Cell) bool {
				return x.Family == sc.Family && bytes.Equal(x.Qualifier, sc.Qualifier) && x.TimestampMicros == ts
			})
			cells = append(cells, &pb.Cell{Family: sc.Family, Qualifier: sc.Qualifier, TimestampMicros: ts, Value: sc.Value})
		case *pb.Mutation_DeleteFromColumn_:
			d := op.DeleteFromColumn
			cells = slices.DeleteFunc(cells, func(x *pb.Cell) bool {
				return x.Family == d.Family && bytes.Equal(x.Qualifier, d.Qualifier) && inRange(x.TimestampMicros, d.TimeRange)
			})
		case *pb.Mutation_DeleteFromFamily_:
			cells = slices.DeleteFunc(cells, func(x *pb.Cell) bool { return x.Family == op.DeleteFromFamily.Family })
		case *pb.Mutation_DeleteFromRow_:
			cells = nil
		}
	}
	if len(cells) == 0 {
		delete(t.rows, row)
	} else {
		t.rows[row] = cells
	}
	return nil
}

func inRange(ts int64, r *pb.TimestampRange) bool {
	if r == nil {
		return true
	}
	return ts >= r.StartMicros && (r.EndMicros == 0 || ts < r.EndMicros)
}

// readLocked returns row's cells that f selects, ordered by family,
// qualifier, newest first.
func readLocked(t *table, row string, f *pb.ReadFilter) *pb.Row {
	var cells []*pb.Cell
	for _, c := range t.rows[row] {
		if selected(c, f) {
			cells = append(cells, c)
		}
	}
	sort.Slice(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if q := bytes.Compare(a.Qualifier, b.Qualifier); q != 0 {
			return q < 0
		}
		return a.TimestampMicros > b.TimestampMicros
	})
	maxv := map[string]int{}
	for _, fs := range t.schema.Families {
		maxv[fs.Name] = int(fs.MaxVersions)
	}
	var out []*pb.Cell
	n := 0
	for i, c := range cells {
		if i == 0 || c.Family != cells[i-1].Family || !bytes.Equal(c.Qualifier, cells[i-1].Qualifier) {
			n = 0
		}
		n++
		// The family's versions bound every read; the read's own bound
		// can only lower it.
		limit := maxv[c.Family]
		if n := int(f.GetMaxVersions()); n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
		if limit == 0 || n <= limit {
			out = append(out, c)
		}
	}
	return &pb.Row{Key: []byte(row), Cells: out}
}

func selected(c *pb.Cell, f *pb.ReadFilter) bool {
	if !inRange(c.TimestampMicros, f.GetTimeRange()) {
		return false
	}
	if len(f.GetFamilies()) == 0 && len(f.GetColumns()) == 0 {
		return true
	}
	if slices.Contains(f.GetFamilies(), c.Family) {
		return true
	}
	for _, col := range f.GetColumns() {
		if col.Family == c.Family && bytes.Equal(col.Qualifier, c.Qualifier) {
			return true
		}
	}
	return false
}

// checkFilter refuses what the real tserver refuses in a read filter: an
// empty or negative time range, and families the table does not have.
func checkFilter(t *table, f *pb.ReadFilter) error {
	if err := limits.ValidateTimestampRange(f.GetTimeRange()); err != nil {
		return err
	}
	families := slices.Clone(f.GetFamilies())
	for _, c := range f.GetColumns() {
		families = append(families, c.Family)
	}
	for _, name := range families {
		if !slices.ContainsFunc(t.schema.Families, func(fs *pb.FamilySpec) bool { return fs.Name == name }) {
			return apierr.InvalidArgument("table %q: unknown column family %q", t.schema.Name, name)
		}
	}
	return nil
}

func (s *tserver) ReadRow(ctx context.Context, req *pb.ReadRowRequest) (*pb.ReadRowResponse, error) {
	if err := limits.ValidateRowKey(req.RowKey); err != nil {
		return nil, err
	}
	t, _, err := s.serving(req.TabletId, req.Epoch, req.RowKey)
	if err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	if err := checkFilter(t, req.Filter); err != nil {
		return nil, err
	}
	rf, err := compileRowFilter(req.RowFilter)
	if err != nil {
		return nil, err
	}
	row, err := applyRowFilter(rf, readLocked(t, string(req.RowKey), req.Filter))
	if err != nil {
		return nil, err
	}
	return &pb.ReadRowResponse{Row: row}, nil
}

// scanBatch is the number of rows per ScanRows message, small so tests
// cross message boundaries.
const scanBatch = 3

func (s *tserver) ScanRows(req *pb.ScanRowsRequest, stream pb.TServer_ScanRowsServer) error {
	if req.Limit < 0 {
		return apierr.InvalidArgument("scan limit %d is negative", req.Limit)
	}
	t, tb, err := s.serving(req.TabletId, req.Epoch, nil)
	if err != nil {
		return err
	}
	if err := checkFilter(t, req.Filter); err != nil {
		s.c.mu.Unlock()
		return err
	}
	rf, err := compileRowFilter(req.RowFilter)
	if err != nil {
		s.c.mu.Unlock()
		return err
	}
	ranges := req.Ranges
	if len(ranges) == 0 {
		ranges = []*pb.RowRange{req.GetRange()}
	} else if req.Range != nil {
		s.c.mu.Unlock()
		return apierr.InvalidArgument("scan: both range and ranges are set")
	}
	// The ranges must be sorted and disjoint, as the real tserver demands.
	var prevEnd *string
	for i, r := range ranges {
		start, end := string(r.GetStartRow()), string(r.GetEndRow())
		if end != "" && start >= end {
			continue
		}
		if prevEnd != nil && (*prevEnd == "" || *prevEnd > start) {
			s.c.mu.Unlock()
			return apierr.InvalidArgument("scan: range %d [%q, %q) overlaps or precedes the range before it: ranges must be sorted and disjoint", i, start, end)
		}
		prevEnd = &end
	}
	in := func(k string) bool {
		for _, r := range ranges {
			start, end := string(r.GetStartRow()), string(r.GetEndRow())
			if k >= start && (end == "" || k < end) {
				return true
			}
		}
		return false
	}
	var keys []string
	for k := range t.rows {
		if tb.contains(k) && in(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if req.Reversed {
		slices.Reverse(keys)
	}
	var rows []*pb.Row
	for _, k := range keys {
		r, err := applyRowFilter(rf, readLocked(t, k, req.Filter))
		if err != nil {
			s.c.mu.Unlock()
			return err
		}
		if len(r.Cells) > 0 {
			rows = append(rows, r)
		}
		if req.Limit > 0 && int64(len(rows)) == req.Limit {
			break
		}
	}
	s.c.mu.Unlock()
	for len(rows) > 0 {
		n := min(scanBatch, len(rows))
		if err := stream.Send(&pb.ScanRowsResponse{Rows: rows[:n]}); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func (s *tserver) Checkpoint(ctx context.Context, req *pb.CheckpointRequest) (*pb.CheckpointResponse, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	n := 0
	for _, t := range s.c.tables {
		for _, tb := range t.tablets {
			if tb.owner == s.idx {
				n++
			}
		}
	}
	return &pb.CheckpointResponse{TabletsFlushed: int32(n)}, nil
}

// Compact has nothing to merge in memory; it answers as a tserver that
// compacted every tablet.
func (s *tserver) Compact(ctx context.Context, req *pb.CompactRequest) (*pb.CompactResponse, error) {
	return &pb.CompactResponse{}, nil
}

func (s *tserver) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{Uuid: s.addr, Address: s.addr}, nil
}

// compileRowFilter decodes and compiles a request's serialized RowFilter
// with the tserver's own evaluator (nil: none).
func compileRowFilter(b []byte) (*filter.Filter, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var rf btpb.RowFilter
	if err := proto.Unmarshal(b, &rf); err != nil {
		return nil, apierr.InvalidArgument("row_filter is not a serialized google.bigtable.v2.RowFilter: %v", err)
	}
	f, err := filter.Compile(&rf)
	if err != nil {
		return nil, apierr.InvalidArgument("%v", err)
	}
	return f, nil
}

// applyRowFilter evaluates f on a selected row, as the tserver does after
// the ReadFilter selection.
func applyRowFilter(f *filter.Filter, r *pb.Row) (*pb.Row, error) {
	if f == nil || len(r.Cells) == 0 {
		return r, nil
	}
	in := make([]filter.Cell, len(r.Cells))
	for i, c := range r.Cells {
		in[i] = filter.Cell{Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.TimestampMicros, Value: c.Value}
	}
	out, err := f.Apply(r.Key, in)
	if err != nil {
		return nil, apierr.InvalidArgument("%v", err)
	}
	row := &pb.Row{Key: r.Key, Cells: make([]*pb.Cell, len(out))}
	for i, c := range out {
		row.Cells[i] = &pb.Cell{Family: c.Family, Qualifier: c.Qualifier, TimestampMicros: c.Timestamp, Value: c.Value, Labels: c.Labels}
	}
	return row, nil
}

// CheckAndMutateRow evaluates the predicate on the row under the
// cluster's lock, as the tserver does under the row's lock, and applies
// the chosen list. Both lists are validated first.
func (s *tserver) CheckAndMutateRow(ctx context.Context, req *pb.CheckAndMutateRowRequest) (*pb.CheckAndMutateRowResponse, error) {
	if err := limits.ValidateRowKey(req.RowKey); err != nil {
		return nil, err
	}
	if len(req.TrueMutations)+len(req.FalseMutations) == 0 {
		return nil, apierr.InvalidArgument("check-and-mutate of row %q has neither true_mutations nor false_mutations", req.RowKey)
	}
	if n := len(req.TrueMutations) + len(req.FalseMutations); n > 100000 {
		return nil, apierr.InvalidArgument("check-and-mutate of row %q has %d mutations, more than the limit of 100000", req.RowKey, n)
	}
	lists := []*pb.RowMutation{{RowKey: req.RowKey, Mutations: req.TrueMutations}, {RowKey: req.RowKey, Mutations: req.FalseMutations}}
	for _, rm := range lists {
		if len(rm.Mutations) == 0 {
			continue
		}
		if err := limits.ValidateRowMutation(rm); err != nil {
			return nil, err
		}
	}
	pred, err := compileRowFilter(req.PredicateFilter)
	if err != nil {
		return nil, err
	}
	t, _, err := s.serving(req.TabletId, req.Epoch, req.RowKey)
	if err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	for _, rm := range lists {
		if err := checkFamilies(t, rm); err != nil {
			return nil, err
		}
	}
	row, err := applyRowFilter(pred, readLocked(t, string(req.RowKey), nil))
	if err != nil {
		return nil, err
	}
	matched := len(row.Cells) > 0
	chosen := lists[1]
	if matched {
		chosen = lists[0]
	}
	if len(chosen.Mutations) > 0 {
		if err := s.c.applyLocked(t, chosen); err != nil {
			return nil, err
		}
	}
	return &pb.CheckAndMutateRowResponse{PredicateMatched: matched}, nil
}

// SampleRowKeys samples the tablet's rows by the size of their cells (key,
// qualifier, family, value and 16 bytes each), at the first row at or past
// every sample_bytes (default 16 MiB), then the tablet's end row.
func (s *tserver) SampleRowKeys(ctx context.Context, req *pb.SampleRowKeysRequest) (*pb.SampleRowKeysResponse, error) {
	every := req.SampleBytes
	switch {
	case every == 0:
		every = 16 << 20
	case every < 16<<10:
		return nil, apierr.InvalidArgument("sample_bytes is %d, want 0 or at least 16 KiB", every)
	}
	t, tb, err := s.serving(req.TabletId, req.Epoch, nil)
	if err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	var keys []string
	for k := range t.rows {
		if tb.contains(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	resp := &pb.SampleRowKeysResponse{}
	var total int64
	next := every
	for _, k := range keys {
		if total >= next {
			resp.Samples = append(resp.Samples, &pb.RowKeySample{RowKey: []byte(k), OffsetBytes: total})
			next = total + every
		}
		for _, c := range t.rows[k] {
			total += int64(len(k)+len(c.Family)+len(c.Qualifier)+len(c.Value)) + 16
		}
	}
	resp.Samples = append(resp.Samples, &pb.RowKeySample{RowKey: []byte(tb.end), OffsetBytes: total})
	return resp, nil
}

// Ping does nothing, as the real tserver's.
func (s *tserver) Ping(context.Context, *pb.PingRequest) (*pb.PingResponse, error) {
	return &pb.PingResponse{}, nil
}
