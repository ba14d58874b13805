package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/internal/masterconn"
	pb "bighive/proto/bighivepb"
)

// callMaster runs fn against the leader master through the client's
// masterconn.Conn: it starts with the last known leader, gives each attempt
// the attempt timeout, follows NotLeader hints and moves to the next master
// on Unavailable, an attempt's timeout or a transport error, backing off
// after a full round, until ctx (or the retry timeout) runs out. Errors
// other than those are returned at once, as statuses prefixed by prefix.
func (c *Client) callMaster(ctx context.Context, prefix string, fn func(ctx context.Context, m pb.MasterClient) error) error {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	err := c.master.Call(ctx, fn)
	if err == nil {
		return nil
	}
	if errors.Is(err, masterconn.ErrClosed) {
		return statusError(errClosed, prefix)
	}
	var re *masterconn.Error
	if errors.As(err, &re) {
		return deadlineError(ctx, prefix, re.Attempts, re.Last, false)
	}
	return statusError(err, prefix)
}

// TableSpec describes a table to create.
type TableSpec struct {
	Name     string
	Families []FamilySpec
	// SplitKeys pre-split the table: tablets [“”, k1), [k1, k2), …, [kn, “”).
	// Any order; duplicates are an error.
	SplitKeys []string
	// Granularity of the table's timestamps, fixed at creation: the zero
	// value is GranularityMicros, what every table created before the
	// choice existed has; GranularityMillis is Cloud Bigtable's default.
	Granularity TimestampGranularity
}

// TimestampGranularity is a table's timestamp granularity
// (docs/data-model.md, "Timestamp granularity").
type TimestampGranularity int

const (
	// GranularityMicros: any timestamp of microseconds; server timestamps
	// are the tserver's clock in µs, strictly increasing per tablet. The
	// default of CreateTable, so that native tables and their users keep
	// the behaviour they always had.
	GranularityMicros TimestampGranularity = iota
	// GranularityMillis, Cloud Bigtable's default (and the Cloud Bigtable
	// API's CreateTable's): server timestamps are truncated to whole
	// milliseconds (writes within one millisecond to one cell replace one
	// version), a client timestamp that is not a multiple of 1000 µs is
	// InvalidArgument, and Put truncates its client clock to milliseconds.
	GranularityMillis
)

func (g TimestampGranularity) String() string {
	if g == GranularityMillis {
		return "millis"
	}
	return "micros"
}

func (g TimestampGranularity) proto() pb.TimestampGranularity {
	if g == GranularityMillis {
		return pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS
	}
	// Unspecified, not MICROS: the schema is then byte for byte what it
	// was before granularity existed, and means µs alike.
	return pb.TimestampGranularity_TIMESTAMP_GRANULARITY_UNSPECIFIED
}

func granularityFromProto(g pb.TimestampGranularity) TimestampGranularity {
	if g == pb.TimestampGranularity_TIMESTAMP_GRANULARITY_MILLIS {
		return GranularityMillis
	}
	return GranularityMicros
}

// FamilySpec is a column family and its garbage-collection policy.
type FamilySpec struct {
	Name string
	// MaxVersions kept per column; 0 keeps every version.
	MaxVersions int
	// MaxAge drops cells older than this; 0 keeps them forever.
	MaxAge time.Duration
	// GCPolicy, when set, is the family's whole garbage-collection policy:
	// MaxVersions and MaxAge are then ignored (and must be 0 when creating).
	// Without it the policy is the union of MaxVersions and MaxAge. Tables
	// describes a family whose policy was set by SetGCPolicy (or given here)
	// with this field.
	GCPolicy GCPolicy
	// Compression of the family's TSFile pages; CompressionDefault is
	// snappy.
	Compression Compression
	// Aggregate, when set, makes the family an aggregate family of int64s
	// (8-byte big-endian values): its cells are written with AddToCell or
	// MergeToCell, and a read returns each cell's inputs folded. It can be
	// given only at the family's creation.
	Aggregate Aggregate
}

// Aggregate is an aggregate family's aggregator.
type Aggregate int

const (
	// NoAggregate is a plain family of bytes.
	NoAggregate Aggregate = iota
	// AggregateSum sums the int64s added to a cell.
	AggregateSum
	// AggregateMin keeps the smallest.
	AggregateMin
	// AggregateMax keeps the largest.
	AggregateMax
)

func (a Aggregate) String() string {
	switch a {
	case NoAggregate:
		return "none"
	case AggregateSum:
		return "intsum"
	case AggregateMin:
		return "intmin"
	case AggregateMax:
		return "intmax"
	}
	return fmt.Sprintf("Aggregate(%d)", int(a))
}

// ParseAggregate parses an aggregator's name as cbt writes it: intsum,
// intmin, intmax (sum, min and max also).
func ParseAggregate(s string) (Aggregate, error) {
	switch strings.ToLower(s) {
	case "intsum", "sum":
		return AggregateSum, nil
	case "intmin", "min":
		return AggregateMin, nil
	case "intmax", "max":
		return AggregateMax, nil
	case "inthll", "hll":
		return NoAggregate, apierr.InvalidArgument("aggregate %q: HyperLogLog++ is not supported (no client library reads its state back); use intsum, intmin or intmax", s)
	}
	return NoAggregate, apierr.InvalidArgument("unknown aggregate %q (use intsum, intmin or intmax)", s)
}

func (a Aggregate) proto() (pb.Aggregate, bool) {
	switch a {
	case NoAggregate:
		return pb.Aggregate_AGGREGATE_UNSPECIFIED, true
	case AggregateSum:
		return pb.Aggregate_AGGREGATE_INT64_SUM, true
	case AggregateMin:
		return pb.Aggregate_AGGREGATE_INT64_MIN, true
	case AggregateMax:
		return pb.Aggregate_AGGREGATE_INT64_MAX, true
	}
	return 0, false
}

func aggregateFromProto(a pb.Aggregate) Aggregate {
	switch a {
	case pb.Aggregate_AGGREGATE_INT64_SUM:
		return AggregateSum
	case pb.Aggregate_AGGREGATE_INT64_MIN:
		return AggregateMin
	case pb.Aggregate_AGGREGATE_INT64_MAX:
		return AggregateMax
	}
	return NoAggregate
}

// CreateTable creates a table. It fails with AlreadyExists if the table
// exists, and with InvalidArgument for a bad name, family or split key,
// checked before anything is sent. An attempt whose reply was lost (a
// master leader change) may have created the table: when a retry of this
// call finds the table with exactly the requested families and tablet
// count, CreateTable returns nil, taking the table for its own (another
// caller creating the same table at the same moment would be taken so
// too).
func (c *Client) CreateTable(ctx context.Context, spec TableSpec) error {
	prefix := errorPrefix("create table %q", spec.Name)
	req, err := createTableRequest(spec)
	if err != nil {
		return statusError(err, prefix)
	}
	attempts := 0
	return c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		attempts++
		_, err := m.CreateTable(ctx, req)
		if attempts > 1 && status.Code(err) == codes.AlreadyExists && createdAsAsked(ctx, m, req) {
			return nil
		}
		return err
	})
}

// createdAsAsked reports whether the table of req exists with exactly its
// families and as many tablets as req creates.
func createdAsAsked(ctx context.Context, m pb.MasterClient, req *pb.CreateTableRequest) bool {
	resp, err := m.DescribeTable(ctx, &pb.DescribeTableRequest{Name: req.Schema.Name})
	if err != nil {
		return false
	}
	got := resp.GetTable()
	schema := proto.Clone(got.GetSchema()).(*pb.TableSchema)
	schema.Version = 0 // the master's, not part of the request
	return proto.Equal(schema, req.Schema) && int(got.GetTabletCount()) == len(req.SplitKeys)+1
}

func createTableRequest(spec TableSpec) (*pb.CreateTableRequest, error) {
	if err := limits.ValidateTableName(spec.Name); err != nil {
		return nil, err
	}
	if spec.Granularity != GranularityMicros && spec.Granularity != GranularityMillis {
		return nil, apierr.InvalidArgument("unknown timestamp granularity %d", int(spec.Granularity))
	}
	schema := &pb.TableSchema{Name: spec.Name, Granularity: spec.Granularity.proto()}
	seen := map[string]bool{}
	for _, f := range spec.Families {
		if err := limits.ValidateFamilyName(f.Name); err != nil {
			return nil, err
		}
		if seen[f.Name] {
			return nil, apierr.InvalidArgument("column family %q is declared twice", f.Name)
		}
		seen[f.Name] = true
		fs, err := familyProto(f)
		if err != nil {
			return nil, err
		}
		schema.Families = append(schema.Families, fs)
	}
	if len(spec.SplitKeys) > limits.MaxSplitKeys {
		return nil, apierr.InvalidArgument("%d split keys, over the limit of %d", len(spec.SplitKeys), limits.MaxSplitKeys)
	}
	keys := slices.Clone(spec.SplitKeys)
	sort.Strings(keys)
	req := &pb.CreateTableRequest{Schema: schema}
	for i, k := range keys {
		if err := limits.ValidateRowKey([]byte(k)); err != nil {
			return nil, apierr.Wrap(codes.InvalidArgument, err, "split key %d", i)
		}
		if i > 0 && keys[i-1] == k {
			return nil, apierr.InvalidArgument("split key %q is given twice", k)
		}
		req.SplitKeys = append(req.SplitKeys, []byte(k))
	}
	return req, nil
}

// familyProto checks a family spec and converts it.
func familyProto(f FamilySpec) (*pb.FamilySpec, error) {
	if f.MaxVersions < 0 || f.MaxAge < 0 {
		return nil, apierr.InvalidArgument("column family %q: max versions %d and max age %v must not be negative", f.Name, f.MaxVersions, f.MaxAge)
	}
	if err := limits.ValidateFamilyMaxAge(f.Name, f.MaxAge.Microseconds()); err != nil {
		return nil, err
	}
	fs := &pb.FamilySpec{Name: f.Name, MaxVersions: uint32(f.MaxVersions), MaxAgeMicros: f.MaxAge.Microseconds()}
	if f.GCPolicy != nil {
		if f.MaxVersions != 0 || f.MaxAge != 0 {
			return nil, apierr.InvalidArgument("column family %q gives both a GC policy and max versions or max age; give one", f.Name)
		}
		fs.GcRule = f.GCPolicy.proto()
	}
	c, ok := f.Compression.proto()
	if !ok {
		return nil, apierr.InvalidArgument("column family %q: unknown compression %d (use CompressionNone, CompressionSnappy or CompressionZstd)", f.Name, int(f.Compression))
	}
	fs.Compression = c
	if fs.Aggregate, ok = f.Aggregate.proto(); !ok {
		return nil, apierr.InvalidArgument("column family %q: unknown aggregate %d (use AggregateSum, AggregateMin or AggregateMax)", f.Name, int(f.Aggregate))
	}
	return fs, nil
}

// DeleteTable deletes a table and all its data. NotFound if there is none.
func (c *Client) DeleteTable(ctx context.Context, name string) error {
	prefix := errorPrefix("delete table %q", name)
	if err := limits.ValidateTableName(name); err != nil {
		return statusError(err, prefix)
	}
	err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.DeleteTable(ctx, &pb.DeleteTableRequest{Name: name})
		return err
	})
	if err == nil {
		c.mu.Lock()
		delete(c.tables, name)
		c.mu.Unlock()
	}
	return err
}

// ListTables returns the names of all tables, sorted.
func (c *Client) ListTables(ctx context.Context) ([]string, error) {
	infos, err := c.DescribeTables(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(infos))
	for i, t := range infos {
		names[i] = t.Name
	}
	return names, nil
}

// CachePriority is a table's priority in the tservers' block caches: when
// a cache must evict, Low tables' blocks go first, High tables' last. It is
// a hint, not stored as metadata.
type CachePriority int

const (
	Medium CachePriority = iota // the default
	High
	Low
)

func (p CachePriority) String() string {
	switch p {
	case High:
		return "high"
	case Low:
		return "low"
	default:
		return "medium"
	}
}

func (p CachePriority) proto() pb.CachePriority {
	switch p {
	case High:
		return pb.CachePriority_CACHE_PRIORITY_HIGH
	case Low:
		return pb.CachePriority_CACHE_PRIORITY_LOW
	default:
		return pb.CachePriority_CACHE_PRIORITY_MEDIUM
	}
}

func priorityFromProto(p pb.CachePriority) CachePriority {
	switch p {
	case pb.CachePriority_CACHE_PRIORITY_HIGH:
		return High
	case pb.CachePriority_CACHE_PRIORITY_LOW:
		return Low
	default:
		return Medium
	}
}

// TableInfo describes a table.
type TableInfo struct {
	Name          string
	Families      []FamilySpec
	TabletCount   int
	CachePriority CachePriority
	Granularity   TimestampGranularity
}

// DescribeTables returns every table, sorted by name.
func (c *Client) DescribeTables(ctx context.Context) ([]TableInfo, error) {
	var resp *pb.ListTablesResponse
	err := c.callMaster(ctx, errorPrefix("list tables"), func(ctx context.Context, m pb.MasterClient) error {
		var err error
		resp, err = m.ListTables(ctx, &pb.ListTablesRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TableInfo, 0, len(resp.Tables))
	for _, t := range resp.Tables {
		out = append(out, tableInfo(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func tableInfo(t *pb.TableInfo) TableInfo {
	info := TableInfo{
		Name:          t.GetSchema().GetName(),
		TabletCount:   int(t.TabletCount),
		CachePriority: priorityFromProto(t.CachePriority),
		Granularity:   granularityFromProto(t.GetSchema().GetGranularity()),
	}
	for _, f := range t.GetSchema().GetFamilies() {
		fs := FamilySpec{Name: f.Name, GCPolicy: policyFromProto(f.GcRule), Compression: compressionFromProto(f.Compression),
			Aggregate: aggregateFromProto(f.Aggregate)}
		if fs.GCPolicy == nil {
			fs.MaxVersions, fs.MaxAge = int(f.MaxVersions), time.Duration(f.MaxAgeMicros)*time.Microsecond
		}
		info.Families = append(info.Families, fs)
	}
	return info
}

// errNoTablet is the status of a lookup the master answered with nothing.
func errNoTablet(table, row string) error {
	return status.Errorf(codes.Unavailable, "master returned no tablet of table %q for row %q", table, row)
}
