package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// ReadModifyWrite is a list of append and increment rules for one row,
// applied in order by ApplyReadModifyWrite; build it with
// NewReadModifyWrite.
type ReadModifyWrite struct {
	rules []*pb.ReadModifyWriteRule
}

// NewReadModifyWrite returns an empty list of rules.
func NewReadModifyWrite() *ReadModifyWrite { return &ReadModifyWrite{} }

// AppendValue appends v to the latest value of family:column (a missing
// cell counts as empty).
func (m *ReadModifyWrite) AppendValue(family, column string, v []byte) {
	m.rules = append(m.rules, &pb.ReadModifyWriteRule{
		Family: family, Qualifier: []byte(column),
		Rule: &pb.ReadModifyWriteRule_AppendValue{AppendValue: append([]byte{}, v...)},
	})
}

// Increment adds delta to the latest value of family:column, read as a
// 64-bit big-endian signed integer. A missing cell counts as 0; a cell
// that is not 8 bytes long fails the whole request with
// codes.FailedPrecondition, and nothing is written.
func (m *ReadModifyWrite) Increment(family, column string, delta int64) {
	m.rules = append(m.rules, &pb.ReadModifyWriteRule{
		Family: family, Qualifier: []byte(column),
		Rule: &pb.ReadModifyWriteRule_IncrementAmount{IncrementAmount: delta},
	})
}

// ApplyReadModifyWrite applies m's rules to row atomically, with respect
// to every other write of the row, and returns the new cell of each
// column the rules named (one per column, with its server timestamp).
//
// It is not idempotent, so it is never retried after it may have reached
// a tserver. It is retried (within the client's retry timeout) only when
// the failure proves that nothing was applied: the location lookup
// failed or no connection carried the request, or the tserver answered
// with a routing error (wrong tablet, not serving, tablet splitting)
// before it took the row. Any other failure is returned, and if it is
// codes.Unavailable, codes.DeadlineExceeded or codes.Canceled the
// increment may or may not have been applied.
func (t *Table) ApplyReadModifyWrite(ctx context.Context, row string, m *ReadModifyWrite) (Row, error) {
	prefix := errorPrefix("table %q: read-modify-write of row %q", t.name, row)
	if m == nil || len(m.rules) == 0 {
		return Row{}, status.Error(codes.InvalidArgument, prefix+": no rules")
	}
	if err := limits.ValidateRowKey([]byte(row)); err != nil {
		return Row{}, statusError(err, prefix)
	}
	var out Row
	err := t.c.do(ctx, func() string { return prefix }, writeOnce, func(ctx context.Context, p *peer.Peer) error {
		loc, err := t.lc.lookup(ctx, row)
		if err != nil {
			return unsent(err)
		}
		ts, err := t.c.tserver(loc.addr)
		if err != nil {
			return err
		}
		wctx, w := t.watch(ctx, loc)
		defer w.stop()
		resp, err := ts.ReadModifyWriteRow(wctx, &pb.ReadModifyWriteRowRequest{
			TabletId: loc.tabletID, Epoch: loc.epoch, RowKey: []byte(row), Rules: m.rules,
		}, grpc.Peer(p))
		if err != nil {
			return t.failed(loc, w.err(err))
		}
		out = rowFromProto(resp.GetRow())
		out.Key = row
		return nil
	})
	return out, err
}
