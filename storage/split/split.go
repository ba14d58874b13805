package split

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/tablet"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/vfs"
	"bighive/storage/wal"
)

// Named errors; check them with errors.Is.
var (
	// ErrTooSmall: the tablet has fewer than two rows, nothing to split.
	ErrTooSmall = errors.New("split: tablet has fewer than two rows")
	// ErrBadRow: the requested split row does not lie strictly inside the
	// tablet's range.
	ErrBadRow = errors.New("split: split row not strictly inside the tablet's range")
	// ErrBusy: the parent has a standby buffer from a failed flush; the
	// next checkpoint flushes it, the split is retried after.
	ErrBusy = errors.New("split: tablet has an unflushed standby buffer")
	// ErrFenced is returned to a write of the parent once the split's
	// report is being sent (the client refreshes its locations).
	ErrFenced = errors.New("split: tablet is being replaced by its children")
	// ErrChildLog wraps a failed append to a child log.
	ErrChildLog = errors.New("split: child log append failed")
	// ErrRefused wraps the master's definite refusal of the report (stale
	// epoch, unknown parent, bad children), one that answered the report's
	// first attempt: nothing was committed.
	ErrRefused = errors.New("split: master refused the split")
	// ErrOutcomeUnknown: the report's outcome is unknown (the master did
	// not answer). The parent must stay fenced and be unloaded here; the
	// master's metadata decides who owns the rows.
	ErrOutcomeUnknown = errors.New("split: outcome of the split report unknown")
	// ErrInjected is what a Hook returns to simulate a failure.
	ErrInjected = errors.New("split: injected failure")
)

// Step names the points of the protocol a Hook is called at, after the
// step's work.
type Step int

// The six steps of a split (doc.go; docs/design.md 'Split'), plus the point right after the commit.
const (
	StepPrepare   Step = 1 // preparing state entered: no checkpoint runs
	StepAllocate  Step = 2 // child ids allocated at the master
	StepMidRow    Step = 3 // middle row chosen
	StepChildLogs Step = 4 // child logs created, dual-write on, buffers swapped
	StepTSFiles   Step = 5 // children's TSFiles written (no metadata changed)
	StepReport    Step = 6 // the parent fenced, the report about to be sent
	StepCommitted Step = 7 // the master committed the split
)

func (s Step) String() string {
	return [...]string{"?", "prepare", "allocate", "mid-row", "split-logs", "tsfiles", "report", "committed"}[max(0, min(int(s), 7))]
}

// Tablet is the parent as a split needs it; the tserver's
// *replica.Replica implements it.
type Tablet interface {
	ID() string
	Scan(ctx context.Context, start, end []byte, limit int, opts tablet.ReadOptions, fn func(tablet.Row) bool) error
	HasStandby() bool
	SwapBuffers() bool
	FlushStandby(ctx context.Context) (tsfile.Info, error)
	Files() []tsfile.Info
}

// Child is one child as the report names it.
type Child struct {
	ID         string
	Start, End []byte // [Start, End); End nil: unbounded
	TSFiles    []tsfile.Info
	// ChildLog is the child's log during the split (its dual-written
	// writes), relative to the shared root.
	ChildLog string
}

// Report is step 6's report to the master.
type Report struct {
	ParentID string
	Epoch    int64
	Children [2]Child
}

// Master is the master as a split needs it.
type Master interface {
	// AllocateTabletIDs reserves n fresh tablet ids (step 2).
	AllocateTabletIDs(ctx context.Context, n int) ([]string, error)
	// ReportSplit asks the master to replace the parent by the children in
	// one transaction (step 6). It returns nil once committed (a retried
	// report of a committed split also answers nil), an error wrapping
	// ErrRefused only when the master's refusal is definite, any other
	// error when the outcome is unknown. A refusal of a retried report (an
	// earlier attempt may have committed with its reply lost) is outcome
	// unknown, not ErrRefused (doc.go).
	ReportSplit(ctx context.Context, r Report) error
}

// Options are what every split of one tserver shares.
type Options struct {
	FS   vfs.FS
	Root string
	// Blocks is the block store the children's TSFiles are written to.
	Blocks blockstore.Manager
	// Store is the UUID naming Blocks in tablet metadata; the children's
	// TSFiles carry it (tsfile.Info.Store).
	Store string
	// OpenFile opens one of the parent's TSFiles (from whichever store
	// holds it).
	OpenFile func(tsfile.Info) (*tsfile.Reader, error)
	// Exclusive runs a function under the checkpoint's global state lock
	// held exclusively (checkpoint.Coordinator.Exclusive); writers hold it
	// shared from before their WAL append to after their apply.
	Exclusive func(func())
	// BeginSplit enters the preparing state (checkpoint.Coordinator's).
	BeginSplit func() (end func())
	// Checkpoint runs a checkpoint; Run calls it first when the parent
	// holds a standby buffer left by a failed flush (or by an earlier
	// failed split), which a split cannot snapshot with the active one.
	Checkpoint func(ctx context.Context) error
	Master     Master
	// Hook, when set, is called after each step; an error aborts the
	// split there as a failure of that step would. Tests inject faults.
	Hook     func(Step) error
	PageSize int
	Logger   *slog.Logger
}

// Request names one split.
type Request struct {
	TabletID   string
	Epoch      int64
	Start, End []byte
	// Row is the split row; nil: the middle row.
	Row    []byte
	Tablet Tablet
	// Route is called under the exclusive state lock at step 4 with the
	// split's DualWrite, and again with nil when a failed split stops
	// dual-writing: from the first call every write of the parent goes
	// through DualWrite.Admit.
	Route func(*DualWrite)
	// Compression gives the codec of each family's pages in the children's
	// TSFiles (the parent's schema); nil: tsfile.DefaultCompression.
	Compression func(family string) tsfile.Compression
}

// Result is a committed split.
type Result struct {
	Report Report
	Mid    []byte
	// Took is the split's duration; Blocked how long the parent refused
	// writes (fence to commit).
	Took, Blocked time.Duration
}

// ChildLogPath is the path, relative to the shared root, of a child's
// child log.
func ChildLogPath(childID string) string { return filepath.Join("splitlog", childID+".log") }

// Run splits one tablet, following the six steps in doc.go.
// A nil error means the master committed the split: the caller unloads
// the parent and loads the children. On any other error the parent is
// intact; unless the error wraps ErrOutcomeUnknown (then the parent stays
// fenced and the caller must unload it), it goes on serving and the split
// may be retried.
func Run(ctx context.Context, o Options, req Request) (res *Result, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	began := time.Now()
	log := o.Logger.With("tablet", req.TabletID, "epoch", req.Epoch)
	hook := func(s Step) error {
		if o.Hook == nil {
			return nil
		}
		if err := o.Hook(s); err != nil {
			return fmt.Errorf("split: tablet %s at step %d (%s): %w", req.TabletID, s, s, err)
		}
		return nil
	}
	if req.Row != nil && (bytes.Compare(req.Row, req.Start) <= 0 || req.End != nil && bytes.Compare(req.Row, req.End) >= 0) {
		return nil, fmt.Errorf("%w: row %q, tablet [%q, %q)", ErrBadRow, req.Row, req.Start, req.End)
	}

	if req.Tablet.HasStandby() && o.Checkpoint != nil {
		if err := o.Checkpoint(ctx); err != nil {
			return nil, fmt.Errorf("split: flush the pending standby buffer first: %w", err)
		}
	}

	// Step 1: the preparing state. No checkpoint runs until end().
	end := o.BeginSplit()
	defer end()
	if req.Tablet.HasStandby() {
		return nil, ErrBusy
	}
	if err := hook(StepPrepare); err != nil {
		return nil, err
	}

	// Step 2: two fresh tablet ids.
	ids, err := o.Master.AllocateTabletIDs(ctx, 2)
	if err != nil {
		return nil, fmt.Errorf("split: allocate tablet ids: %w", err)
	}
	if len(ids) != 2 {
		return nil, fmt.Errorf("split: master allocated %d tablet ids, want 2", len(ids))
	}
	if err := hook(StepAllocate); err != nil {
		return nil, err
	}

	// Step 3: the middle row, a row boundary.
	mid := req.Row
	if mid == nil {
		if mid, err = middleRow(ctx, req.Tablet, req.Start, req.End); err != nil {
			return nil, err
		}
	}
	rep := Report{ParentID: req.TabletID, Epoch: req.Epoch, Children: [2]Child{
		{ID: ids[0], Start: req.Start, End: mid, ChildLog: ChildLogPath(ids[0])},
		{ID: ids[1], Start: mid, End: req.End, ChildLog: ChildLogPath(ids[1])},
	}}
	if err := hook(StepMidRow); err != nil {
		return nil, err
	}

	// Step 4: the child logs, then dual-write and the snapshot point in
	// one exclusive section of the state lock.
	dw := &DualWrite{mid: mid, ids: [2]string{ids[0], ids[1]}}
	var children []tsfile.Info // written so far, deleted on failure
	routed := false
	defer func() {
		if err == nil || errors.Is(err, ErrOutcomeUnknown) {
			return
		}
		// A failure before the commit: stop dual-writing, then remove the
		// leftovers. The parent never stopped serving.
		if routed {
			o.Exclusive(func() { req.Route(nil) })
		}
		dw.unfence()
		if derr := dw.drain(true); derr != nil {
			log.Warn("split: removing child logs", "err", derr)
		}
		deleteFiles(o, children, log)
	}()
	for i := range dw.logs {
		if dw.logs[i], err = createSplitLog(o, ids[i]); err != nil {
			return nil, err
		}
	}
	var swapped, pending bool
	o.Exclusive(func() {
		req.Route(dw)
		swapped = req.Tablet.SwapBuffers()
		pending = req.Tablet.HasStandby()
	})
	routed = true
	if pending && !swapped {
		return nil, ErrBusy
	}
	if err := hook(StepChildLogs); err != nil {
		return nil, err
	}

	// Step 5: the children's TSFiles from the snapshot: the swapped-out
	// buffer (flushed to a temporary TSFile) and the parent's TSFiles.
	files, err := writeChildren(ctx, o, req, &rep, swapped, &children)
	if err != nil {
		return nil, err
	}
	rep.Children[0].TSFiles, rep.Children[1].TSFiles = files[0], files[1]
	if err := hook(StepTSFiles); err != nil {
		return nil, err
	}

	// Step 6: fence the parent, report, commit.
	dw.fence()
	fenced := time.Now()
	// Every admitted write has ended (fence waited for them). A write
	// whose split-log append failed is in the parent's log and buffer but
	// not in its child's log: the children would miss it, so the
	// split stops here and the parent keeps its rows.
	if ferr := dw.failed(); ferr != nil {
		return nil, fmt.Errorf("split: tablet %s: a dual write failed, the split is abandoned: %w", req.TabletID, ferr)
	}
	if err := hook(StepReport); err != nil {
		return nil, err
	}
	if err := o.Master.ReportSplit(ctx, rep); err != nil {
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
		dw.drain(false)
		return nil, fmt.Errorf("%w: tablet %s: %w", ErrOutcomeUnknown, req.TabletID, err)
	}
	blocked := time.Since(fenced)
	// Committed: the children own the rows. The child logs stay (the
	// children replay them when they load, here or elsewhere).
	if derr := dw.drain(false); derr != nil {
		log.Warn("split: closing child logs", "err", derr)
	}
	if err := hook(StepCommitted); err != nil {
		// Past the commit a failure changes nothing: the split is done.
		log.Warn("split: after commit", "err", err)
	}
	res = &Result{Report: rep, Mid: mid, Took: time.Since(began), Blocked: blocked}
	log.Info("tablet split", "mid", string(mid), "children", []string{ids[0], ids[1]},
		"tsfiles", []int{len(files[0]), len(files[1])}, "took", res.Took, "blocked", blocked)
	return res, nil
}

func createSplitLog(o Options, id string) (*wal.SingleFile, error) {
	f, err := wal.CreateSingle(o.FS, filepath.Join(o.Root, ChildLogPath(id)), id)
	if err != nil {
		return nil, fmt.Errorf("split: create child log of %s: %w", id, err)
	}
	return f, nil
}

// writeChildren writes each child's part of the snapshot as one TSFile
// (none for an empty part). swapped says whether step 4 swapped a buffer
// out, which is flushed to a temporary TSFile first and deleted after.
func writeChildren(ctx context.Context, o Options, req Request, rep *Report, swapped bool, made *[]tsfile.Info) ([2][]tsfile.Info, error) {
	var out [2][]tsfile.Info
	var readers []*tsfile.Reader
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	if swapped {
		sb, err := req.Tablet.FlushStandby(ctx)
		if err != nil {
			return out, fmt.Errorf("split: flush the swapped buffer: %w", err)
		}
		defer deleteFiles(o, []tsfile.Info{sb}, o.Logger)
		r, err := tsfile.Open(o.Blocks, sb.FooterRef(), tsfile.ReaderOptions{})
		if err != nil {
			return out, fmt.Errorf("split: open the swapped buffer's TSFile: %w", err)
		}
		readers = append(readers, r)
	}
	for _, f := range req.Tablet.Files() { // newest first, after the buffer
		r, err := o.OpenFile(f)
		if err != nil {
			return out, fmt.Errorf("split: open TSFile %s: %w", f.FooterRef(), err)
		}
		readers = append(readers, r)
	}
	for i, ch := range rep.Children {
		if len(readers) == 0 {
			break
		}
		its := make([]memstore.Iterator, len(readers))
		for j, r := range readers {
			its[j] = r.NewIterator(nil, true)
		}
		src := memstore.Merge(its...)
		info, err := tsfile.Write(ctx, o.Blocks, &clipped{src: src, start: ch.Start, end: ch.End},
			tsfile.WriterOptions{Store: o.Store, TabletID: ch.ID, PageSize: o.PageSize, Compression: req.Compression})
		src.Close()
		if errors.Is(err, tsfile.ErrEmpty) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("split: write TSFile of child %s: %w", ch.ID, err)
		}
		*made = append(*made, info)
		out[i] = []tsfile.Info{info}
	}
	return out, nil
}

// deleteFiles deletes TSFiles no metadata names, which the split wrote
// into o.Blocks (DeleteFiles).
func deleteFiles(o Options, files []tsfile.Info, log *slog.Logger) {
	DeleteFiles(o.Blocks, o.Store, files, log)
}

// DeleteFiles deletes TSFiles no metadata names from blocks, the store
// named store (best effort: blocks left behind are orphans, which the
// checkpoint's orphan pass collects). A file of another store is never
// deleted here: its block IDs mean nothing in blocks.
func DeleteFiles(blocks blockstore.Manager, store string, files []tsfile.Info, log *slog.Logger) {
	var own []tsfile.Info
	for _, f := range files {
		if f.Store != store {
			log.Warn("not deleting a TSFile of another store", "footer", f.FooterRef())
			continue
		}
		own = append(own, f)
	}
	if len(own) == 0 {
		return
	}
	tx := blocks.NewDeletionTransaction()
	for _, f := range own {
		for _, b := range f.Blocks {
			tx.AddDeletedBlock(b)
		}
	}
	if _, err := tx.CommitDeletedBlocks(); err != nil {
		log.Warn("deleting unused TSFile blocks", "err", err)
	}
}
