package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// Options configure a Coordinator.
type Options struct {
	// Log is rolled at step 4. Required.
	Log Roller
	// Meta records step 7 and compactions. Required.
	Meta Metadata
	// MemLimit triggers a checkpoint in Run when the write buffers of all
	// tablets together hold more bytes. Default 256 MiB.
	MemLimit int64
	// HardLimit is the buffer memory past which Throttle makes writers
	// wait for a checkpoint to free memory. Default 2 × MemLimit.
	HardLimit int64
	// Tablets lists the tablets served here; the coordinator calls it at
	// each step that walks them. Required.
	Tablets func() []Tablet

	// Blocks is the block store, for deleting replaced TSFiles and
	// orphans. Optional: without it nothing is deleted.
	Blocks blockstore.Manager
	// Store is the UUID naming Blocks in tablet metadata (tsfile.Info.Store).
	// Block IDs are unique only inside one store: only blocks of files whose
	// Info.Store is Store are ever deleted from Blocks. A replaced file of
	// another store (a tablet that moved here still reads it) is left to
	// that store's owner, whose orphan pass deletes it once no tablet's
	// metadata names it.
	Store string
	// Refs answers log GC and orphan collection. Optional: without it
	// neither runs.
	Refs References
	// LogGC deletes log files (usually the same *wal.Log as Log).
	// Optional: without it no log file is deleted.
	LogGC LogDeleter

	// Interval is how often Run looks at memory and compaction needs.
	// Default 20 ms.
	Interval time.Duration
	// FlushParallelism bounds the standby buffers written at once in step 6.
	// Default 4.
	FlushParallelism int
	// MaxTSFiles: a tablet with more TSFiles gets a merging compaction.
	// Default 6; negative disables compaction.
	MaxTSFiles int
	// MergeWidth is the number of consecutive files a merging compaction
	// merges. Default MaxTSFiles/2+1 (at least 2).
	MergeWidth int
	// MajorEvery: a tablet that has TSFiles gets a major compaction once
	// this long has passed since its last one (a requested Compact counts)
	// or, before its first one here, since Run first saw it serving (its
	// load on this tserver; a restart starts the clock again). Default
	// 24 h; negative disables the periodic major compaction (Compact can
	// still be asked for one).
	MajorEvery time.Duration
	// GarbageShare: a tablet whose GarbageEstimator estimates that a major
	// compaction would drop more than this share of its files' entries
	// (tombstones and the cells they, the GC rule or a dropped family
	// hide) gets a major compaction, unless its only file is the output of
	// its last major compaction (what that could not drop, another would
	// not either). Default 0.2; negative disables the trigger.
	GarbageShare float64
	// CompactionDuty bounds the share of the time background compactions
	// run (Run rests after each for its duration × (1−duty)/duty), so
	// that on a machine short of CPU or disk they cannot starve writes and
	// checkpoints however fast CompactionRate lets them read. Default 0.2;
	// 1 or more: no rest.
	CompactionDuty float64
	// CompactionRate bounds the bytes per second a compaction reads, so it
	// does not starve writers. Default 64 MiB/s; negative: unthrottled.
	CompactionRate int64
	// BacklogFiles: a tablet with more TSFiles is in backlog mode (its
	// compactions fell behind): the tablets with the most files are
	// compacted first, back to back without the CompactionDuty rest, by a
	// merging compaction wide enough to bring the tablet back to
	// MaxTSFiles (or a major one when one is due). Default 2 × MaxTSFiles;
	// negative, or MaxTSFiles negative: no backlog mode.
	BacklogFiles int
	// StopFiles: writes to a tablet with more TSFiles are delayed
	// (SlowWrite, WriteDelay: 1 ms for the first file over, doubling with
	// each further one, at most MaxWriteDelay), and its compactions are
	// not paced to CompactionRate either. Default 2 × BacklogFiles (at
	// least BacklogFiles); negative: writes are never slowed.
	StopFiles int
	// MaxWriteDelay bounds the delay of one write by StopFiles. Default
	// 250 ms; at most 1 s.
	MaxWriteDelay time.Duration
	// OrphanGrace is how long a block must stay unreferenced before
	// the periodic orphan pass deletes it. Default 10 minutes.
	OrphanGrace time.Duration
	// OrphanEvery is the period of the orphan pass in Run. Default 10
	// minutes; negative disables it.
	OrphanEvery time.Duration

	// Lease reports whether this node may commit now (a tserver: its lease
	// from the master is valid). Without it no checkpoint, compaction,
	// commit or deletion starts, and what is in flight is abandoned before
	// its commit or its deletions (docs/design.md 'Fencing'). nil: always.
	Lease func() bool

	// Logger receives progress and errors. Default slog.Default().
	Logger *slog.Logger

	// OnCheckpoint, if set, is called after each checkpoint whose metadata
	// commit succeeded, with its result and its whole duration (metrics).
	OnCheckpoint func(res Result, took time.Duration)
	// OnCompaction, if set, is called after each committed compaction with
	// the bytes of the files it read and of the file it wrote (metrics).
	OnCompaction func(major bool, inBytes, outBytes int64, took time.Duration)

	// hook, when set (tests), is called after each step of Checkpoint
	// with the step's number; an error stops the checkpoint there.
	hook func(step int) error
	// compactHook, when set (tests), is called between a compaction's
	// write of its output and its commit.
	compactHook func(t Tablet)
}

func (o Options) withDefaults() Options {
	if o.MemLimit <= 0 {
		o.MemLimit = 256 << 20
	}
	if o.HardLimit <= 0 {
		o.HardLimit = 2 * o.MemLimit
	}
	if o.Interval <= 0 {
		o.Interval = 20 * time.Millisecond
	}
	if o.FlushParallelism <= 0 {
		o.FlushParallelism = 4
	}
	if o.MaxTSFiles == 0 {
		o.MaxTSFiles = 6
	}
	if o.MergeWidth <= 0 {
		o.MergeWidth = max(2, o.MaxTSFiles/2+1)
	}
	if o.MajorEvery == 0 {
		o.MajorEvery = 24 * time.Hour
	}
	if o.GarbageShare == 0 {
		o.GarbageShare = 0.2
	}
	if o.CompactionDuty <= 0 {
		o.CompactionDuty = 0.2
	}
	if o.CompactionRate == 0 {
		o.CompactionRate = 64 << 20
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = 10 * time.Minute
	}
	if o.OrphanEvery == 0 {
		o.OrphanEvery = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o.backlogDefaults()
}

// Coordinator runs checkpoints, compactions, log GC and orphan collection
// for the tablets of one tserver. Its methods are safe for concurrent use.
type Coordinator struct {
	opts  Options
	log   *slog.Logger
	state sync.RWMutex // the global state lock: AdmitWrite, Exclusive, Checkpoint steps 2–5

	// slot serialises checkpoints, compaction commits' block deletions
	// and the orphan pass; a buffered channel so waiting honours ctx.
	slot chan struct{}

	// split bookkeeping: a checkpoint waits while splits > 0; BeginSplit
	// waits while a checkpoint runs or waits.
	splitMu    sync.Mutex
	splits     int
	ckptBusy   bool
	ckptWant   int
	splitCh    chan struct{} // closed and replaced on every change
	windows    windowStats
	compactMu  sync.Mutex // one compaction at a time
	majorMu    sync.Mutex
	lastMajor  map[string]time.Time           // by tablet: the last major compaction, or when first seen
	majorOut   map[string]blockstore.BlockRef // by tablet: the file its last major compaction wrote
	metaMu     sync.Mutex                     // serialises Meta.Commit and the tablet state below
	tabs       map[string]*tabletState
	orphanSeen map[blockstore.BlockID]time.Time

	memTotal atomic.Int64 // buffer memory as Run last measured it

	statsMu sync.Mutex
	stats   Stats

	running running // running.go: what the status page shows as running
	backlog backlog // backlog.go: file counts for the backlog rule
}

// tabletState is what the coordinator remembers of one load of a tablet
// between checkpoints. Guarded by metaMu.
//
// It belongs to the Tablet value it was made for (owner), not to the
// tablet id: a tablet unloaded here (moved away, or its load failed) and
// loaded again later is a new Tablet, whose buffers hold what the new load
// replayed and took since. A file the old load flushed, whose commit failed
// or was refused, holds none of that; committed for the new load with the
// new log position, and installed in place of its standby buffer, it would
// lose every write since the old flush. So a state whose owner is another
// value is dropped (its file left to the orphan pass: a failed commit's
// outcome may be unknown, so the metadata may name it).
type tabletState struct {
	owner Tablet
	// sealedAt is the position rolled to when the current standby buffer
	// was sealed: once it is flushed, every unflushed write of the tablet
	// lies at or after it. nil when no standby is pending or its roll failed.
	sealedAt *wal.Position
	// flushed is the TSFile of the standby buffer, written but not yet
	// installed (step 7 failed, or its install did): the next checkpoint
	// commits it instead of flushing the buffer again.
	flushed *tsfile.Info
	// compacted is a compaction whose commit's outcome is unknown (the
	// metadata may name its output or its run): every later update of the
	// load names the output in place of the run, with the run as
	// Replaced, until one is accepted and the compaction installed.
	compacted *pendingCompaction
}

// pendingCompaction is a compaction written but not yet installed.
type pendingCompaction struct {
	run   []tsfile.Info // the replaced files, in read-set order
	info  tsfile.Info   // the output; Footer 0: nothing was left
	major bool
}

func (p *pendingCompaction) refs() []blockstore.BlockRef {
	out := make([]blockstore.BlockRef, len(p.run))
	for i, f := range p.run {
		out[i] = f.FooterRef()
	}
	return out
}

// Stats are cumulative counters.
type Stats struct {
	Checkpoints    int64
	FailedCommits  int64
	FailedFlushes  int64
	FlushedTablets int64
	Compactions    int64
	MajorCompacts  int64
	// GarbageMajors counts the major compactions Run started because of
	// Options.GarbageShare (also counted in MajorCompacts).
	GarbageMajors int64
	// CompactedBytes is the bytes compactions wrote (their output files):
	// with the bytes flushes wrote, the write amplification.
	CompactedBytes int64
	// FlushedBytes is the bytes of the TSFiles checkpoints flushed.
	FlushedBytes int64
	// MaxThrottle is the longest a Throttle call waited for the write
	// buffers to drop below HardLimit (a writer's hard-limit stall).
	MaxThrottle time.Duration
	// BacklogCompactions counts the compactions Run started for a tablet
	// in backlog mode (Options.BacklogFiles), which skip the duty rest.
	BacklogCompactions int64
	// MaxFiles is the most TSFiles a tablet here had at any look.
	MaxFiles int
	// SlowedWrites counts the writes SlowWrite delayed, SlowdownTime the
	// time they waited in all, MaxSlowdown the longest one wait.
	SlowedWrites    int64
	SlowdownTime    time.Duration
	MaxSlowdown     time.Duration
	DeletedBlocks   int64
	DeletedOrphans  int64
	DeletedLogFiles int64
}

// New returns a coordinator. It starts nothing; call Run for the
// background work.
func New(opts Options) *Coordinator {
	opts = opts.withDefaults()
	return &Coordinator{
		opts:       opts,
		log:        opts.Logger.With("component", "checkpoint"),
		slot:       make(chan struct{}, 1),
		splitCh:    make(chan struct{}),
		tabs:       map[string]*tabletState{},
		orphanSeen: map[blockstore.BlockID]time.Time{},
		lastMajor:  map[string]time.Time{},
		majorOut:   map[string]blockstore.BlockRef{},
		windows:    newWindowStats(4096),
		backlog:    newBacklog(),
	}
}

// AdmitWrite takes the global state lock shared for one write (or one
// batch of writes): the caller holds it from before its WAL append until
// its buffer apply, and calls release exactly once after the apply. While
// any write is admitted no checkpoint swaps buffers or rolls the log, so a
// record never lands in a log file older than the position that covers
// the buffer it was applied to. The lock itself stays private: the write
// path and the split reach it only through AdmitWrite and Exclusive.
func (c *Coordinator) AdmitWrite() (release func()) {
	c.state.RLock()
	return c.state.RUnlock
}

// Exclusive runs fn with the global state lock held exclusively: no write
// is between its WAL append and its apply while fn runs. fn must do no
// I/O and wait for nothing (every writer waits for it); a split uses it to
// switch on dual-writing and take its snapshot in one step.
func (c *Coordinator) Exclusive(fn func()) {
	c.state.Lock()
	defer c.state.Unlock()
	fn()
}

// Stats returns the counters.
func (c *Coordinator) Stats() Stats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.stats
}

func (c *Coordinator) count(f func(s *Stats)) {
	c.statsMu.Lock()
	f(&c.stats)
	c.statsMu.Unlock()
}

// LockWindows returns the median, 99th percentile and maximum time the
// exclusive state lock was held, over the last 4096 checkpoints.
func (c *Coordinator) LockWindows() (p50, p99, max time.Duration) {
	return c.windows.quantiles()
}

// LockWaits is the same for the time Lock waited for in-flight writers
// (each holding the shared lock across its WAL sync) before steps 3–4.
func (c *Coordinator) LockWaits() (p50, p99, max time.Duration) {
	return c.windows.waitQuantiles()
}

func (c *Coordinator) acquire(ctx context.Context) error {
	select {
	case c.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Coordinator) release() { <-c.slot }

// BeginSplit registers a running split: checkpoints wait until every
// registered split ended. It waits while a checkpoint runs or is waiting
// (a checkpoint ends on its own: its steps do not wait for splits). Call
// end exactly once.
func (c *Coordinator) BeginSplit() (end func()) {
	c.splitMu.Lock()
	for c.ckptBusy || c.ckptWant > 0 {
		ch := c.splitCh
		c.splitMu.Unlock()
		<-ch
		c.splitMu.Lock()
	}
	c.splits++
	c.splitMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.splitMu.Lock()
			c.splits--
			c.changedLocked()
			c.splitMu.Unlock()
		})
	}
}

func (c *Coordinator) changedLocked() {
	close(c.splitCh)
	c.splitCh = make(chan struct{})
}

// beginCheckpoint is step 1: it waits until no split runs, then marks a
// checkpoint busy so that no split starts.
func (c *Coordinator) beginCheckpoint(ctx context.Context) error {
	c.splitMu.Lock()
	c.ckptWant++
	for c.splits > 0 || c.ckptBusy {
		ch := c.splitCh
		c.splitMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.splitMu.Lock()
			c.ckptWant--
			c.changedLocked()
			c.splitMu.Unlock()
			return ctx.Err()
		}
		c.splitMu.Lock()
	}
	c.ckptWant--
	c.ckptBusy = true
	c.splitMu.Unlock()
	c.running.beginCheckpoint()
	return nil
}

func (c *Coordinator) endCheckpoint() {
	c.running.endCheckpoint()
	c.splitMu.Lock()
	c.ckptBusy = false
	c.changedLocked()
	c.splitMu.Unlock()
}

// stateOf returns the state of t's load (see tabletState), a fresh one if
// the id's state belonged to an earlier load. Called with metaMu held.
func (c *Coordinator) stateOf(t Tablet) *tabletState {
	ts := c.tabs[t.ID()]
	if ts == nil || ts.owner != t {
		if ts != nil && ts.flushed != nil {
			c.log.Warn("checkpoint: dropping a flushed TSFile of an earlier load of the tablet",
				"tablet", t.ID(), "footer", ts.flushed.FooterRef())
		}
		ts = &tabletState{owner: t}
		c.tabs[t.ID()] = ts
	}
	return ts
}

// forgetStates drops the states of loads no longer served here, so that
// the orphan pass stops keeping their flushed files. Takes metaMu.
func (c *Coordinator) forgetStates(tablets []Tablet) {
	here := make(map[Tablet]bool, len(tablets))
	for _, t := range tablets {
		here[t] = true
	}
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	for id, ts := range c.tabs {
		if !here[ts.owner] {
			delete(c.tabs, id)
		}
	}
}

// Result describes one checkpoint.
type Result struct {
	// Position is the log position rolled to at step 4 (zero if the roll failed).
	Position wal.Position
	// Swapped is the number of tablets whose buffers were swapped.
	Swapped int
	// Flushed is the number of standby buffers written as TSFiles.
	Flushed int
	// Committed is the number of tablets whose metadata step 7 updated.
	Committed int
	// LockWait is how long step 2 waited for in-flight writers; LockHeld
	// how long the exclusive lock was held (steps 2–5).
	LockWait, LockHeld time.Duration
	// Flush is the duration of step 6, Commit that of step 7.
	Flush, Commit time.Duration
	// FlushedBytes is the size of the TSFiles step 6 wrote.
	FlushedBytes int64
	// Covered lists the tablets whose update step 7 committed and whose
	// files now hold everything written to them before step 2 (their
	// buffers swapped at step 3, or empty): a backup's cut (docs/design.md
	// 'Backups'). A tablet that only flushed a standby left by an earlier
	// checkpoint is not among them: its active buffer was not swapped.
	Covered []string
}

// Checkpoint runs the seven steps of a checkpoint (doc.go) once:
//
//  1. wait until no split runs (and the previous checkpoint finished);
//  2. take the state lock exclusively;
//  3. swap active ↔ standby buffer of every serving, non-empty tablet;
//  4. roll the WAL to a new file;
//  5. release the lock;
//  6. write every standby buffer as a TSFile and free it (writes go on);
//  7. record, per tablet, the full TSFile list and the single log position
//     of the rolled-to file in the metadata.
//
// A failure before step 7 changes no metadata: the old positions still
// cover the data. A standby buffer whose flush failed stays and is flushed
// first by the next checkpoint; a failed step 7 is retried by the next one.
func (c *Coordinator) Checkpoint(ctx context.Context) (Result, error) {
	return c.checkpoint(ctx, nil)
}

// CheckpointTablets is Checkpoint with only the serving tablets keep
// accepts taking part: theirs are the only buffers swapped and flushed
// and the only log positions moved to the rolled-to file; the others keep
// their buffers and positions, as a tablet that did not serve when a
// checkpoint began does. A tserver flushes a tablet it is about to hand
// to another this way, so the next owner has next to nothing to replay.
func (c *Coordinator) CheckpointTablets(ctx context.Context, keep func(Tablet) bool) (Result, error) {
	return c.checkpoint(ctx, keep)
}

func (c *Coordinator) checkpoint(ctx context.Context, keep func(Tablet) bool) (Result, error) {
	var res Result
	began := time.Now()
	if !c.leaseValid() {
		return res, ErrNoLease
	}
	if err := c.acquire(ctx); err != nil {
		return res, err
	}
	defer c.release()
	// Step 1.
	if err := c.beginCheckpoint(ctx); err != nil {
		return res, err
	}
	defer c.endCheckpoint()
	if err := c.step(1); err != nil {
		return res, err
	}
	parts := c.participants(keep)
	pos, err := c.swapAndRoll(parts, &res)
	if err != nil {
		return res, err
	}
	for i := 2; i <= 5; i++ {
		if err := c.step(i); err != nil {
			return res, err
		}
	}
	flushErrs := c.flushStandbys(ctx, parts, &res)
	var errs []error
	for _, err := range flushErrs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.step(6); err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	if err := c.commitFlushed(ctx, parts, pos, flushErrs, &res); err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	c.count(func(s *Stats) { s.Checkpoints++ })
	if c.opts.OnCheckpoint != nil {
		c.opts.OnCheckpoint(res, time.Since(began))
	}
	if err := c.step(7); err != nil {
		errs = append(errs, err)
	}
	c.log.Debug("checkpoint done", "position", pos.String(), "swapped", res.Swapped, "flushed", res.Flushed,
		"committed", res.Committed, "lock_held", res.LockHeld, "lock_wait", res.LockWait, "flush", res.Flush, "commit", res.Commit)
	return res, errors.Join(errs...)
}

// part is a tablet that takes part in a checkpoint: serving when the
// checkpoint began. swapped says whether step 3 swapped its buffers.
type part struct {
	t       Tablet
	swapped bool
	pending bool // a standby left by an earlier failed flush
	// clean: no standby was left over and the tablet's writes were
	// fenced (Fenced) when step 3 ran, so this flush covers every write
	// it took.
	clean bool
}

// participants lists the tablets that take part. It is decided before
// the lock, to keep the window short: a standby appears or goes only
// through checkpoints, which this one excludes, and a tablet that starts
// serving meanwhile just waits for the next checkpoint. keep, when not
// nil, picks among the serving tablets.
func (c *Coordinator) participants(keep func(Tablet) bool) []part {
	tablets := c.opts.Tablets()
	parts := make([]part, 0, len(tablets))
	for _, t := range tablets {
		if t.Serving() && (keep == nil || keep(t)) {
			parts = append(parts, part{t: t, pending: t.HasStandby()})
		}
	}
	return parts
}

// swapAndRoll is steps 2 to 5: under the exclusive state lock, swap the
// buffers of every part without a leftover standby (step 3) and roll the
// log (step 4); then note where each swapped standby was sealed. A failed
// roll leaves the swapped standbys to the next checkpoint.
func (c *Coordinator) swapAndRoll(parts []part, res *Result) (wal.Position, error) {
	// Step 2.
	t0 := time.Now()
	c.state.Lock()
	t1 := time.Now()
	// Step 3.
	for i := range parts {
		if !parts[i].pending {
			parts[i].swapped = parts[i].t.SwapBuffers()
			f, ok := parts[i].t.(Fenced)
			parts[i].clean = ok && f.WritesFenced()
		}
	}
	// Step 4.
	pos, rollErr := c.opts.Log.Roll()
	// Step 5.
	c.state.Unlock()
	t2 := time.Now()
	res.LockWait, res.LockHeld = t1.Sub(t0), t2.Sub(t1)
	c.windows.add(res.LockWait, res.LockHeld)

	c.metaMu.Lock()
	for _, p := range parts {
		if p.swapped {
			ts := c.stateOf(p.t)
			if rollErr == nil {
				ts.sealedAt = &pos
			} else {
				ts.sealedAt = nil
			}
		}
	}
	c.metaMu.Unlock()
	if rollErr != nil {
		// The swapped standbys hold data of the current file; they are
		// flushed by the next checkpoint, which then keeps the old
		// positions for them.
		c.log.Error("checkpoint: roll failed", "err", rollErr)
		return pos, fmt.Errorf("checkpoint: roll: %w", rollErr)
	}
	res.Position = pos
	for _, p := range parts {
		if p.swapped {
			res.Swapped++
		}
	}
	return pos, nil
}

// flushStandbys is step 6: each standby (swapped now, or left by a failed
// flush) that has no flushed file pending is written as a TSFile, at most
// FlushParallelism at once. It returns each part's flush error.
func (c *Coordinator) flushStandbys(ctx context.Context, parts []part, res *Result) []error {
	t3 := time.Now()
	flushErrs := make([]error, len(parts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.opts.FlushParallelism)
	c.metaMu.Lock()
	pendingFile := make([]bool, len(parts)) // a flushed file not yet committed: not flushed again
	for i, p := range parts {
		pendingFile[i] = c.stateOf(p.t).flushed != nil
	}
	c.metaMu.Unlock()
	for i, p := range parts {
		if !p.swapped && !p.pending || pendingFile[i] {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			info, err := p.t.FlushStandby(ctx)
			if err != nil {
				flushErrs[i] = fmt.Errorf("%w: tablet %s: %w", ErrFlush, p.t.ID(), err)
				return
			}
			c.metaMu.Lock()
			c.stateOf(p.t).flushed = &info
			res.FlushedBytes += info.Size
			c.metaMu.Unlock()
		}()
	}
	wg.Wait()
	res.Flush = time.Since(t3)
	failed := 0
	for i, err := range flushErrs {
		if err != nil {
			failed++
		} else if (parts[i].swapped || parts[i].pending) && !pendingFile[i] {
			res.Flushed++
		}
	}
	if failed > 0 {
		c.count(func(s *Stats) { s.FailedFlushes += int64(failed) })
		c.log.Error("checkpoint: flush failed", "tablets", failed, "err", errors.Join(flushErrs...))
	}
	c.count(func(s *Stats) { s.FlushedTablets += int64(res.Flushed); s.FlushedBytes += res.FlushedBytes })
	return flushErrs
}

// commitFlushed is step 7: one metadata update per part whose flush did
// not fail, naming its files and the log position its data now starts
// at, committed through commit (fenced by load and lease); each accepted
// update installs the part's flushed file.
func (c *Coordinator) commitFlushed(ctx context.Context, parts []part, pos wal.Position, flushErrs []error, res *Result) error {
	t4 := time.Now()
	c.metaMu.Lock()
	var ups []Update
	covers := map[string]bool{}
	for i, p := range parts {
		if flushErrs[i] != nil {
			continue // its old positions still cover its data
		}
		ts := c.stateOf(p.t)
		if p.t.HasStandby() && ts.flushed == nil {
			continue
		}
		u := c.updateLocked(p.t, ts)
		switch {
		case p.clean:
			// Everything it took is in TSFiles now, and it takes no more.
			u.LogClean = true
			covers[p.t.ID()] = true
		case p.swapped || !p.pending:
			// Everything written before the roll is in TSFiles now.
			u.LogPositions = []wal.Position{pos}
			covers[p.t.ID()] = true
		case ts.sealedAt != nil:
			// A leftover standby: the active buffer holds what was
			// written since the roll that sealed it.
			u.LogPositions = []wal.Position{*ts.sealedAt}
		default:
			// Sealed by a failed roll: keep the positions.
		}
		ups = append(ups, u)
	}
	committed, commitErr := c.commit(ctx, ups, func(u Update, ts *tabletState) error {
		t := u.Load
		if ts.flushed != nil {
			if err := t.InstallFlushed(*ts.flushed); err != nil {
				// The metadata names the file: it stays pending, named
				// by the next update, and is installed by a later one.
				return fmt.Errorf("checkpoint: install flushed TSFile of tablet %s: %w", t.ID(), err)
			}
			c.noteFiles(t.ID(), len(t.Files()))
		}
		ts.flushed, ts.sealedAt = nil, nil
		if covers[t.ID()] {
			res.Covered = append(res.Covered, t.ID())
		}
		return nil
	})
	res.Committed = committed
	c.metaMu.Unlock()
	res.Commit = time.Since(t4)
	if commitErr != nil {
		c.count(func(s *Stats) { s.FailedCommits++ })
		c.log.Error("checkpoint: metadata commit failed or refused; the next checkpoint retries", "committed", committed, "err", commitErr)
		return fmt.Errorf("%w: %w", ErrCommit, commitErr)
	}
	return nil
}

// updateLocked is the update of t's load as its state stands: its read
// set, before it a flushed file not yet installed, and a pending
// compaction's output in place of its run (which it replaces). Log
// positions are left to the caller. Called with metaMu held.
func (c *Coordinator) updateLocked(t Tablet, ts *tabletState) Update {
	files := t.Files()
	if ts.flushed != nil {
		files = append([]tsfile.Info{*ts.flushed}, files...)
	}
	u := Update{TabletID: t.ID(), Epoch: t.Epoch(), Load: t}
	if pc := ts.compacted; pc != nil {
		u.Replaced = pc.refs()
		files = replaceRun(files, u.Replaced, pc.info)
	}
	u.TSFiles = files
	return u
}

// commit is the one way an update reaches the Metadata (doc.go, 'Fencing').
// With metaMu held, it
//
//   - commits nothing without a valid lease (ErrNoLease);
//   - holds each update's load (Load) from before the commit until after
//     done ran for it, and refuses an update whose load ended
//     (ErrLoadEnded);
//   - calls Meta.Commit; when the metadata refuses some tablets
//     (*RefusedError) it commits the rest again without them;
//   - for every accepted update, installs and deletes its load's pending
//     compaction (the deletions only while the lease holds), then calls
//     done (nil: nothing more).
//
// A refused update's pending compaction is dropped: its output is left to
// the orphan pass, its run to the metadata that still names it. It returns
// how many updates were accepted and an error when any was not: a
// *RefusedError for the refused ones, or the commit's error (outcome
// unknown: the state stays for the next commit to name again).
func (c *Coordinator) commit(ctx context.Context, ups []Update, done func(Update, *tabletState) error) (int, error) {
	if len(ups) == 0 {
		return 0, nil
	}
	if !c.leaseValid() {
		return 0, ErrNoLease
	}
	refused := map[string]error{}
	loads := make(map[string]Tablet, len(ups))
	held := ups[:0:0]
	for _, u := range ups {
		loads[u.TabletID] = u.Load
		if l, ok := u.Load.(Load); ok {
			release, ok := l.Hold()
			if !ok {
				refused[u.TabletID] = fmt.Errorf("tablet %s: %w", u.TabletID, ErrLoadEnded)
				continue
			}
			defer release()
		}
		held = append(held, u)
	}
	ups = held
	var err error
	if len(ups) > 0 {
		err = c.opts.Meta.Commit(ctx, ups)
		var ref *RefusedError
		if errors.As(err, &ref) && len(ref.Tablets) > 0 {
			var rest []Update
			for _, u := range ups {
				if why, bad := ref.Tablets[u.TabletID]; bad {
					refused[u.TabletID] = why
					continue
				}
				rest = append(rest, u)
			}
			ups, err = rest, nil
			if len(ups) > 0 {
				err = c.opts.Meta.Commit(ctx, ups)
			}
		}
	}
	for id, why := range refused {
		c.log.Warn("checkpoint: metadata refused a tablet's update", "tablet", id, "err", why)
		if ts := c.tabs[id]; ts != nil && ts.owner == loads[id] {
			ts.compacted = nil
		}
	}
	if err != nil {
		if len(refused) > 0 {
			err = errors.Join(err, &RefusedError{Tablets: refused})
		}
		return 0, err
	}
	var errs []error
	for _, u := range ups {
		ts := c.stateOf(u.Load)
		if err := c.installCompaction(ctx, u.Load, ts); err != nil {
			errs = append(errs, err)
		}
		if done != nil {
			if err := done(u, ts); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(refused) > 0 {
		errs = append(errs, &RefusedError{Tablets: refused})
	}
	return len(ups), errors.Join(errs...)
}

// installCompaction installs t's pending compaction, which an accepted
// update named, and deletes its run's blocks while the lease holds.
// Called by commit with metaMu and the load held.
func (c *Coordinator) installCompaction(ctx context.Context, t Tablet, ts *tabletState) error {
	pc := ts.compacted
	if pc == nil {
		return nil
	}
	ts.compacted = nil
	comp, ok := t.(Compactor)
	if !ok {
		return fmt.Errorf("checkpoint: tablet %s cannot compact", t.ID())
	}
	if err := comp.InstallCompacted(pc.refs(), pc.info); err != nil {
		// The metadata names the output and not the run, so the run's
		// blocks stay: the orphan pass collects them once unused.
		return fmt.Errorf("checkpoint: install compacted file of tablet %s: %w", t.ID(), err)
	}
	c.noteFiles(t.ID(), len(t.Files()))
	// Counted with the install, under metaMu: Stats never lag the file
	// list a reader sees.
	c.count(func(s *Stats) {
		s.CompactedBytes += pc.info.Size
		s.Compactions++
		if pc.major {
			s.MajorCompacts++
		}
	})
	if !c.leaseValid() {
		c.log.Warn("checkpoint: lease lost after a compaction's commit; its replaced files are left to the orphan pass", "tablet", t.ID())
		return nil
	}
	c.deleteFiles(c.unshared(ctx, t.ID(), pc.run))
	return nil
}

// sharedTimeout bounds the SharedFiles question of a compaction.
const sharedTimeout = 5 * time.Second

// unshared returns the files of run that no other metadata may name (a
// backup, a restored table; SharedFiles), which the compaction's tserver
// may delete at once. Without an answer it returns none: the orphan pass
// deletes them once nothing names them.
func (c *Coordinator) unshared(ctx context.Context, tablet string, run []tsfile.Info) []tsfile.Info {
	sh, ok := c.opts.Refs.(SharedFiles)
	if !ok || len(run) == 0 {
		return run
	}
	var footers []blockstore.BlockID
	for _, f := range run {
		if f.Store == c.opts.Store {
			footers = append(footers, f.Footer)
		}
	}
	if len(footers) == 0 {
		return nil
	}
	// Asked with metaMu held, as the commit was: a master that does not
	// answer delays this tserver's next commits by sharedTimeout at most.
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	shared, err := sh.SharedFiles(ctx, footers)
	if err != nil {
		c.log.Warn("checkpoint: cannot tell whether a compaction's replaced files are shared; they are left to the orphan pass", "tablet", tablet, "err", err)
		return nil
	}
	out := make([]tsfile.Info, 0, len(run))
	for _, f := range run {
		if f.Store == c.opts.Store && !shared[f.Footer] {
			out = append(out, f)
		}
	}
	return out
}

func (c *Coordinator) leaseValid() bool { return c.opts.Lease == nil || c.opts.Lease() }

func (c *Coordinator) step(n int) error {
	c.running.setStep(n)
	if c.opts.hook == nil {
		return nil
	}
	return c.opts.hook(n)
}

// deleteFiles deletes the blocks of files no metadata names any more, of
// this tserver's own store only: a block ID means nothing in another store,
// where it may name a live block of another tablet. Files of other stores
// are left to their owners' orphan passes.
func (c *Coordinator) deleteFiles(files []tsfile.Info) {
	if len(files) == 0 || c.opts.Blocks == nil {
		return
	}
	tx := c.opts.Blocks.NewDeletionTransaction()
	n := 0
	for _, f := range files {
		if f.Store != c.opts.Store {
			c.log.Debug("replaced TSFile of another store left to its owner's gc", "footer", f.FooterRef())
			continue
		}
		for _, id := range f.Blocks {
			tx.AddDeletedBlock(id)
			n++
		}
	}
	if n == 0 {
		return
	}
	deleted, err := tx.CommitDeletedBlocks()
	c.count(func(s *Stats) { s.DeletedBlocks += int64(len(deleted)) })
	if err != nil && !errors.Is(err, blockstore.ErrNotFound) {
		c.log.Error("checkpoint: deleting replaced TSFiles' blocks", "err", err)
	}
}

// Run does the background work until ctx ends: a checkpoint whenever the
// tablets' write buffers together hold more than MemLimit, merging and
// major compactions, log GC after each checkpoint, and the orphan pass.
func (c *Coordinator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.runCompactions(ctx)
	}()
	go func() { // measures for Throttle, also while a checkpoint runs
		defer wg.Done()
		tick := time.NewTicker(c.opts.Interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.memTotal.Store(c.MemoryUsage())
			}
		}
	}()
	tick := time.NewTicker(c.opts.Interval)
	defer tick.Stop()
	lastOrphan := time.Now()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		mem := c.MemoryUsage()
		c.memTotal.Store(mem)
		if mem > c.opts.MemLimit {
			if _, err := c.Checkpoint(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("checkpoint failed", "err", err)
			}
			if ctx.Err() == nil {
				if err := c.CollectLogs(ctx); err != nil && ctx.Err() == nil {
					c.log.Warn("log gc failed", "err", err)
				}
			}
		}
		if c.opts.OrphanEvery > 0 && time.Since(lastOrphan) >= c.opts.OrphanEvery {
			lastOrphan = time.Now()
			if _, err := c.CollectOrphans(ctx, c.opts.OrphanGrace); err != nil && ctx.Err() == nil {
				c.log.Warn("orphan collection failed", "err", err)
			}
		}
	}
}

// Throttled reports whether Throttle would wait now: a cheap check for the
// write path, one atomic load.
func (c *Coordinator) Throttled() bool { return c.memTotal.Load() > c.opts.HardLimit }

// Throttle waits while the write buffers hold more than HardLimit (as Run
// last measured them), so that writers faster than the flushes cannot
// exhaust memory. Writers call it before taking the state lock; without
// Run it never waits.
// The longest wait is Stats.MaxThrottle.
func (c *Coordinator) Throttle(ctx context.Context) error {
	if !c.Throttled() {
		return nil
	}
	start := time.Now()
	defer func() {
		waited := time.Since(start)
		c.count(func(s *Stats) { s.MaxThrottle = max(s.MaxThrottle, waited) })
	}()
	for c.Throttled() {
		t := time.NewTimer(time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return nil
}

// MemoryUsage is the bytes held by the write buffers of every tablet.
func (c *Coordinator) MemoryUsage() int64 {
	var n int64
	for _, t := range c.opts.Tablets() {
		n += t.MemoryUsage()
	}
	return n
}
