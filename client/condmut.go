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

// NewCondMutation returns a conditional mutation, applied with
// Table.Apply: the tserver evaluates cond on the row (every cell of it);
// if cond yields at least one cell, mtrue is applied, otherwise mfalse.
// Either may be nil, not both; a nil cond matches a row that has any
// cell. Labels cond applies do not matter. Both mutations are validated
// (families included) before cond is evaluated, so a bad one fails the
// call whichever is chosen, and nothing is written.
//
// The check and the write are atomic with respect to every other write of
// the row; concurrent conditional mutations of one row are executed one
// after another by the tserver.
func NewCondMutation(cond Filter, mtrue, mfalse *Mutation) *Mutation {
	return &Mutation{isConditional: true, cond: cond, mtrue: mtrue, mfalse: mfalse}
}

// An ApplyOption is an optional argument to Table.Apply.
type ApplyOption interface {
	after(res *pb.CheckAndMutateRowResponse)
}

type applyAfterFunc func(res *pb.CheckAndMutateRowResponse)

func (f applyAfterFunc) after(res *pb.CheckAndMutateRowResponse) { f(res) }

// GetCondMutationResult returns an ApplyOption that sets *matched to
// whether a conditional mutation's condition matched (mtrue was applied),
// once Apply returns nil. It does nothing for a plain mutation.
func GetCondMutationResult(matched *bool) ApplyOption {
	return applyAfterFunc(func(res *pb.CheckAndMutateRowResponse) { *matched = res.PredicateMatched })
}

// applyCond applies a conditional mutation with one CheckAndMutateRow.
// It is not idempotent, so it is retried (within the client's retry
// timeout) only when the failure proves that nothing was applied: the
// location lookup failed or no connection carried the request, or the
// tserver answered with a routing error (wrong tablet, not serving,
// tablet splitting) before it took the row. Any other failure is
// returned, and if it is codes.Unavailable, codes.DeadlineExceeded or
// codes.Canceled the mutation may or may not have been applied.
func (t *Table) applyCond(ctx context.Context, row string, m *Mutation, opts []ApplyOption) error {
	prefix := errorPrefix("table %q: conditional mutation of row %q", t.name, row)
	if err := limits.ValidateRowKey([]byte(row)); err != nil {
		return statusError(err, prefix)
	}
	if len(m.ops) > 0 {
		return status.Error(codes.InvalidArgument, prefix+": a conditional mutation has no operations of its own; put them in its true or false mutation")
	}
	req := &pb.CheckAndMutateRowRequest{RowKey: []byte(row)}
	for _, b := range []struct {
		name string
		m    *Mutation
		dst  *[]*pb.Mutation
	}{{"true", m.mtrue, &req.TrueMutations}, {"false", m.mfalse, &req.FalseMutations}} {
		if b.m != nil && b.m.isConditional {
			return status.Errorf(codes.InvalidArgument, "%s: conditional mutations cannot be nested (the %s mutation is conditional)", prefix, b.name)
		}
		if b.m == nil || len(b.m.ops) == 0 {
			continue
		}
		if err := limits.ValidateRowMutation(b.m.proto(row)); err != nil {
			return statusError(err, prefix+": "+b.name+" mutation")
		}
		*b.dst = b.m.ops
	}
	if len(req.TrueMutations)+len(req.FalseMutations) == 0 {
		return status.Error(codes.InvalidArgument, prefix+": neither a true nor a false mutation with operations")
	}
	pred, err := marshalFilter(m.cond)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: %v", prefix, err)
	}
	req.PredicateFilter = pred
	var res *pb.CheckAndMutateRowResponse
	err = t.c.do(ctx, func() string { return prefix }, writeOnce, func(ctx context.Context, p *peer.Peer) error {
		loc, err := t.lc.lookup(ctx, row)
		if err != nil {
			return unsent(err)
		}
		ts, err := t.c.tserver(loc.addr)
		if err != nil {
			return err
		}
		req.TabletId, req.Epoch = loc.tabletID, loc.epoch
		wctx, w := t.watch(ctx, loc)
		defer w.stop()
		res, err = ts.CheckAndMutateRow(wctx, req, grpc.Peer(p))
		if err != nil {
			return t.failed(loc, w.err(err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, o := range opts {
		o.after(res)
	}
	return nil
}
