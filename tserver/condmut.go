package tserver

import (
	"context"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/storage/mutation"
)

// maxCondMutations bounds the true and false mutations of one
// CheckAndMutateRow together, as Cloud Bigtable does.
const maxCondMutations = 100000

// CheckAndMutateRow evaluates the predicate on one row and applies the
// true or the false mutations; see replica.Replica.CheckAndMutate. Both
// lists are validated as MutateRow validates its row before anything is
// read or written.
func (s *Server) CheckAndMutateRow(ctx context.Context, req *pb.CheckAndMutateRowRequest) (*pb.CheckAndMutateRowResponse, error) {
	if err := limits.ValidateRowKey(req.RowKey); err != nil {
		return nil, err
	}
	n := len(req.TrueMutations) + len(req.FalseMutations)
	if n == 0 {
		return nil, apierr.InvalidArgument("check-and-mutate of row %q has neither true_mutations nor false_mutations", req.RowKey)
	}
	if n > maxCondMutations {
		return nil, apierr.InvalidArgument("check-and-mutate of row %q has %d mutations, more than the limit of %d", req.RowKey, n, maxCondMutations)
	}
	onTrue, err := condOps(req.RowKey, req.TrueMutations, "true_mutations")
	if err != nil {
		return nil, err
	}
	onFalse, err := condOps(req.RowKey, req.FalseMutations, "false_mutations")
	if err != nil {
		return nil, err
	}
	o, err := readOptions(nil, req.PredicateFilter)
	if err != nil {
		return nil, apierr.Wrap(codes.InvalidArgument, err, "predicate_filter")
	}
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	matched, err := r.CheckAndMutate(ctx, req.RowKey, o.Filter, onTrue, onFalse)
	if err != nil {
		return nil, s.tabletErr(r, err)
	}
	return &pb.CheckAndMutateRowResponse{PredicateMatched: matched}, nil
}

// condOps validates one list of a CheckAndMutateRow (empty: none).
func condOps(row []byte, muts []*pb.Mutation, name string) ([]mutation.Op, error) {
	if len(muts) == 0 {
		return nil, nil
	}
	m, err := toMutation(&pb.RowMutation{RowKey: row, Mutations: muts})
	if err != nil {
		return nil, apierr.Wrap(apierr.CodeOf(err), err, "%s", name)
	}
	return m.Ops, nil
}
