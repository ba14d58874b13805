package checkpoint

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/tablet/tsfile"
)

// runCompactions looks for tablets that need a compaction every Interval
// and runs them one at a time until ctx ends (see compactionPass).
func (c *Coordinator) runCompactions(ctx context.Context) {
	if c.opts.MaxTSFiles < 0 && c.opts.MajorEvery < 0 && c.opts.GarbageShare < 0 {
		return
	}
	tick := time.NewTicker(c.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for c.compactionPass(ctx) {
		}
	}
}

// candidate is a tablet compactionPass may compact, with its files when
// the pass began.
type candidate struct {
	t     Tablet
	files []tsfile.Info
}

// candidates lists the serving tablets that can compact, most files
// first, and records their file counts.
func (c *Coordinator) candidates() []candidate {
	tablets := c.opts.Tablets()
	c.forgetMajors(tablets)
	c.forgetStates(tablets)
	out := make([]candidate, 0, len(tablets))
	for _, t := range tablets {
		if _, ok := t.(Compactor); !ok || !t.Serving() {
			continue
		}
		files := t.Files()
		c.noteFiles(t.ID(), len(files))
		out = append(out, candidate{t, files})
	}
	slices.SortStableFunc(out, func(a, b candidate) int { return cmp.Compare(len(b.files), len(a.files)) })
	return out
}

// compactionPass looks at every candidate once, most files first, and
// compacts those that need it: a major compaction when MajorEvery has
// passed (see majorDue) or its garbage share exceeds GarbageShare (see
// garbageDue), else a merging one when it has more than MaxTSFiles
// files. After each it rests for the duty (see rest), except for a
// tablet in backlog mode (more than BacklogFiles files): its merge is
// wide enough to bring it back to MaxTSFiles, and no rest follows. It
// reports true when the pass should start again at once: after a
// backlog-mode compaction, or a rest cut short because a tablet entered
// backlog mode, so the tablet with the most files goes next.
func (c *Coordinator) compactionPass(ctx context.Context) bool {
	if !c.leaseValid() {
		return false
	}
	for i, cd := range c.candidates() {
		if ctx.Err() != nil {
			return false
		}
		t, files := cd.t, cd.files
		if i > 0 { // time has passed: a checkpoint may have added files
			files = t.Files()
		}
		backlog := c.inBacklog(len(files))
		major := c.majorDue(t.ID(), time.Now()) && len(files) > 0
		if !major && c.garbageDue(t, files) {
			major = true
			c.count(func(s *Stats) { s.GarbageMajors++ })
		}
		if !major && !backlog && (c.opts.MaxTSFiles < 0 || len(files) <= c.opts.MaxTSFiles) {
			continue
		}
		width := c.opts.MergeWidth
		if backlog {
			width = max(width, len(files)-max(c.opts.MaxTSFiles, 0)+1)
			c.count(func(s *Stats) { s.BacklogCompactions++ })
		}
		began := time.Now()
		err := c.compact(ctx, t, major, width, !c.overStop(len(files)))
		if err != nil && ctx.Err() == nil {
			c.log.Warn("compaction failed", "tablet", t.ID(), "major", major, "backlog", backlog, "err", err)
		}
		if err != nil {
			// Rest in any case: a failing compaction must not spin.
			c.rest(ctx, time.Since(began), false)
			return false
		}
		if backlog || c.rest(ctx, time.Since(began), true) {
			return true
		}
	}
	return false
}

// majorDue reports whether tablet id is due a periodic major compaction at
// now: MajorEvery has passed since its last one, or, before its first one,
// since it was first asked about (the clock starts then).
func (c *Coordinator) majorDue(id string, now time.Time) bool {
	if c.opts.MajorEvery < 0 {
		return false
	}
	c.majorMu.Lock()
	defer c.majorMu.Unlock()
	last, ok := c.lastMajor[id]
	if !ok {
		c.lastMajor[id] = now
		return false
	}
	return now.Sub(last) >= c.opts.MajorEvery
}

// garbageDue reports whether t (its read set files) is due a major
// compaction because its estimated garbage share exceeds GarbageShare.
// A tablet whose only file is the output of its last major compaction
// never is: that compaction dropped what it could.
func (c *Coordinator) garbageDue(t Tablet, files []tsfile.Info) bool {
	g, ok := t.(GarbageEstimator)
	if !ok || c.opts.GarbageShare < 0 || len(files) == 0 {
		return false
	}
	c.majorMu.Lock()
	out, done := c.majorOut[t.ID()]
	c.majorMu.Unlock()
	if done && len(files) == 1 && files[0].FooterRef() == out {
		return false
	}
	share, err := g.GarbageShare()
	if err != nil {
		c.log.Warn("garbage estimate failed", "tablet", t.ID(), "err", err)
		return false
	}
	return share > c.opts.GarbageShare
}

// noteMajor records a major compaction of tablet id at now that wrote
// out (zero when it wrote nothing or had nothing to compact).
func (c *Coordinator) noteMajor(id string, now time.Time, out blockstore.BlockRef) {
	c.majorMu.Lock()
	c.lastMajor[id] = now
	c.majorOut[id] = out
	c.majorMu.Unlock()
}

// forgetMajors drops the clocks of tablets no longer served here, so a
// tablet that comes back starts its clock again.
func (c *Coordinator) forgetMajors(tablets []Tablet) {
	here := make(map[string]bool, len(tablets))
	for _, t := range tablets {
		here[t.ID()] = true
	}
	c.forgetFiles(here)
	c.majorMu.Lock()
	for id := range c.lastMajor {
		if !here[id] {
			delete(c.lastMajor, id)
			delete(c.majorOut, id)
		}
	}
	c.majorMu.Unlock()
}

// pickMerge returns the run of width consecutive files with the smallest
// total size (all of them when there are fewer).
func pickMerge(files []tsfile.Info, width int) []tsfile.Info {
	if len(files) <= width {
		return files
	}
	best, bestSize := 0, int64(-1)
	for i := 0; i+width <= len(files); i++ {
		var n int64
		for _, f := range files[i : i+width] {
			n += f.Size
		}
		if bestSize < 0 || n < bestSize {
			best, bestSize = i, n
		}
	}
	return files[best : best+width]
}

// Compact runs one compaction of t now: a major one of all its files, or
// a merging one of the MergeWidth adjacent files with the smallest total
// size. The new file list is committed to the metadata (log positions
// unchanged, the run as Update.Replaced) before the tablet's read set
// switches to it; the replaced files' blocks are then deleted with one
// deletion transaction, those of Options.Store only (see Options.Store
// for the others), and only while the lease holds. A refused commit
// installs and deletes nothing: the new file becomes an orphan for
// CollectOrphans. A commit whose outcome is unknown leaves the compaction
// pending: the next update of the tablet's load names it again (and the
// next Compact of it only retries that commit). A major compaction
// restarts the tablet's MajorEvery clock. Afterwards Compact sleeps so
// that compactions average at most CompactionRate bytes per second.
func (c *Coordinator) Compact(ctx context.Context, t Tablet, major bool) error {
	return c.compact(ctx, t, major, c.opts.MergeWidth, true)
}

// compact is Compact with the merge width and, when paced is false, no
// CompactionRate sleep (a tablet over StopFiles).
func (c *Coordinator) compact(ctx context.Context, t Tablet, major bool, width int, paced bool) error {
	comp, ok := t.(Compactor)
	if !ok {
		return fmt.Errorf("checkpoint: tablet %s cannot compact", t.ID())
	}
	if !c.leaseValid() {
		return ErrNoLease
	}
	c.compactMu.Lock()
	defer c.compactMu.Unlock()
	defer c.running.beginCompaction(t.ID(), major)()
	c.metaMu.Lock()
	if ts := c.stateOf(t); ts.compacted != nil {
		// An earlier compaction's commit had no answer: settle it first.
		_, err := c.commit(ctx, []Update{c.updateLocked(t, ts)}, nil)
		c.metaMu.Unlock()
		if err != nil {
			return fmt.Errorf("checkpoint: pending compaction of tablet %s: %w", t.ID(), err)
		}
		return nil
	}
	c.metaMu.Unlock()
	start := time.Now()
	files := t.Files()
	if !major {
		files = pickMerge(files, width)
	}
	if len(files) < 1 || !major && len(files) < 2 {
		if major {
			c.noteMajor(t.ID(), time.Now(), blockstore.BlockRef{})
		}
		return nil
	}
	footers := make([]blockstore.BlockRef, len(files))
	var inBytes int64
	for i, f := range files {
		footers[i] = f.FooterRef()
		inBytes += f.Size
	}
	info, err := comp.CompactFiles(ctx, footers, major)
	if err != nil {
		return fmt.Errorf("checkpoint: compact tablet %s: %w", t.ID(), err)
	}
	if c.opts.compactHook != nil {
		c.opts.compactHook(t)
	}
	c.metaMu.Lock()
	ts := c.stateOf(t)
	ts.compacted = &pendingCompaction{run: files, info: info, major: major}
	_, err = c.commit(ctx, []Update{c.updateLocked(t, ts)}, nil)
	c.metaMu.Unlock()
	if err != nil { // commit reports every update it did not commit
		c.count(func(s *Stats) { s.FailedCommits++ })
		return fmt.Errorf("%w: compaction of tablet %s: %w", ErrCommit, t.ID(), err)
	}
	if major {
		c.noteMajor(t.ID(), time.Now(), info.FooterRef())
	}
	if c.opts.OnCompaction != nil {
		c.opts.OnCompaction(major, inBytes, info.Size, time.Since(start))
	}
	c.log.Debug("compaction done", "tablet", t.ID(), "major", major, "files", len(footers), "in_bytes", inBytes, "out_bytes", info.Size, "took", time.Since(start))
	if paced {
		c.pace(ctx, inBytes, time.Since(start))
	}
	return nil
}

// replaceRun returns list with the files named by run replaced by info
// (or removed, when info.Footer is 0).
func replaceRun(list []tsfile.Info, run []blockstore.BlockRef, info tsfile.Info) []tsfile.Info {
	in := map[blockstore.BlockRef]bool{}
	for _, ref := range run {
		in[ref] = true
	}
	out := make([]tsfile.Info, 0, len(list))
	placed := false
	for _, f := range list {
		if !in[f.FooterRef()] {
			out = append(out, f)
			continue
		}
		if !placed && info.Footer != 0 {
			out = append(out, info)
		}
		placed = true
	}
	return out
}

// rest sleeps after a background compaction that took took (pacing
// included), so that background compactions run at most CompactionDuty
// of the time: on a busy machine a compaction takes longer than its
// CompactionRate allows, and pace alone would then never sleep. It
// reports true, at once, when cut is set and a tablet is or enters
// backlog mode meanwhile: its compactions do not wait for the duty.
func (c *Coordinator) rest(ctx context.Context, took time.Duration, cut bool) (backlog bool) {
	if c.opts.CompactionDuty >= 1 {
		return false
	}
	wake := c.backlog.wake
	if !cut {
		wake = nil
	}
	select {
	case <-wake:
	default:
	}
	if cut && c.anyBacklog() {
		return true
	}
	d := time.Duration(float64(took) * (1 - c.opts.CompactionDuty) / c.opts.CompactionDuty)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
		return true
	case <-ctx.Done():
	}
	return false
}

// pace sleeps after a compaction that read n bytes in took, so that
// compactions average at most CompactionRate bytes per second: the engine
// has no hook to throttle inside one compaction.
func (c *Coordinator) pace(ctx context.Context, n int64, took time.Duration) {
	if c.opts.CompactionRate <= 0 {
		return
	}
	want := time.Duration(float64(n) / float64(c.opts.CompactionRate) * float64(time.Second))
	if d := want - took; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}
