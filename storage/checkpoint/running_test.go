package checkpoint_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"bighive/storage/checkpoint"
	"bighive/storage/vfs/errorfs"
)

// TestRunningReportsCheckpoint: Running names the checkpoint in progress
// and the step it finished, at every step, and nothing once it is over.
func TestRunningReportsCheckpoint(t *testing.T) {
	var (
		mu   sync.Mutex
		n    *node
		seen []checkpoint.Running
		on   bool
	)
	hook := func(step int) error {
		mu.Lock()
		defer mu.Unlock()
		if on {
			seen = append(seen, n.coord.Running())
		}
		return nil
	}
	dir := t.TempDir()
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(dir, "meta.db"), tablets: 2,
		opts: checkpoint.WithHook(checkpoint.Options{MaxTSFiles: -1, FlushParallelism: 1}, hook)}
	g := &gen{rnd: rand.New(rand.NewPCG(1, 2)), rows: 20, vsize: 32}
	nn, _ := prepare(t, cfg, g)
	defer nn.close()
	mu.Lock()
	n, on = nn, true
	mu.Unlock()
	if r := n.coord.Running(); r.Checkpoint || r.Compaction != "" {
		t.Fatalf("before the checkpoint: Running = %+v, want nothing", r)
	}
	if _, err := n.coord.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	on = false
	got := seen
	mu.Unlock()
	if len(got) != 7 {
		t.Fatalf("hook saw %d steps, want 7: %+v", len(got), got)
	}
	for i, r := range got {
		if !r.Checkpoint || r.Step != i+1 || r.CheckpointSince.IsZero() {
			t.Errorf("after step %d: Running = %+v, want a checkpoint at step %d with its start time", i+1, r, i+1)
		}
	}
	if r := n.coord.Running(); r.Checkpoint || r.Step != 0 {
		t.Errorf("after the checkpoint: Running = %+v, want no checkpoint", r)
	}
	if err := n.coord.Compact(context.Background(), n.tabs[0], true); err != nil {
		t.Fatal(err)
	}
	if r := n.coord.Running(); r.Compaction != "" {
		t.Errorf("after a compaction: Running = %+v, want none", r)
	}
}
