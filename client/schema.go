package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// A GCPolicy is a column family's garbage-collection rule, in the shapes of
// cloud.google.com/go/bigtable: MaxVersionsPolicy, MaxAgePolicy, and
// UnionPolicy and IntersectionPolicy nested to any depth. Cells the policy
// calls garbage are never read again and are dropped by compactions.
type GCPolicy interface {
	String() string
	proto() *pb.GcRule
}

// MaxVersionsGCPolicy keeps the newest versions of each column; made by
// MaxVersionsPolicy.
type MaxVersionsGCPolicy int

// MaxVersionsPolicy keeps the newest n versions of each column.
func MaxVersionsPolicy(n int) GCPolicy { return MaxVersionsGCPolicy(n) }

func (p MaxVersionsGCPolicy) String() string { return fmt.Sprintf("versions() > %d", int(p)) }
func (p MaxVersionsGCPolicy) proto() *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_MaxNumVersions{MaxNumVersions: int32(p)}}
}

// MaxAgeGCPolicy makes cells older than its age garbage; made by
// MaxAgePolicy.
type MaxAgeGCPolicy time.Duration

// MaxAgePolicy makes cells older than d (by their timestamp, relative to
// now) garbage.
func MaxAgePolicy(d time.Duration) GCPolicy { return MaxAgeGCPolicy(d) }

func (p MaxAgeGCPolicy) String() string { return fmt.Sprintf("age() > %v", time.Duration(p)) }
func (p MaxAgeGCPolicy) proto() *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_MaxAgeMicros{MaxAgeMicros: time.Duration(p).Microseconds()}}
}

// UnionGCPolicy makes a cell garbage if any of its children does; made by
// UnionPolicy.
type UnionGCPolicy struct{ Children []GCPolicy }

// UnionPolicy makes a cell garbage if any of the policies does.
func UnionPolicy(sub ...GCPolicy) GCPolicy { return UnionGCPolicy{sub} }

func (p UnionGCPolicy) String() string { return joinPolicies(p.Children, " || ") }
func (p UnionGCPolicy) proto() *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_Union_{Union: &pb.GcRule_Union{Rules: protos(p.Children)}}}
}

// IntersectionGCPolicy makes a cell garbage if all of its children do; made
// by IntersectionPolicy.
type IntersectionGCPolicy struct{ Children []GCPolicy }

// IntersectionPolicy makes a cell garbage if all of the policies do.
func IntersectionPolicy(sub ...GCPolicy) GCPolicy { return IntersectionGCPolicy{sub} }

func (p IntersectionGCPolicy) String() string { return joinPolicies(p.Children, " && ") }
func (p IntersectionGCPolicy) proto() *pb.GcRule {
	return &pb.GcRule{Rule: &pb.GcRule_Intersection_{Intersection: &pb.GcRule_Intersection{Rules: protos(p.Children)}}}
}

type noGCPolicy struct{}

// NoGcPolicy keeps every cell.
func NoGcPolicy() GCPolicy { return noGCPolicy{} }

func (noGCPolicy) String() string    { return "" }
func (noGCPolicy) proto() *pb.GcRule { return &pb.GcRule{} }

func joinPolicies(ps []GCPolicy, sep string) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = "(" + p.String() + ")"
	}
	return strings.Join(parts, sep)
}

// policyFromProto is the policy of a stored rule; nil for nil.
func policyFromProto(r *pb.GcRule) GCPolicy {
	if r == nil {
		return nil
	}
	switch r := r.Rule.(type) {
	case *pb.GcRule_MaxNumVersions:
		return MaxVersionsGCPolicy(r.MaxNumVersions)
	case *pb.GcRule_MaxAgeMicros:
		return MaxAgeGCPolicy(time.Duration(r.MaxAgeMicros) * time.Microsecond)
	case *pb.GcRule_Union_:
		return UnionGCPolicy{policiesFromProto(r.Union.GetRules())}
	case *pb.GcRule_Intersection_:
		return IntersectionGCPolicy{policiesFromProto(r.Intersection.GetRules())}
	default:
		return noGCPolicy{}
	}
}

func policiesFromProto(rs []*pb.GcRule) []GCPolicy {
	out := make([]GCPolicy, len(rs))
	for i, r := range rs {
		out[i] = policyFromProto(r)
	}
	return out
}

func protos(ps []GCPolicy) []*pb.GcRule {
	out := make([]*pb.GcRule, len(ps))
	for i, p := range ps {
		if p == nil {
			p = noGCPolicy{}
		}
		out[i] = p.proto()
	}
	return out
}

// CreateColumnFamily adds a column family (keeping every version) to a
// table. Writes to it succeed as soon as it returns: the master pushes the
// new schema to every tserver serving the table before answering.
func (c *Client) CreateColumnFamily(ctx context.Context, table, family string) error {
	prefix := errorPrefix("create column family %q of table %q", family, table)
	// AlreadyExists on a retry: an earlier attempt whose reply was lost
	// created it.
	return c.familyCall(ctx, prefix, table, family, codes.AlreadyExists, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.AddFamily(ctx, &pb.AddFamilyRequest{Table: table, Family: &pb.FamilySpec{Name: family}})
		return err
	})
}

// familyCall validates table and family and runs call on the master with
// callMaster's retries. A retry that fails with lostReply (codes.OK: none)
// is a success: an earlier attempt whose reply was lost did the change.
func (c *Client) familyCall(ctx context.Context, prefix, table, family string, lostReply codes.Code, call func(ctx context.Context, m pb.MasterClient) error) error {
	if err := limits.ValidateTableName(table); err != nil {
		return statusError(err, prefix)
	}
	if err := limits.ValidateFamilyName(family); err != nil {
		return statusError(err, prefix)
	}
	attempts := 0
	return c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		attempts++
		err := call(ctx, m)
		if attempts > 1 && lostReply != codes.OK && apierr.CodeOf(err) == lostReply {
			return nil
		}
		return err
	})
}

// DeleteColumnFamily removes a column family: once it returns, reads never
// show its cells and writes to it fail with InvalidArgument; compactions
// reclaim its data.
func (c *Client) DeleteColumnFamily(ctx context.Context, table, family string) error {
	prefix := errorPrefix("delete column family %q of table %q", family, table)
	// NotFound on a retry: an earlier attempt whose reply was lost deleted it.
	return c.familyCall(ctx, prefix, table, family, codes.NotFound, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.DeleteFamily(ctx, &pb.DeleteFamilyRequest{Table: table, Family: family})
		return err
	})
}

// SetGCPolicy sets a column family's garbage-collection policy; reads
// apply it as soon as it returns.
func (c *Client) SetGCPolicy(ctx context.Context, table, family string, policy GCPolicy) error {
	prefix := errorPrefix("set the GC policy of column family %q of table %q", family, table)
	if policy == nil {
		return statusError(apierr.InvalidArgument("the policy is nil; use NoGcPolicy to keep every cell"), prefix)
	}
	rule := policy.proto()
	return c.familyCall(ctx, prefix, table, family, codes.OK, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.SetGCRule(ctx, &pb.SetGCRuleRequest{Table: table, Family: family, GcRule: rule})
		return err
	})
}

// DropRowRange deletes every row of table whose key starts with
// rowKeyPrefix (which must not be empty; see DropAllRows). Rows written
// after it returns are kept. It may be retried: dropping again is harmless.
func (c *Client) DropRowRange(ctx context.Context, table, rowKeyPrefix string) error {
	prefix := errorPrefix("drop rows with prefix %q of table %q", rowKeyPrefix, table)
	if err := limits.ValidateTableName(table); err != nil {
		return statusError(err, prefix)
	}
	if rowKeyPrefix == "" {
		return statusError(apierr.InvalidArgument("the row key prefix is empty; use DropAllRows to drop every row"), prefix)
	}
	return c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.DropRowRange(ctx, &pb.DropRowRangeRequest{Table: table,
			Target: &pb.DropRowRangeRequest_RowKeyPrefix{RowKeyPrefix: []byte(rowKeyPrefix)}})
		return err
	})
}

// DropAllRows deletes every row of table; rows written after it returns
// are kept.
func (c *Client) DropAllRows(ctx context.Context, table string) error {
	prefix := errorPrefix("drop all rows of table %q", table)
	if err := limits.ValidateTableName(table); err != nil {
		return statusError(err, prefix)
	}
	return c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.DropRowRange(ctx, &pb.DropRowRangeRequest{Table: table,
			Target: &pb.DropRowRangeRequest_DeleteAllDataFromTable{DeleteAllDataFromTable: true}})
		return err
	})
}
