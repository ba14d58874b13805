package tserver

import (
	"context"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	rp "bighive/storage/replica"
)

// ReadModifyWriteRow applies append and increment rules to one row; see
// replica.Replica.ReadModifyWrite.
func (s *Server) ReadModifyWriteRow(ctx context.Context, req *pb.ReadModifyWriteRowRequest) (*pb.ReadModifyWriteRowResponse, error) {
	if err := limits.ValidateRowKey(req.RowKey); err != nil {
		return nil, err
	}
	if len(req.Rules) == 0 {
		return nil, apierr.InvalidArgument("read-modify-write of row %q has no rules", req.RowKey)
	}
	rules := make([]rp.Rule, len(req.Rules))
	for i, ru := range req.Rules {
		if ru.Family == "" {
			return nil, apierr.InvalidArgument("read-modify-write rule %d has no family", i)
		}
		if err := limits.ValidateQualifier(ru.Qualifier); err != nil {
			return nil, err
		}
		if err := limits.ValidateValue(ru.GetAppendValue()); err != nil {
			return nil, err
		}
		rules[i] = rp.Rule{Family: ru.Family, Qualifier: ru.Qualifier}
		switch v := ru.Rule.(type) {
		case *pb.ReadModifyWriteRule_AppendValue:
			rules[i].Append = v.AppendValue
		case *pb.ReadModifyWriteRule_IncrementAmount:
			rules[i].Increment, rules[i].Delta = true, v.IncrementAmount
		default:
			return nil, apierr.InvalidArgument("read-modify-write rule %d (%s) has neither append_value nor increment_amount", i, ru.Family)
		}
	}
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	row, err := r.ReadModifyWrite(ctx, req.RowKey, rules)
	if err != nil {
		return nil, s.tabletErr(r, err)
	}
	return &pb.ReadModifyWriteRowResponse{Row: rowToPB(row)}, nil
}
