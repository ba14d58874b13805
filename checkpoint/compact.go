package checkpoint

import (
	"context"
	"fmt"
	"time"

	"bighive/blockstore"
	"bighive/tablet/tsfile"
)

// runCompactions looks for tablets that need a compaction every Interval
// and runs them one at a time until ctx ends.
func (c *Coordinator) runCompactions(ctx context.Context) {
	if c.opts.MaxTSFiles < 0 && c.opts.MajorEvery <= 0 {
		return
	}
	lastMajor := map[string]time.Time{}
	tick := time.NewTicker(c.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, t := range c.opts.Tablets() {
			if ctx.Err() != nil {
				return
			}
			if !t.Serving() {
				continue
			}
			if _, ok := t.(Compactor); !ok {
				continue
			}
			files := t.TSFiles()
			major := false
			if c.opts.MajorEvery > 0 && len(files) >= 2 {
				last, ok := lastMajor[t.ID()]
				if !ok {
					lastMajor[t.ID()] = time.Now()
				} else if time.Since(last) >= c.opts.MajorEvery {
					major = true
				}
			}
			if !major && (c.opts.MaxTSFiles < 0 || len(files) <= c.opts.MaxTSFiles) {
				continue
			}
			if major {
				lastMajor[t.ID()] = time.Now()
			}
			if err := c.Compact(ctx, t, major); err != nil && ctx.Err() == nil {
				c.log.Warn("compaction failed", "tablet", t.ID(), "major", major, "err", err)
			}
		}
	}
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
// a merging one of the MergeWidth consecutive files with the smallest
// total size. The new file list is committed to the metadata (log
// positions unchanged); the replaced files' blocks are deleted with one
// deletion transaction once no metadata names them.
func (c *Coordinator) Compact(ctx context.Context, t Tablet, major bool) error {
	comp, ok := t.(Compactor)
	if !ok {
		return fmt.Errorf("checkpoint: tablet %s cannot compact", t.ID())
	}
	c.compactMu.Lock()
	defer c.compactMu.Unlock()
	files := t.TSFiles()
	if !major {
		files = pickMerge(files, c.opts.MergeWidth)
	}
	if len(files) < 1 || !major && len(files) < 2 {
		return nil
	}
	footers := make([]blockstore.BlockID, len(files))
	for i, f := range files {
		footers[i] = f.Footer
	}
	replaced, err := comp.Compact(ctx, footers, major, c.pacer())
	if err != nil {
		return fmt.Errorf("checkpoint: compact tablet %s: %w", t.ID(), err)
	}
	c.count(func(s *Stats) {
		s.Compactions++
		if major {
			s.MajorCompacts++
		}
	})
	c.metaMu.Lock()
	ts := c.stateOf(t.ID())
	ts.retired = append(ts.retired, replaced...)
	ups, _, err := c.commit(ctx, []Update{{TabletID: t.ID(), Epoch: t.Epoch(), TSFiles: t.TSFiles()}}, []Tablet{t})
	var del []tsfile.Info
	if err == nil && len(ups) == 1 {
		del = ts.takeUnnamed(ups[0].TSFiles)
	}
	c.metaMu.Unlock()
	if err != nil {
		c.count(func(s *Stats) { s.FailedCommits++ })
		return fmt.Errorf("%w: compaction of tablet %s: %w", ErrCommit, t.ID(), err)
	}
	c.deleteFiles(del)
	return nil
}

// pacer returns a throttle: called with the bytes read so far, it sleeps
// until the compaction is no faster than CompactionRate.
func (c *Coordinator) pacer() func(int64) {
	rate := c.opts.CompactionRate
	if rate <= 0 {
		return func(int64) {}
	}
	start := time.Now()
	return func(n int64) {
		want := time.Duration(float64(n) / float64(rate) * float64(time.Second))
		if d := want - time.Since(start); d > time.Millisecond {
			time.Sleep(d)
		}
	}
}
