package checkpoint

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The backlog rule (see "Compaction backlog" in doc.go): what the
// coordinator knows of each tablet's TSFile count, for the compaction
// order, the duty rest and the write slowdown.

// writeDelayBase is the delay of a write to a tablet one file over
// StopFiles; it doubles with each further file, up to MaxWriteDelay.
const writeDelayBase = time.Millisecond

// maxWriteDelayCap is the largest MaxWriteDelay: a write is never held
// back by the slowdown for longer.
const maxWriteDelayCap = time.Second

// backlog holds the file counts. The write path reads over (one atomic
// load) and looks a tablet up only while some tablet is over StopFiles.
type backlog struct {
	mu    sync.RWMutex
	files map[string]int // by tablet: its TSFiles at the last look
	over  atomic.Int64   // tablets with more than StopFiles files
	// wake is signalled when a tablet's count passes BacklogFiles, to
	// cut a duty rest short.
	wake chan struct{}
}

func newBacklog() backlog {
	return backlog{files: map[string]int{}, wake: make(chan struct{}, 1)}
}

// backlogDefaults fills the backlog options: a rule needs merging
// compactions to catch up with, so MaxTSFiles < 0 turns it off.
func (o Options) backlogDefaults() Options {
	if o.MaxTSFiles < 0 {
		o.BacklogFiles, o.StopFiles = -1, -1
	}
	if o.BacklogFiles == 0 {
		o.BacklogFiles = 2 * o.MaxTSFiles
	}
	if o.StopFiles == 0 {
		o.StopFiles = 2 * o.BacklogFiles
		if o.BacklogFiles < 0 {
			o.StopFiles = -1
		}
	}
	if o.BacklogFiles > 0 && o.StopFiles > 0 {
		o.StopFiles = max(o.StopFiles, o.BacklogFiles)
	}
	if o.MaxWriteDelay <= 0 {
		o.MaxWriteDelay = 250 * time.Millisecond
	}
	o.MaxWriteDelay = min(o.MaxWriteDelay, maxWriteDelayCap)
	return o
}

// inBacklog reports whether a tablet of n files is in backlog mode.
func (c *Coordinator) inBacklog(n int) bool {
	return c.opts.BacklogFiles >= 0 && n > c.opts.BacklogFiles
}

// overStop reports whether writes to a tablet of n files are slowed.
func (c *Coordinator) overStop(n int) bool {
	return c.opts.StopFiles >= 0 && n > c.opts.StopFiles
}

// WriteDelay is the admission delay of one write to a tablet of n
// TSFiles: none up to StopFiles, then 1 ms doubled for each file over it
// beyond the first, at most MaxWriteDelay (which is at most 1 s).
func (c *Coordinator) WriteDelay(n int) time.Duration {
	if !c.overStop(n) {
		return 0
	}
	e := n - c.opts.StopFiles - 1
	if e >= 30 {
		return c.opts.MaxWriteDelay
	}
	return min(writeDelayBase<<e, c.opts.MaxWriteDelay)
}

// noteFiles records that tablet id has n TSFiles now.
func (c *Coordinator) noteFiles(id string, n int) {
	b := &c.backlog
	b.mu.Lock()
	old, known := b.files[id]
	b.files[id] = n
	switch {
	case c.overStop(n) && (!known || !c.overStop(old)):
		b.over.Add(1)
	case !c.overStop(n) && known && c.overStop(old):
		b.over.Add(-1)
	}
	b.mu.Unlock()
	c.count(func(s *Stats) { s.MaxFiles = max(s.MaxFiles, n) })
	if c.inBacklog(n) && (!known || !c.inBacklog(old)) {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// forgetFiles drops the counts of tablets not in here.
func (c *Coordinator) forgetFiles(here map[string]bool) {
	b := &c.backlog
	b.mu.Lock()
	for id, n := range b.files {
		if !here[id] {
			if c.overStop(n) {
				b.over.Add(-1)
			}
			delete(b.files, id)
		}
	}
	b.mu.Unlock()
}

// FilesPerTablet is the largest TSFile count of a tablet served here, as
// the coordinator last saw it (after each checkpoint and compaction, and
// at each look for compactions). The largest ever is Stats.MaxFiles.
func (c *Coordinator) FilesPerTablet() int {
	b := &c.backlog
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	for _, f := range b.files {
		n = max(n, f)
	}
	return n
}

// anyBacklog reports whether some tablet is in backlog mode now.
func (c *Coordinator) anyBacklog() bool {
	return c.opts.BacklogFiles >= 0 && c.FilesPerTablet() > c.opts.BacklogFiles
}

// SlowWrite delays a write to tablet id while it has more than StopFiles
// TSFiles (WriteDelay), so that its compactions catch up. Writers call it
// before taking any lock, like Throttle: a delayed write holds nothing a
// checkpoint or compaction waits for. One call waits at most
// MaxWriteDelay (≤ 1 s); writes are slowed, never stopped. The time
// spent is Stats.SlowdownTime, the longest wait Stats.MaxSlowdown.
func (c *Coordinator) SlowWrite(ctx context.Context, id string) error {
	if c.backlog.over.Load() == 0 {
		return nil // the common case: one atomic load
	}
	c.backlog.mu.RLock()
	n := c.backlog.files[id]
	c.backlog.mu.RUnlock()
	d := c.WriteDelay(n)
	if d <= 0 {
		return nil
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	waited := time.Since(start)
	c.count(func(s *Stats) {
		s.SlowedWrites++
		s.SlowdownTime += waited
		s.MaxSlowdown = max(s.MaxSlowdown, waited)
	})
	return err
}
