package tserver

import (
	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/storage/mutation"
)

// toMutation validates a row mutation of the API and converts it into the
// engine's form. Timestamps of -1 stay mutation.ServerTime: the tablet
// assigns them (and the mutation's write sequence) before the WAL append,
// so the log holds concrete ones. A DeleteFromColumn without a time range
// becomes [0, 0): every version. What a delete hides is decided by write
// order, not by timestamps (package tablet): it hides the cells written
// before it, never one written after it, whatever its timestamp.
func toMutation(m *pb.RowMutation) (*mutation.RowMutation, error) {
	if err := limits.ValidateRowMutation(m); err != nil {
		return nil, err
	}
	out := &mutation.RowMutation{Row: m.RowKey, Ops: make([]mutation.Op, 0, len(m.Mutations))}
	for _, mu := range m.Mutations {
		var op mutation.Op
		switch x := mu.Mutation.(type) {
		case *pb.Mutation_SetCell_:
			c := x.SetCell
			op = mutation.Op{Kind: mutation.SetCell, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.TimestampMicros, Value: c.Value}
		case *pb.Mutation_DeleteFromColumn_:
			d := x.DeleteFromColumn
			op = mutation.Op{Kind: mutation.DeleteColumn, Family: d.Family, Qualifier: d.Qualifier}
			if r := d.TimeRange; r != nil {
				op.Timestamp, op.End = r.StartMicros, r.EndMicros
			}
		case *pb.Mutation_DeleteFromFamily_:
			op = mutation.Op{Kind: mutation.DeleteFamily, Family: x.DeleteFromFamily.Family, Timestamp: mutation.ServerTime}
		case *pb.Mutation_DeleteFromRow_:
			op = mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}
		case *pb.Mutation_MergeToCell_:
			c := x.MergeToCell
			op = mutation.Op{Kind: mutation.MergeCell, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.TimestampMicros, Value: c.Operand}
		default:
			return nil, apierr.InvalidArgument("operation has no kind")
		}
		out.Ops = append(out.Ops, op)
	}
	return out, nil
}
