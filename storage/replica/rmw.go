package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"bighive/internal/limits"
	"bighive/storage/mutation"
	"bighive/storage/tablet"
)

// ErrNotCounter: an increment found a latest cell that is not a 64-bit
// big-endian integer (8 bytes). Nothing was written.
var ErrNotCounter = errors.New("replica: increment of a cell that is not a 64-bit big-endian integer")

// ErrInvalidRule: a read-modify-write is malformed (no rules, a rule
// without a family or on an aggregate family, an append whose result
// passes the value limit).
// Nothing was written.
var ErrInvalidRule = errors.New("replica: invalid read-modify-write rule")

// Rule is one rule of a read-modify-write: append Append to the latest
// value of the column, or, if Increment is set, add Delta to it as a
// 64-bit big-endian signed integer (a missing cell counts as 0; the sum
// wraps around on overflow).
type Rule struct {
	Family    string
	Qualifier []byte
	Increment bool
	Delta     int64
	Append    []byte
}

// ReadModifyWrite applies rules, in order, to the latest cell of each
// named column of row, and writes the results as one row mutation: one
// SetCell per column, with a server timestamp (or the column's latest
// timestamp, if that lies in the future, so the new cell stays the
// latest). Under millisecond granularity both are whole milliseconds (the
// tablet truncates its server timestamps and refuses other client ones),
// so the new cell's timestamp is one too. Several rules on one column compose (two increments add up).
// The log records the resulting cells, not the rules, so replay and log
// splitting rewrite the same cells. It returns the new cells, ordered by
// family and qualifier.
//
// It holds the row's lock exclusively from before its read until its
// apply returned: no other write of the row is between its sequence
// assignment and its apply meanwhile (see the package documentation for
// why that makes it atomic). The error cases are Write's, plus
// ErrNotCounter and ErrInvalidRule (nothing written).
func (r *Replica) ReadModifyWrite(ctx context.Context, row []byte, rules []Rule) (tablet.Row, error) {
	if len(rules) == 0 {
		return tablet.Row{}, fmt.Errorf("%w: no rules", ErrInvalidRule)
	}
	var cols []tablet.Column
	sch := r.o.Tablet.Schema()
	for i, ru := range rules {
		if ru.Family == "" {
			return tablet.Row{}, fmt.Errorf("%w: rule %d has no family", ErrInvalidRule, i)
		}
		if f := sch.Families[ru.Family]; f.Aggregate != tablet.NoAggregate {
			return tablet.Row{}, fmt.Errorf("%w: rule %d is on aggregate family %q (%v), whose cells take AddToCell and MergeToCell only",
				ErrInvalidRule, i, ru.Family, f.Aggregate)
		}
		if !slices.ContainsFunc(cols, func(c tablet.Column) bool { return sameColumn(c, ru.Family, ru.Qualifier) }) {
			cols = append(cols, tablet.Column{Family: ru.Family, Qualifier: ru.Qualifier})
		}
	}
	var m *mutation.RowMutation
	err := r.WriteRowLocked(ctx, row, func(ctx context.Context) (*mutation.RowMutation, func(*mutation.RowMutation), error) {
		var assigned func(*mutation.RowMutation)
		var err error
		m, assigned, err = r.modify(ctx, row, cols, rules)
		return m, assigned, err
	})
	if err != nil {
		return tablet.Row{}, err
	}
	out := tablet.Row{Key: row, Cells: make([]tablet.Cell, len(m.Ops))}
	for i, op := range m.Ops {
		out.Cells[i] = tablet.Cell{Family: op.Family, Qualifier: op.Qualifier, Timestamp: op.Timestamp, Value: op.Value}
	}
	slices.SortFunc(out.Cells, func(a, b tablet.Cell) int {
		if a.Family != b.Family {
			return strings.Compare(a.Family, b.Family)
		}
		return bytes.Compare(a.Qualifier, b.Qualifier)
	})
	return out, nil
}

// WriteRowLocked is the write path of a write that depends on the row's
// current state (ReadModifyWrite; a conditional mutation is the same
// shape). It holds row's lock exclusively while fn reads the row (with
// Get: every write of the row that took its sequence before the lock is
// visible, and none can take one until the lock is released) and returns
// the mutation to write, or nil to write nothing, with an optional hook
// that may adjust the ops' timestamps and values once the tablet assigned
// them (before the append); then it writes the mutation as Write does,
// still under the lock, and returns Write's error. An error of fn is
// returned as is, and nothing is written.
func (r *Replica) WriteRowLocked(ctx context.Context, row []byte,
	fn func(ctx context.Context) (*mutation.RowMutation, func(*mutation.RowMutation), error)) error {
	if err := r.enter(ctx, row); err != nil {
		return err
	}
	mu := r.rows.of(row)
	mu.Lock()
	defer mu.Unlock()
	m, assigned, err := fn(ctx)
	if err != nil || m == nil {
		return err
	}
	if !bytes.Equal(m.Row, row) {
		return fmt.Errorf("%w: the mutation of row %q is for row %q", ErrInvalidRule, row, m.Row)
	}
	errs := []error{nil}
	r.writeBatch(ctx, []*mutation.RowMutation{m}, errs, func(err error) { errs[0] = err }, false, assigned)
	return errs[0]
}

// modify reads the latest cells of cols and applies rules to them: the
// mutation that writes the results, and the hook that keeps each new cell
// at or above its column's latest timestamp.
func (r *Replica) modify(ctx context.Context, row []byte, cols []tablet.Column, rules []Rule) (*mutation.RowMutation, func(*mutation.RowMutation), error) {
	// Every earlier write of the row has returned from its apply (it held
	// the stripe shared until then), so it is visible to this read.
	cur, _, err := r.Get(ctx, row, tablet.ReadOptions{Columns: cols, MaxVersions: 1})
	if err != nil {
		return nil, nil, err
	}
	m := &mutation.RowMutation{Row: row, Ops: make([]mutation.Op, len(cols))}
	prevTS := make([]int64, len(cols))
	for i, c := range cols {
		m.Ops[i] = mutation.Op{Kind: mutation.SetCell, Family: c.Family, Qualifier: c.Qualifier, Timestamp: mutation.ServerTime}
		prevTS[i] = -1
		for _, cell := range cur.Cells {
			if sameColumn(c, cell.Family, cell.Qualifier) {
				m.Ops[i].Value = slices.Clone(cell.Value)
				prevTS[i] = cell.Timestamp
				break
			}
		}
	}
	// A column has a value once it had a cell or a rule wrote it (an
	// append leaves a non-nil value, possibly empty).
	exists := func(i int) bool { return prevTS[i] >= 0 || m.Ops[i].Value != nil }
	for _, ru := range rules {
		i := slices.IndexFunc(cols, func(c tablet.Column) bool { return sameColumn(c, ru.Family, ru.Qualifier) })
		op := &m.Ops[i]
		if !ru.Increment {
			if len(op.Value)+len(ru.Append) > limits.MaxValueBytes {
				return nil, nil, fmt.Errorf("%w: appending %d bytes to the %d of row %q column %s:%s passes the value limit of %d bytes",
					ErrInvalidRule, len(ru.Append), len(op.Value), row, ru.Family, ru.Qualifier, limits.MaxValueBytes)
			}
			op.Value = append(op.Value, ru.Append...)
			if op.Value == nil {
				op.Value = []byte{}
			}
			continue
		}
		var v int64
		if exists(i) {
			if len(op.Value) != 8 {
				return nil, nil, fmt.Errorf("%w: row %q column %s:%s holds %d bytes", ErrNotCounter, row, ru.Family, ru.Qualifier, len(op.Value))
			}
			v = int64(binary.BigEndian.Uint64(op.Value))
		}
		op.Value = binary.BigEndian.AppendUint64(nil, uint64(v+ru.Delta))
	}
	return m, func(m *mutation.RowMutation) {
		for i := range m.Ops {
			m.Ops[i].Timestamp = max(m.Ops[i].Timestamp, prevTS[i])
		}
	}, nil
}

func sameColumn(c tablet.Column, family string, qual []byte) bool {
	return c.Family == family && bytes.Equal(c.Qualifier, qual)
}
