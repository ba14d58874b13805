package checkpoint

import (
	"sync"
	"time"
)

// Running is the background work in progress at one moment, for a status
// page: at most one checkpoint and one compaction run at a time.
type Running struct {
	// Checkpoint is true while a checkpoint runs (from step 1, once no
	// split runs, to its end); Step is the last of its seven steps that
	// finished (0: none yet) and CheckpointSince when it began.
	Checkpoint      bool
	Step            int
	CheckpointSince time.Time
	// Compaction is the id of the tablet being compacted, "" when none;
	// Major tells a major compaction from a merge.
	Compaction      string
	Major           bool
	CompactionSince time.Time
}

type running struct {
	mu sync.Mutex
	r  Running
}

func (x *running) beginCheckpoint() {
	x.mu.Lock()
	x.r.Checkpoint, x.r.Step, x.r.CheckpointSince = true, 0, time.Now()
	x.mu.Unlock()
}

func (x *running) setStep(n int) {
	x.mu.Lock()
	if x.r.Checkpoint {
		x.r.Step = n
	}
	x.mu.Unlock()
}

func (x *running) endCheckpoint() {
	x.mu.Lock()
	x.r.Checkpoint, x.r.Step, x.r.CheckpointSince = false, 0, time.Time{}
	x.mu.Unlock()
}

// beginCompaction records a compaction of tablet id and returns the
// function that clears it.
func (x *running) beginCompaction(id string, major bool) (end func()) {
	x.mu.Lock()
	x.r.Compaction, x.r.Major, x.r.CompactionSince = id, major, time.Now()
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		x.r.Compaction, x.r.Major, x.r.CompactionSince = "", false, time.Time{}
		x.mu.Unlock()
	}
}

// Running reports the checkpoint and compaction running now.
func (c *Coordinator) Running() Running {
	c.running.mu.Lock()
	defer c.running.mu.Unlock()
	return c.running.r
}
