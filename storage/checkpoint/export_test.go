package checkpoint

import (
	"time"

	"bighive/storage/blockstore"
)

// WithHook returns opts with a hook called after each step of Checkpoint.
func WithHook(opts Options, hook func(step int) error) Options {
	opts.hook = hook
	return opts
}

// WithCompactHook returns opts with a hook called between a compaction's
// write of its output and its commit.
func WithCompactHook(opts Options, hook func(t Tablet)) Options {
	opts.compactHook = hook
	return opts
}

// MajorDue exposes Coordinator.majorDue; NoteMajor, noteMajor.
func MajorDue(c *Coordinator, id string, now time.Time) bool { return c.majorDue(id, now) }
func NoteMajor(c *Coordinator, id string, now time.Time)     { c.noteMajor(id, now, blockstore.BlockRef{}) }

// CandidateOrder is the order compactionPass looks at the tablets in.
func CandidateOrder(c *Coordinator) []string {
	var ids []string
	for _, cd := range c.candidates() {
		ids = append(ids, cd.t.ID())
	}
	return ids
}
