package split

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"bighive/storage/mutation"
	"bighive/storage/wal"
)

// DualWrite routes the parent's writes into the children's child logs
// while a split runs (step 4 until the report of step 6). The tserver's
// write path calls Admit under the shared state lock before its WAL
// append, Log after it, and Done when the write ends.
type DualWrite struct {
	mid    []byte
	ids    [2]string
	logs   [2]*wal.SingleFile
	mu     sync.RWMutex // held shared by each admitted write, exclusively by fence
	fenced bool         // guarded by mu: the report is (being) sent

	errMu sync.Mutex
	err   error // the first failed split-log append; the split must not commit
}

// Admitted is one admitted write. A nil *Admitted (no split running) is
// valid: Log and Done do nothing.
type Admitted struct {
	d *DualWrite
}

// Admit admits one write of the parent, or fails with ErrFenced once the
// split's report is being sent: from then on the parent takes no write,
// since the children may already own its rows.
func (d *DualWrite) Admit() (*Admitted, error) {
	if d == nil {
		return nil, nil
	}
	d.mu.RLock()
	if d.fenced {
		d.mu.RUnlock()
		return nil, ErrFenced
	}
	return &Admitted{d: d}, nil
}

// LogBatch appends each row mutation of a write (one row, or the rows of
// a batch) to the log of the child that covers its row: the rows of each
// child together (one sync per child). It returns once they are durable;
// errs[i] is the outcome of ms[i]. The caller's context does not cut the
// appends short: a write already in the parent's log must reach the child
// log too, or the split must fail. A failed append is remembered, and the
// split that admitted the write then refuses to commit (Run checks after
// the fence), so the parent, which logged and applied the write, keeps
// owning its row.
func (a *Admitted) LogBatch(ctx context.Context, ms []*mutation.RowMutation) (errs []error) {
	errs = make([]error, len(ms))
	if a == nil {
		return errs
	}
	for c := range a.d.logs {
		var idx []int
		var part []*mutation.RowMutation
		for i, m := range ms {
			if a.d.child(m.Row) == c {
				idx, part = append(idx, i), append(part, m)
			}
		}
		if len(part) == 0 {
			continue
		}
		for k, err := range a.d.logs[c].AppendBatch(context.WithoutCancel(ctx), a.d.ids[c], part) {
			if err == nil {
				continue
			}
			err = fmt.Errorf("%w: %w", ErrChildLog, err)
			errs[idx[k]] = err
			a.d.errMu.Lock()
			if a.d.err == nil {
				a.d.err = err
			}
			a.d.errMu.Unlock()
		}
	}
	return errs
}

// failed is the first failed split-log append, or nil.
func (d *DualWrite) failed() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.err
}

// Done ends an admitted write.
func (a *Admitted) Done() {
	if a != nil {
		a.d.mu.RUnlock()
	}
}

func (d *DualWrite) child(row []byte) int {
	if bytes.Compare(row, d.mid) < 0 {
		return 0
	}
	return 1
}

// fence refuses new writes and waits for the admitted ones: when it
// returns, every write the parent may still acknowledge is in a child log.
func (d *DualWrite) fence() {
	d.mu.Lock()
	d.fenced = true
	d.mu.Unlock()
}

func (d *DualWrite) unfence() {
	d.mu.Lock()
	d.fenced = false
	d.mu.Unlock()
}

// drain waits for the admitted writes (after the tserver stopped routing
// new ones here) and closes the logs, removing them when remove is set.
func (d *DualWrite) drain(remove bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, l := range d.logs {
		if l == nil {
			continue
		}
		if remove {
			errs = append(errs, l.Remove())
		} else {
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(errs...)
}
