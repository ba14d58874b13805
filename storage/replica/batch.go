package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"bighive/storage/mutation"
	"bighive/storage/wal"
)

// WriteBatch is Write for many row mutations of the tablet at once: errs[i]
// is the outcome of ms[i], with Write's meaning (nil: durable in the log
// and visible). The batch runs the steps of Write once, not once per row:
// one throttle wait, one admission (ops lock, state lock, split), one WAL
// append of every valid row (one group commit, one wait), one split-log
// append per child, one apply pass and one lease check. A row that cannot
// be written (outside the range, invalid) fails alone; the rest go on. No
// goroutine is started per row.
//
// The rows may repeat: two mutations of one row are applied in their
// order in ms, as two Writes called one after the other would be.
func (r *Replica) WriteBatch(ctx context.Context, ms []*mutation.RowMutation) (errs []error) {
	return r.writeBatchRows(ctx, ms, false)
}

// WriteBatchInternal is WriteBatch for mutations of the server itself,
// which may name families absent from the schema (see WriteInternal).
func (r *Replica) WriteBatchInternal(ctx context.Context, ms []*mutation.RowMutation) (errs []error) {
	return r.writeBatchRows(ctx, ms, true)
}

func (r *Replica) writeBatchRows(ctx context.Context, ms []*mutation.RowMutation, internal bool) (errs []error) {
	errs = make([]error, len(ms))
	setAll := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	// Step 1: each row against the range.
	n := 0
	for i, m := range ms {
		if !r.Contains(m.Row) {
			errs[i] = fmt.Errorf("%w: row %q is outside tablet %s [%q, %q)", ErrWrongTablet, m.Row, r.o.ID, r.o.Start, r.o.End)
			continue
		}
		n++
	}
	if n == 0 {
		return errs
	}
	// Step 2, once for the batch, before any lock.
	if r.o.Throttle != nil {
		if err := r.o.Throttle(ctx); err != nil {
			setAll(err)
			return errs
		}
	}
	// The rows' stripes, shared, each once (a second RLock of one stripe
	// could wait behind a read-modify-write queued for it) and in stripe
	// order.
	stripes := make([]int, 0, n)
	for i, m := range ms {
		if errs[i] == nil {
			stripes = append(stripes, r.rows.index(m.Row))
		}
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		r.rows.stripes[s].RLock()
	}
	defer func() {
		for _, s := range stripes {
			r.rows.stripes[s].RUnlock()
		}
	}()
	r.writeBatch(ctx, ms, errs, setAll, internal, nil)
	return errs
}

// writeBatch runs steps 3 to 9 for the rows of ms whose errs entry is nil,
// once for all of them; the caller holds their row locks (shared, or
// exclusive for a read-modify-write). internal accepts families absent
// from the schema. assigned, if not nil, is called for each row after
// BeginWrite gave it its sequence and timestamps and before the append:
// it may change the ops' timestamps and values, not their number or kinds.
func (r *Replica) writeBatch(ctx context.Context, ms []*mutation.RowMutation, errs []error, setAll func(error), internal bool,
	assigned func(*mutation.RowMutation)) {
	r.ops.RLock()
	defer r.ops.RUnlock()
	if err := r.admissible(); err != nil {
		setAll(err)
		return
	}
	release := r.o.Admit.AdmitWrite()
	defer release()
	adm, err := r.route.Load().Admit() // nil unless a split runs
	if err != nil {
		setAll(fmt.Errorf("%w: tablet %s: %w", ErrSplitting, r.o.ID, err))
		return
	}
	defer adm.Done()

	// Step 5: sequence and timestamps per row, inside the admitted
	// section and before the append; an invalid row fails alone. The
	// rows keep the order of their sequences from here on, which the
	// apply pass needs (each apply waits for the lower sequences).
	begin := r.o.Tablet.BeginWrite
	if internal {
		begin = r.o.Tablet.BeginInternalWrite
	}
	idx := make([]int, 0, len(ms))
	begun := make([]*mutation.RowMutation, 0, len(ms))
	for i, m := range ms {
		if errs[i] != nil {
			continue
		}
		if err := begin(m); err != nil {
			errs[i] = fmt.Errorf("replica: tablet %s: %w", r.o.ID, err)
			continue
		}
		if assigned != nil {
			assigned(m)
		}
		idx, begun = append(idx, i), append(begun, m)
	}
	if len(begun) == 0 {
		return
	}

	// Step 6: one append of every begun row. A row whose append failed is
	// abandoned (never applied); the others are logged from here on and
	// run to the end whatever ctx does, as in Write.
	_, aerrs := r.o.Log.AppendBatch(ctx, r.o.ID, begun)
	logged := begun[:0:0]
	var loggedIdx []int
	reported := false
	for k, m := range begun {
		if err := aerrs[k]; err != nil {
			r.o.Tablet.Abandon(m)
			if errors.Is(err, wal.ErrFailed) && r.o.LogFailed != nil && !reported {
				r.o.LogFailed(err)
				reported = true
			}
			errs[idx[k]] = fmt.Errorf("%w: tserver %s, tablet %s: %w", ErrLog, r.o.Server, r.o.ID, err)
			continue
		}
		logged, loggedIdx = append(logged, m), append(loggedIdx, idx[k])
	}
	if len(logged) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	// Step 7: the split's dual-write, each row to its child's log;
	// a failure there abandons the split, not the write (see Write).
	_ = adm.LogBatch(ctx, logged)
	// Step 8: one apply pass, in sequence order.
	for k, err := range r.o.Tablet.ApplyBatch(logged) {
		if err != nil {
			errs[loggedIdx[k]] = fmt.Errorf("replica: tablet %s: apply: %w (%w)", r.o.ID, err, ErrUnknownOutcome)
		}
	}
	// Step 9: one lease check, after every row is logged.
	if r.o.Lease != nil && !r.o.Lease() {
		lost := fmt.Errorf("%w (%w): tserver %s, tablet %s", ErrLeaseLost, ErrUnknownOutcome, r.o.Server, r.o.ID)
		for _, i := range loggedIdx {
			if errs[i] == nil {
				errs[i] = lost
			}
		}
	}
}
