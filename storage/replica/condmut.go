package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"bighive/storage/mutation"
	"bighive/storage/tablet"
	"bighive/storage/tablet/filter"
)

// ErrInvalidCondMutation: a conditional mutation is malformed (neither
// true nor false operations). Nothing was written.
var ErrInvalidCondMutation = errors.New("replica: invalid conditional mutation")

// CheckAndMutate evaluates pred on row and writes onTrue if it yields at
// least one cell, onFalse otherwise, as one ordinary row mutation; it
// reports which (matched: onTrue). pred sees every cell of the row, after
// deletes and the GC policy, as a read does; a nil pred yields the row's
// cells, so it matches a row with any cell. Labels pred applies do not
// matter. Either list may be empty (then nothing is written when it is
// chosen), not both.
//
// Both lists are checked against the schema before pred is evaluated: an
// operation on an unknown family fails the call (tablet.ErrUnknownFamily)
// whichever list it is in, and nothing is written.
//
// It holds the row's lock exclusively from before its read until its
// write's apply returned (WriteRowLocked), so it is atomic with respect
// to every other write of the row. The log records the chosen operations
// only, with their assigned timestamps, so replay, failover and split-log
// replay rewrite the same cells. The error cases are Write's, plus
// ErrInvalidCondMutation and a predicate's evaluation error
// (filter.ErrInvalid); nothing is written on any of those.
func (r *Replica) CheckAndMutate(ctx context.Context, row []byte, pred *filter.Filter, onTrue, onFalse []mutation.Op) (matched bool, err error) {
	if len(onTrue) == 0 && len(onFalse) == 0 {
		return false, fmt.Errorf("%w: row %q has neither true nor false operations", ErrInvalidCondMutation, row)
	}
	sch := r.o.Tablet.Schema()
	for _, l := range []struct {
		name string
		ops  []mutation.Op
	}{{"true", onTrue}, {"false", onFalse}} {
		for i, op := range l.ops {
			if op.Kind == mutation.DeleteRow {
				continue
			}
			f, ok := sch.Families[op.Family]
			if !ok {
				return false, fmt.Errorf("replica: tablet %s: %w %q (%s operation %d on row %q)", r.o.ID, tablet.ErrUnknownFamily, op.Family, l.name, i, row)
			}
			// Both branches are checked against aggregate families, not
			// only the one the predicate picks.
			if agg := f.Aggregate != tablet.NoAggregate; (op.Kind == mutation.SetCell && agg) || (op.Kind == mutation.MergeCell && !agg) {
				return false, fmt.Errorf("replica: tablet %s: %w: %s operation %d (%v) on row %q does not fit family %q (aggregate: %v)",
					r.o.ID, tablet.ErrInvalidMutation, l.name, i, op.Kind, row, op.Family, f.Aggregate)
			}
		}
	}
	err = r.WriteRowLocked(ctx, row, func(ctx context.Context) (*mutation.RowMutation, func(*mutation.RowMutation), error) {
		// Every earlier write of the row has returned from its apply, so
		// it is visible to this read (see WriteRowLocked).
		cur, _, err := r.Get(ctx, row, tablet.ReadOptions{Filter: pred})
		if err != nil {
			return nil, nil, err
		}
		matched = len(cur.Cells) > 0
		ops := onFalse
		if matched {
			ops = onTrue
		}
		if len(ops) == 0 {
			return nil, nil, nil
		}
		// BeginWrite assigns server timestamps in place: keep the
		// caller's operations as they were.
		return &mutation.RowMutation{Row: row, Ops: slices.Clone(ops)}, nil, nil
	})
	return matched, err
}
