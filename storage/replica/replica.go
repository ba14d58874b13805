package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"bighive/storage/mutation"
	"bighive/storage/split"
	"bighive/storage/tablet"
)

// Named errors; check them with errors.Is. The tserver maps each to the
// gRPC status a client acts on.
var (
	// ErrWrongTablet: the row lies outside the tablet's range.
	ErrWrongTablet = errors.New("replica: row outside the tablet")
	// ErrNotServing: the tablet is loading, or stopped (unloaded).
	ErrNotServing = errors.New("replica: tablet not serving")
	// ErrSplitting: a split of the tablet is reporting its children; the
	// write was refused before it was logged.
	ErrSplitting = errors.New("replica: tablet is being replaced by its children")
	// ErrLog wraps a failed WAL append: the write was not applied, and
	// may or may not be in the log. A failed log (wal.ErrFailed) is also
	// reported to Options.LogFailed.
	ErrLog = errors.New("replica: log append failed")
	// ErrLeaseLost: the tserver's lease ran out while the write was being
	// logged. The write is logged and applied, but the master may have
	// given the tablet to another tserver meanwhile: its outcome is
	// unknown to the caller.
	ErrLeaseLost = errors.New("replica: lease lost during the write")
	// ErrUnknownOutcome is wrapped by every error returned after the
	// record may have been logged (ErrLeaseLost, a failed apply on a
	// closed engine, whose record the tablet's next owner replays): the
	// write may take effect. A non-idempotent write (read-modify-write)
	// must not be retried after it.
	ErrUnknownOutcome = errors.New("replica: the write may have been applied")
)

// Log is the tserver's write-ahead log as the write path needs it;
// *wal.Log implements it.
type Log interface {
	// AppendBatch appends the records of one tablet (one for a single
	// write) into one group commit and returns once each is durable or
	// failed (errs[i]).
	AppendBatch(ctx context.Context, tabletID string, ms []*mutation.RowMutation) (seqs []uint64, errs []error)
}

// Admitter is the checkpoint coordinator as the write path needs it;
// *checkpoint.Coordinator implements it.
type Admitter interface {
	// AdmitWrite takes the global state lock shared; release ends it.
	AdmitWrite() (release func())
}

// Options describe one load of a tablet.
type Options struct {
	ID, Table string
	// Start and End bound the rows: [Start, End); End empty: unbounded.
	Start, End []byte
	// Epoch is the assignment epoch the tablet is loaded at; every
	// metadata update of this load carries it.
	Epoch int64
	// Tablet (the engine, opened over the tablet's TSFiles), Log and Admit
	// (the checkpoint coordinator) are required. The replica owns Tablet:
	// Close closes it.
	Tablet *tablet.Tablet
	Log    Log
	Admit  Admitter
	// Lease reports whether the tserver's lease from the master is valid
	// now; nil: always (single-node use and tests).
	Lease func() bool
	// Throttle holds a write back while the write buffers are over their
	// hard limit; its error is returned as is. nil: no throttling.
	Throttle func(ctx context.Context) error
	// LogFailed is called with the error (wrapping wal.ErrFailed) of an
	// append to a failed log; the tserver stops on it. nil: nothing.
	LogFailed func(error)
	// Server names the tserver in error messages.
	Server string
}

// Replica is one load of a tablet on a tserver: its range and epoch, its
// engine, its one serving state, the write path and the reads. The
// checkpoint coordinator, splits and merges work on the same value
// (checkpoint.Tablet, split.Tablet, merge.Tablet), and the value names the
// load: loading the tablet again makes a new Replica. Safe for concurrent
// use.
type Replica struct {
	o Options

	// state is loading, serving or stopped (load.go), the only serving
	// state of the tablet here. A write reads it under ops held shared;
	// Stop sets it before it takes ops exclusively.
	state atomic.Int32
	// fenced refuses writes while the replica still serves reads and
	// checkpoints (FenceWrites); read, like state, under ops held shared.
	fenced atomic.Bool
	// fenceDone: FenceWrites returned, so no write is in flight either.
	fenceDone atomic.Bool
	// ops is held shared by each write from before its WAL append to after
	// its apply, and exclusively by Stop, so a tablet leaves only between
	// writes.
	ops sync.RWMutex
	// loadMu is held shared by each Hold and exclusively by Close, so that
	// Close waits for the background commits of this load.
	loadMu sync.RWMutex
	closed bool // guarded by loadMu

	// route is the running split's dual-write, nil when none runs. It is
	// set and cleared under the coordinator's exclusive state lock (split
	// step 4, and the end of a failed split), so a write admitted under
	// the shared lock sees one value from admission to apply.
	route atomic.Pointer[split.DualWrite]

	// rows are the row locks (see rowlock.go): a plain write holds its
	// row's stripe shared, a read-modify-write exclusively.
	rows rowLocks
}

// New returns the replica of a tablet, loading: it takes the replay of its
// logs (Replay) and serves once Serve is called.
func New(o Options) *Replica {
	if len(o.End) == 0 {
		o.End = nil
	}
	return &Replica{o: o, rows: newRowLocks()}
}

// ID is the tablet id.
func (r *Replica) ID() string { return r.o.ID }

// Table is the tablet's table.
func (r *Replica) Table() string { return r.o.Table }

// Start is the first row of the tablet's range.
func (r *Replica) Start() []byte { return r.o.Start }

// End is the end (exclusive) of the tablet's range; nil: unbounded.
func (r *Replica) End() []byte { return r.o.End }

// Epoch is the assignment epoch.
func (r *Replica) Epoch() int64 { return r.o.Epoch }

// Contains reports whether row lies in the tablet's range.
func (r *Replica) Contains(row []byte) bool {
	return bytes.Compare(row, r.o.Start) >= 0 && (r.o.End == nil || bytes.Compare(row, r.o.End) < 0)
}

// Route switches a split's dual-write on (d) or off (nil). Call it only
// inside the split's Exclusive section (split.Request.Route).
func (r *Replica) Route(d *split.DualWrite) { r.route.Store(d) }

// Write is the write path of one row mutation: validate and assign
// timestamps, wait for buffer memory, admit (tablet serving, the state
// lock shared, a running split's dual-write), append to the WAL, append
// to the child log, apply to the active buffer, check the lease. When it
// returns nil the write is durable in the log and visible to reads, and,
// during a split, durable in its child's log too or else the split
// cannot commit. See the package documentation for why the steps come in
// this order.
func (r *Replica) Write(ctx context.Context, m *mutation.RowMutation) error {
	return r.writeBatchRows(ctx, []*mutation.RowMutation{m}, false)[0]
}

// WriteInternal is Write for a mutation of the server itself, which may
// name families absent from the schema: the delete-family tombstones that
// mask a deleted family's old cells (tablet.BeginInternalWrite).
func (r *Replica) WriteInternal(ctx context.Context, m *mutation.RowMutation) error {
	return r.writeBatchRows(ctx, []*mutation.RowMutation{m}, true)[0]
}

// enter checks the row against the range and waits for buffer memory
// (steps 1 and 2), before any lock is taken.
func (r *Replica) enter(ctx context.Context, row []byte) error {
	if !r.Contains(row) {
		return fmt.Errorf("%w: row %q is outside tablet %s [%q, %q)", ErrWrongTablet, row, r.o.ID, r.o.Start, r.o.End)
	}
	if r.o.Throttle != nil {
		if err := r.o.Throttle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Get reads one row of the tablet.
func (r *Replica) Get(ctx context.Context, row []byte, opts tablet.ReadOptions) (tablet.Row, bool, error) {
	if !r.Contains(row) {
		return tablet.Row{}, false, fmt.Errorf("%w: row %q is outside tablet %s", ErrWrongTablet, row, r.o.ID)
	}
	if err := r.readable(); err != nil {
		return tablet.Row{}, false, err
	}
	return r.o.Tablet.Get(ctx, row, opts)
}

// Scan calls fn for the rows in [start, end) clipped to the tablet's
// range (empty start: from the tablet's start; empty end: to its end), in
// row order, at most limit rows (0: no limit), until fn returns false.
func (r *Replica) Scan(ctx context.Context, start, end []byte, limit int, opts tablet.ReadOptions, fn func(tablet.Row) bool) error {
	return r.ScanRanges(ctx, []tablet.KeyRange{{Start: start, End: end}}, false, limit, opts, fn)
}

// ScanRanges is the engine's ScanRanges with each range clipped to the
// tablet's rows (an empty Start or End is unbounded); ranges left empty
// are dropped.
func (r *Replica) ScanRanges(ctx context.Context, ranges []tablet.KeyRange, reversed bool, limit int, opts tablet.ReadOptions, fn func(tablet.Row) bool) error {
	if err := r.readable(); err != nil {
		return err
	}
	clipped := make([]tablet.KeyRange, 0, len(ranges))
	for _, kr := range ranges {
		start, end := kr.Start, kr.End
		if len(start) == 0 || bytes.Compare(start, r.o.Start) < 0 {
			start = r.o.Start
		}
		if r.o.End != nil && (len(end) == 0 || bytes.Compare(end, r.o.End) > 0) {
			end = r.o.End
		}
		if len(end) == 0 {
			end = nil
		}
		if end != nil && bytes.Compare(start, end) >= 0 {
			continue
		}
		clipped = append(clipped, tablet.KeyRange{Start: start, End: end})
	}
	if len(clipped) == 0 {
		return nil
	}
	return r.o.Tablet.ScanRanges(ctx, clipped, reversed, limit, opts, fn)
}

// GetRows is the engine's GetRows (a multi-get from one snapshot) for rows
// of this tablet: any row outside its range fails the whole call with
// ErrWrongTablet.
func (r *Replica) GetRows(ctx context.Context, rows [][]byte, opts tablet.ReadOptions, fn func(i int, row tablet.Row) bool) error {
	for _, row := range rows {
		if !r.Contains(row) {
			return fmt.Errorf("%w: row %q is outside tablet %s", ErrWrongTablet, row, r.o.ID)
		}
	}
	if err := r.readable(); err != nil {
		return err
	}
	return r.o.Tablet.GetRows(ctx, rows, opts, fn)
}
