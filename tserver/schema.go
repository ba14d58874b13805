package tserver

import (
	"bighive/storage/mutation"
	"bytes"
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/tablet/tsfile"
)

// schemas holds the newest schema (highest TableSchema.version) this
// tserver has seen of each table, from assignments, heartbeat replies and
// the master's UpdateSchema pushes. A tablet always runs the newest one:
// an assignment carrying an older schema (built before a change the
// master pushed meanwhile) loads with the newer one.
type schemas struct {
	mu sync.Mutex
	m  map[string]*pb.TableSchema
}

// learn records ts if it is newer than the known schema of its table and
// returns the newest one, and whether ts changed it.
func (c *schemas) learn(ts *pb.TableSchema) (*pb.TableSchema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*pb.TableSchema{}
	}
	old := c.m[ts.GetName()]
	if old != nil && old.Version >= ts.GetVersion() {
		return old, false
	}
	c.m[ts.GetName()] = ts
	return ts, true
}

func (c *schemas) get(table string) *pb.TableSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[table]
}

// learnSchema records a table schema and, if it is the newest, applies it
// to every tablet of the table held here.
func (s *Server) learnSchema(ts *pb.TableSchema) {
	if ts == nil {
		return
	}
	newest, changed := s.schemas.learn(ts)
	if !changed {
		return
	}
	sch := schemaOf(newest)
	for _, r := range s.tablets.all() {
		if r.Table() == newest.Name {
			r.SetSchema(sch)
		}
	}
	s.log.Info("schema updated", "table", newest.Name, "version", newest.Version, "families", len(newest.Families))
}

// refreshSchema gives r the newest known schema of its table: called once
// r is in the registry, so a push that raced with its load is not missed.
func (s *Server) refreshSchema(r *rp.Replica) {
	if ts := s.schemas.get(r.Table()); ts != nil {
		r.SetSchema(schemaOf(ts))
	}
}

// UpdateSchema applies a table's schema pushed by the master.
func (s *Server) UpdateSchema(ctx context.Context, req *pb.UpdateSchemaRequest) (*pb.UpdateSchemaResponse, error) {
	if err := limits.ValidateTableName(req.GetSchema().GetName()); err != nil {
		return nil, err
	}
	s.learnSchema(proto.Clone(req.Schema).(*pb.TableSchema))
	return &pb.UpdateSchemaResponse{}, nil
}

// schemaOf converts a table schema of the API.
func schemaOf(ts *pb.TableSchema) tablet.Schema {
	s := tablet.Schema{Families: map[string]tablet.FamilyPolicy{}, Granularity: granularityOf(ts.GetGranularity())}
	for _, f := range ts.GetFamilies() {
		p := tablet.FamilyPolicy{MaxVersions: int(f.MaxVersions), MaxAge: familyMaxAge(f.MaxAgeMicros), Compression: compressionOf(f.Compression),
			Aggregate: aggregatorOf(f.Aggregate)}
		if f.GcRule != nil {
			r := gcRuleOf(f.GcRule)
			p.Rule = &r
		}
		s.Families[f.Name] = p
	}
	return s
}

// granularityOf converts a table's timestamp granularity of the API:
// unspecified (every table created before the field existed) is µs.
func granularityOf(g pb.TimestampGranularity) tablet.Granularity {
	if g == pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS {
		return tablet.Millis
	}
	return tablet.Micros
}

// compressionOf converts a family's compression of the API: unspecified
// (and a value this server does not know) is tsfile.DefaultCompression.
func compressionOf(c pb.Compression) tsfile.Compression {
	switch c {
	case pb.Compression_COMPRESSION_NONE:
		return tsfile.CompressionNone
	case pb.Compression_COMPRESSION_SNAPPY:
		return tsfile.CompressionSnappy
	case pb.Compression_COMPRESSION_ZSTD:
		return tsfile.CompressionZstd
	}
	return tsfile.CompressionDefault
}

// aggregatorOf converts a family's aggregate of the API; unspecified (and
// a value this server does not know, which the master refuses) is a plain
// family.
func aggregatorOf(a pb.Aggregate) tablet.Aggregator {
	switch a {
	case pb.Aggregate_AGGREGATE_INT64_SUM:
		return tablet.Sum
	case pb.Aggregate_AGGREGATE_INT64_MIN:
		return tablet.Min
	case pb.Aggregate_AGGREGATE_INT64_MAX:
		return tablet.Max
	}
	return tablet.NoAggregate
}

// aggregatorToPB is the inverse of aggregatorOf.
func aggregatorToPB(a tablet.Aggregator) pb.Aggregate {
	switch a {
	case tablet.Sum:
		return pb.Aggregate_AGGREGATE_INT64_SUM
	case tablet.Min:
		return pb.Aggregate_AGGREGATE_INT64_MIN
	case tablet.Max:
		return pb.Aggregate_AGGREGATE_INT64_MAX
	}
	return pb.Aggregate_AGGREGATE_UNSPECIFIED
}

// compressionToPB is the inverse of compressionOf.
func compressionToPB(c tsfile.Compression) pb.Compression {
	switch c {
	case tsfile.CompressionNone:
		return pb.Compression_COMPRESSION_NONE
	case tsfile.CompressionSnappy:
		return pb.Compression_COMPRESSION_SNAPPY
	case tsfile.CompressionZstd:
		return pb.Compression_COMPRESSION_ZSTD
	}
	return pb.Compression_COMPRESSION_UNSPECIFIED
}

// gcRuleOf converts a GC rule of the API (validated by the master).
func gcRuleOf(r *pb.GcRule) tablet.GCRule {
	switch x := r.GetRule().(type) {
	case *pb.GcRule_MaxNumVersions:
		return tablet.GCRule{Kind: tablet.GCMaxVersions, MaxVersions: int(x.MaxNumVersions)}
	case *pb.GcRule_MaxAgeMicros:
		return tablet.GCRule{Kind: tablet.GCMaxAge, MaxAge: familyMaxAge(x.MaxAgeMicros)}
	case *pb.GcRule_Union_:
		return tablet.GCRule{Kind: tablet.GCUnion, Rules: gcRulesOf(x.Union.GetRules())}
	case *pb.GcRule_Intersection_:
		return tablet.GCRule{Kind: tablet.GCIntersection, Rules: gcRulesOf(x.Intersection.GetRules())}
	}
	return tablet.GCRule{}
}

func gcRulesOf(rs []*pb.GcRule) []tablet.GCRule {
	out := make([]tablet.GCRule, len(rs))
	for i, r := range rs {
		out[i] = gcRuleOf(r)
	}
	return out
}

// gcRuleToPB is the inverse of gcRuleOf.
func gcRuleToPB(r *tablet.GCRule) *pb.GcRule {
	switch r.Kind {
	case tablet.GCMaxVersions:
		return &pb.GcRule{Rule: &pb.GcRule_MaxNumVersions{MaxNumVersions: int32(r.MaxVersions)}}
	case tablet.GCMaxAge:
		return &pb.GcRule{Rule: &pb.GcRule_MaxAgeMicros{MaxAgeMicros: r.MaxAge.Microseconds()}}
	case tablet.GCUnion, tablet.GCIntersection:
		subs := make([]*pb.GcRule, len(r.Rules))
		for i := range r.Rules {
			subs[i] = gcRuleToPB(&r.Rules[i])
		}
		if r.Kind == tablet.GCUnion {
			return &pb.GcRule{Rule: &pb.GcRule_Union_{Union: &pb.GcRule_Union{Rules: subs}}}
		}
		return &pb.GcRule{Rule: &pb.GcRule_Intersection_{Intersection: &pb.GcRule_Intersection{Rules: subs}}}
	}
	return &pb.GcRule{}
}

// schemaToPB is r's schema as the API's: the newest known one of its
// table, else one rebuilt from the engine's.
func (s *Server) schemaToPB(r *rp.Replica) *pb.TableSchema {
	if ts := s.schemas.get(r.Table()); ts != nil {
		return ts
	}
	sch := r.Schema()
	out := &pb.TableSchema{Name: r.Table()}
	if sch.Granularity == tablet.Millis {
		out.Granularity = pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS
	}
	for name, f := range sch.Families {
		spec := &pb.FamilySpec{Name: name, MaxVersions: uint32(f.MaxVersions), MaxAgeMicros: f.MaxAge.Microseconds(), Compression: compressionToPB(f.Compression),
			Aggregate: aggregatorToPB(f.Aggregate)}
		if f.Rule != nil {
			spec.GcRule = gcRuleToPB(f.Rule)
		}
		out.Families = append(out.Families, spec)
	}
	return out
}

// familyMaxAge converts max_age_micros without overflowing time.Duration:
// the master refuses more than limits.MaxFamilyMaxAge, and a larger value
// in metadata written before that check is held at the limit.
func familyMaxAge(micros int64) time.Duration {
	return time.Duration(min(micros, limits.MaxFamilyMaxAge.Microseconds())) * time.Microsecond
}

// schemaFor is the schema a tablet loads with: the newest of the
// assignment's and the known one.
func (s *Server) schemaFor(ts *pb.TableSchema) tablet.Schema {
	if ts == nil {
		return schemaOf(nil)
	}
	s.learnSchema(ts)
	return schemaOf(s.schemas.get(ts.GetName()))
}

// dropBatch is how many row keys DropRows lists at a time.
const dropBatch = 512

// DropRows deletes every row of a tablet in a range by writing a delete-row
// tombstone for each through the write path: logged, ordered by the
// tablet's write sequence (a row written after DropRows returns has a
// higher sequence and is kept), replayed after a restart and split out of
// the log after a failover like any write.
func (s *Server) DropRows(ctx context.Context, req *pb.DropRowsRequest) (*pb.DropRowsResponse, error) {
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	start, end := req.GetRange().GetStartRow(), req.GetRange().GetEndRow()
	if len(start) == 0 || bytes.Compare(start, r.Start()) < 0 {
		start = r.Start()
	}
	if r.End() != nil && (len(end) == 0 || bytes.Compare(end, r.End()) > 0) {
		end = r.End()
	}
	if len(end) == 0 {
		end = nil
	}
	n, err := s.tombstoneRows(ctx, r, start, end, r.RowKeys,
		mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}, r.WriteBatch)
	if err != nil {
		return nil, err
	}
	return &pb.DropRowsResponse{RowsDeleted: n}, nil
}

// PurgeFamily masks the cells of a deleted family on one tablet: it
// applies the request's schema (which lacks the family: from then on
// writes to it are refused), waits for the writes validated against the
// older schema, then writes a delete-family tombstone for every row of the
// tablet holding an entry of the family, through the write path like
// DropRows. A family created again under the name afterwards starts empty,
// since each tombstone hides every older entry of its row's family, also
// after a restart, a failover or a split. Writing the tombstones twice is
// harmless.
func (s *Server) PurgeFamily(ctx context.Context, req *pb.PurgeFamilyRequest) (*pb.PurgeFamilyResponse, error) {
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	if err := limits.ValidateFamilyName(req.Family); err != nil {
		return nil, err
	}
	if req.GetSchema().GetName() != r.Table() {
		return nil, apierr.InvalidArgument("purge family %q of tablet %s: the request's schema is of table %q, the tablet's is %q",
			req.Family, r.ID(), req.GetSchema().GetName(), r.Table())
	}
	s.learnSchema(proto.Clone(req.Schema).(*pb.TableSchema))
	for _, f := range s.schemas.get(r.Table()).GetFamilies() {
		if f.Name == req.Family {
			return nil, apierr.FailedPrecondition("purge family %q of tablet %s: table %q has the family again (schema version %d)",
				req.Family, r.ID(), r.Table(), s.schemas.get(r.Table()).GetVersion())
		}
	}
	if err := r.WaitWrites(ctx); err != nil {
		return nil, apierr.Wrap(codes.DeadlineExceeded, err, "purge family %q of tablet %s: waiting for writes in flight", req.Family, r.ID())
	}
	start, end := r.Start(), r.End()
	if len(end) == 0 {
		end = nil
	}
	list := func(ctx context.Context, start, end []byte, limit int) ([][]byte, error) {
		return r.FamilyRowKeys(ctx, req.Family, start, end, limit)
	}
	n, err := s.tombstoneRows(ctx, r, start, end, list,
		mutation.Op{Kind: mutation.DeleteFamily, Family: req.Family, Timestamp: mutation.ServerTime}, r.WriteBatchInternal)
	if err != nil {
		return nil, err
	}
	s.log.Info("family purged", "tablet", r.ID(), "family", req.Family, "rows", n)
	return &pb.PurgeFamilyResponse{RowsPurged: n}, nil
}

// tombstoneRows writes the tombstone op on every row of [start, end) that
// list names, dropBatch rows at a time, each batch through write (the
// tablet's batch write path: one group commit), and returns how many rows
// it wrote. DropRows and PurgeFamily use it.
func (s *Server) tombstoneRows(ctx context.Context, r *rp.Replica, start, end []byte,
	list func(ctx context.Context, start, end []byte, limit int) ([][]byte, error),
	op mutation.Op, write func(context.Context, []*mutation.RowMutation) []error) (int64, error) {
	var n int64
	for {
		keys, err := list(ctx, start, end, dropBatch)
		if err != nil {
			return n, s.tabletErr(r, err)
		}
		ms := make([]*mutation.RowMutation, len(keys))
		for i, k := range keys {
			ms[i] = &mutation.RowMutation{Row: k, Ops: []mutation.Op{op}}
		}
		for _, err := range write(ctx, ms) {
			if err != nil {
				return n, s.tabletErr(r, err)
			}
		}
		n += int64(len(keys))
		if len(keys) < dropBatch {
			return n, nil
		}
		start = append(bytes.Clone(keys[len(keys)-1]), 0)
	}
}
