package merge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/split"
	"bighive/storage/tablet/tsfile"
)

// Named errors; check them with errors.Is.
var (
	// ErrNotAdjacent: left does not end where right starts.
	ErrNotAdjacent = errors.New("merge: tablets are not adjacent")
	// ErrBusy: a parent has an unflushed standby buffer (a failed flush);
	// the next checkpoint flushes it and the merge is retried after.
	ErrBusy = errors.New("merge: tablet has an unflushed standby buffer")
	// ErrRefused wraps the master's definite refusal of the report (stale
	// epoch, not the owner, not adjacent), one that answered the report's
	// first attempt: nothing was committed.
	ErrRefused = errors.New("merge: master refused the merge")
	// ErrOutcomeUnknown: the report's outcome is unknown. Both parents
	// stay fenced and must be unloaded here.
	ErrOutcomeUnknown = errors.New("merge: outcome of the merge report unknown")
)

// Step names the points of the protocol a Hook is called at, after the
// step's work.
type Step int

// The steps of a merge (doc.go).
const (
	StepPrepare   Step = 1 // checkpointed, preparing state entered
	StepAllocate  Step = 2 // the merged tablet's id allocated
	StepFence     Step = 3 // both parents fenced, buffers swapped
	StepFlush     Step = 4 // swapped buffers written as TSFiles
	StepReport    Step = 5 // the report about to be sent
	StepCommitted Step = 6 // the master committed the merge
)

func (s Step) String() string {
	return [...]string{"?", "prepare", "allocate", "fence", "flush", "report", "committed"}[max(0, min(int(s), 6))]
}

// Tablet is a parent as a merge needs it; the tserver's *replica.Replica
// implements it.
type Tablet interface {
	HasStandby() bool
	SwapBuffers() bool
	FlushStandby(ctx context.Context) (tsfile.Info, error)
}

// Parent is one of the two tablets merged.
type Parent struct {
	ID         string
	Epoch      int64
	Start, End []byte // [Start, End); End nil: unbounded
	Tablet     Tablet
	// Route is called under the exclusive state lock with a fenced
	// split.DualWrite at step 3, and with nil when a failed merge lets the
	// parent take writes again.
	Route func(*split.DualWrite)
}

// Report is step 5's report to the master.
type Report struct {
	Left, Right Parent
	MergedID    string
	// Flushed are the parents' buffers at the fence, as TSFiles.
	Flushed []tsfile.Info
}

// Master is the master as a merge needs it.
type Master interface {
	AllocateTabletIDs(ctx context.Context, n int) ([]string, error)
	// ReportMerge asks the master to replace both parents by the merged
	// tablet in one transaction: nil once committed (also for a retried
	// report of a committed merge), an error wrapping ErrRefused only when
	// the master's refusal is definite, any other error when the outcome
	// is unknown. A refusal of a retried report (an earlier attempt may
	// have committed with its reply lost) is outcome unknown, not
	// ErrRefused (doc.go).
	ReportMerge(ctx context.Context, r Report) error
}

// Options are what every merge of one tserver shares.
type Options struct {
	// Blocks and Store: where the flushed TSFiles go (and are deleted
	// from after a failure).
	Blocks blockstore.Manager
	Store  string
	// Exclusive runs a function under the checkpoint's state lock held
	// exclusively; BeginSplit enters the preparing state; Checkpoint runs
	// a checkpoint (checkpoint.Coordinator's).
	Exclusive  func(func())
	BeginSplit func() (end func())
	Checkpoint func(ctx context.Context) error
	Master     Master
	// Hook, when set, is called after each step; an error aborts the
	// merge there as a failure of that step would. Tests inject faults.
	Hook   func(Step) error
	Logger *slog.Logger
}

// Result is a committed merge.
type Result struct {
	Report Report
	// Took is the merge's duration; Fenced how long the parents refused
	// writes until the commit.
	Took, Fenced time.Duration
}

// Run merges left and right, following the steps in doc.go. A nil error
// means the master committed the merge: the caller unloads both parents
// and loads the merged tablet. On an error wrapping ErrOutcomeUnknown the
// parents stay fenced and the caller must unload them; on any other error
// both parents are intact and serving.
func Run(ctx context.Context, o Options, left, right Parent) (res *Result, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	began := time.Now()
	log := o.Logger.With("left", left.ID, "right", right.ID)
	hook := func(s Step) error {
		if o.Hook == nil {
			return nil
		}
		if err := o.Hook(s); err != nil {
			return fmt.Errorf("merge: tablets %s+%s at step %d (%s): %w", left.ID, right.ID, s, s, err)
		}
		return nil
	}
	if len(left.End) == 0 || !bytes.Equal(left.End, right.Start) {
		return nil, fmt.Errorf("%w: %s ends at %q, %s starts at %q", ErrNotAdjacent, left.ID, left.End, right.ID, right.Start)
	}
	parents := [2]Parent{left, right}

	// Step 1: checkpoint, so the fence flushes little; then no checkpoint
	// until the merge ends.
	if o.Checkpoint != nil {
		if err := o.Checkpoint(ctx); err != nil {
			return nil, fmt.Errorf("merge: checkpoint first: %w", err)
		}
	}
	end := o.BeginSplit()
	defer end()
	for _, p := range parents {
		if p.Tablet.HasStandby() {
			return nil, fmt.Errorf("%w: tablet %s", ErrBusy, p.ID)
		}
	}
	if err := hook(StepPrepare); err != nil {
		return nil, err
	}

	// Step 2: the merged tablet's id.
	ids, err := o.Master.AllocateTabletIDs(ctx, 1)
	if err != nil {
		return nil, fmt.Errorf("merge: allocate a tablet id: %w", err)
	}
	if len(ids) != 1 {
		return nil, fmt.Errorf("merge: master allocated %d tablet ids, want 1", len(ids))
	}
	if err := hook(StepAllocate); err != nil {
		return nil, err
	}

	// Step 3: fence both and swap their buffers in one exclusive section.
	rep := Report{Left: left, Right: right, MergedID: ids[0]}
	fence := split.Fenced()
	var swapped [2]bool
	o.Exclusive(func() {
		for i, p := range parents {
			p.Route(fence)
			swapped[i] = p.Tablet.SwapBuffers()
		}
	})
	fenced := time.Now()
	defer func() {
		if err == nil || errors.Is(err, ErrOutcomeUnknown) {
			return
		}
		// A failure before the commit: take writes again; the swapped
		// buffers stay in the read set until the next checkpoint.
		o.Exclusive(func() {
			for _, p := range parents {
				p.Route(nil)
			}
		})
		split.DeleteFiles(o.Blocks, o.Store, rep.Flushed, log)
	}()
	if err := hook(StepFence); err != nil {
		return nil, err
	}

	// Step 4: the swapped buffers as TSFiles.
	for i, p := range parents {
		if !swapped[i] {
			continue
		}
		info, err := p.Tablet.FlushStandby(ctx)
		if err != nil {
			return nil, fmt.Errorf("merge: flush tablet %s: %w", p.ID, err)
		}
		rep.Flushed = append(rep.Flushed, info)
	}
	if err := hook(StepFlush); err != nil {
		return nil, err
	}

	// Step 5: the report.
	if err := hook(StepReport); err != nil {
		return nil, err
	}
	if err := o.Master.ReportMerge(ctx, rep); err != nil {
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: tablets %s+%s: %w", ErrOutcomeUnknown, left.ID, right.ID, err)
	}
	res = &Result{Report: rep, Took: time.Since(began), Fenced: time.Since(fenced)}
	if err := hook(StepCommitted); err != nil {
		log.Warn("merge: after commit", "err", err) // the merge is done
	}
	log.Info("tablets merged", "merged", rep.MergedID, "flushed", len(rep.Flushed), "took", res.Took, "fenced", res.Fenced)
	return res, nil
}
