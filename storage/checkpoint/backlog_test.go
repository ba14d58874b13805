package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/vfs/errorfs"
	"bighive/testkit/wait"
)

// TestWriteDelay: no delay up to StopFiles, then 1 ms doubling with each
// file over, capped at MaxWriteDelay, which is itself at most 1 s; the
// defaults derive from MaxTSFiles and the rule is off with compaction.
func TestWriteDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		opts checkpoint.Options
		want map[int]time.Duration // files → delay
	}{
		{"defaults (max files 6: backlog 12, stop 24)", checkpoint.Options{},
			map[int]time.Duration{0: 0, 12: 0, 24: 0, 25: ms, 26: 2 * ms, 28: 8 * ms, 32: 128 * ms, 33: 250 * ms, 10_000: 250 * ms}},
		{"set", checkpoint.Options{BacklogFiles: 3, StopFiles: 3, MaxWriteDelay: 10 * ms},
			map[int]time.Duration{3: 0, 4: ms, 5: 2 * ms, 7: 8 * ms, 8: 10 * ms, 100: 10 * ms}},
		{"max delay capped at 1 s", checkpoint.Options{BacklogFiles: 1, StopFiles: 1, MaxWriteDelay: time.Hour},
			map[int]time.Duration{1: 0, 2: ms, 11: 512 * ms, 12: time.Second, 1 << 20: time.Second}},
		{"stop below backlog is raised to it", checkpoint.Options{BacklogFiles: 10, StopFiles: 4},
			map[int]time.Duration{10: 0, 11: ms}},
		{"stop off", checkpoint.Options{StopFiles: -1}, map[int]time.Duration{100: 0, 1 << 20: 0}},
		{"compaction off", checkpoint.Options{MaxTSFiles: -1}, map[int]time.Duration{100: 0, 1 << 20: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkpoint.New(tc.opts)
			for n, want := range tc.want {
				if got := c.WriteDelay(n); got != want {
					t.Errorf("WriteDelay(%d) = %v, want %v", n, got, want)
				}
			}
			prev := time.Duration(0)
			for n := range 5000 {
				d := c.WriteDelay(n)
				if d < prev || d > time.Second {
					t.Fatalf("WriteDelay(%d) = %v after %v: want non-decreasing and at most 1 s", n, d, prev)
				}
				prev = d
			}
		})
	}
}

// addFiles gives tablet id k more TSFiles: k times a new row and a
// checkpoint.
func addFiles(t *testing.T, n *node, id string, k int) {
	t.Helper()
	ctx := context.Background()
	for range k {
		row := fmt.Appendf(nil, "r%06d", len(n.byID[id].Files()))
		m := &mutation.RowMutation{Row: row, Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: row}}}
		if err := n.write(ctx, id, m); err != nil {
			t.Fatal(err)
		}
		if _, err := n.coord.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFiles waits until tablet id has at most want files.
func waitFiles(t *testing.T, n *node, id string, want int) {
	t.Helper()
	wait.For(t, 30*time.Second, fmt.Sprintf("tablet %s at most %d files", id, want), func() error {
		if got := len(n.byID[id].Files()); got > want {
			return fmt.Errorf("%d files", got)
		}
		return nil
	})
}

// waitCompactions waits until the coordinator has counted at least want
// compactions and returns its stats: a tablet's new file list is visible
// a moment before the compaction that made it is counted.
func waitCompactions(t *testing.T, n *node, want int64) checkpoint.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st checkpoint.Stats
	_ = wait.Until(ctx, func() error { // the caller checks the stats
		if st = n.coord.Stats(); st.Compactions < want {
			return errors.New("too few compactions")
		}
		return nil
	})
	return st
}

// TestBacklogMode: with a duty so small that the rest after a normal
// compaction outlasts the test, tablets past BacklogFiles are still
// compacted, most files first and back to back, by one merge each that
// brings them back to MaxTSFiles; writes to a tablet past StopFiles are
// delayed until its compaction; a tablet over MaxTSFiles but not in
// backlog mode waits out the rest, and one entering backlog mode cuts it
// short.
func TestBacklogMode(t *testing.T) {
	ctx := context.Background()
	const maxFiles, backlogFiles, stopFiles = 3, 6, 9
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 2,
		opts: checkpoint.Options{MaxTSFiles: maxFiles, MergeWidth: 2, BacklogFiles: backlogFiles, StopFiles: stopFiles,
			MaxWriteDelay: 20 * time.Millisecond, MajorEvery: -1, GarbageShare: -1, CompactionRate: -1,
			CompactionDuty: 1e-9, MemLimit: 64 << 20, Interval: 5 * time.Millisecond}}
	n, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	a, b := tabletID(0), tabletID(1)
	addFiles(t, n, a, 8)
	addFiles(t, n, b, 12)

	// Entered: b has the most files, past the stop count.
	if got := checkpoint.CandidateOrder(n.coord); !slices.Equal(got, []string{b, a}) {
		t.Fatalf("compaction order %v, want %v (most files first)", got, []string{b, a})
	}
	if got := n.coord.FilesPerTablet(); got != 12 {
		t.Fatalf("FilesPerTablet = %d, want 12", got)
	}
	if err := n.coord.SlowWrite(ctx, a); err != nil {
		t.Fatal(err)
	}
	if st := n.coord.Stats(); st.SlowedWrites != 0 {
		t.Fatalf("a write to %s (8 files, stop count %d) was slowed", a, stopFiles)
	}
	if err := n.coord.SlowWrite(ctx, b); err != nil {
		t.Fatal(err)
	}
	if st := n.coord.Stats(); st.SlowedWrites != 1 || st.SlowdownTime <= 0 {
		t.Fatalf("stats %+v after a write to %s (12 files): want one slowed write", st, b)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := n.coord.SlowWrite(cctx, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("SlowWrite with a cancelled context = %v, want context.Canceled", err)
	}

	n.run()
	waitFiles(t, n, b, maxFiles)
	waitFiles(t, n, a, maxFiles)
	st := waitCompactions(t, n, 2)
	if st.BacklogCompactions != 2 || st.Compactions != 2 {
		t.Fatalf("%d compactions, %d in backlog mode; want 2 and 2 (one merge each back to %d files, no rest)",
			st.Compactions, st.BacklogCompactions, maxFiles)
	}
	if st.MaxFiles != 12 {
		t.Fatalf("Stats.MaxFiles = %d, want 12", st.MaxFiles)
	}
	// Left: writes to b go through undelayed.
	slowed := st.SlowedWrites
	if err := n.coord.SlowWrite(ctx, b); err != nil || n.coord.Stats().SlowedWrites != slowed {
		t.Fatalf("a write to %s after its compaction was slowed (%v)", b, err)
	}

	// Over MaxTSFiles, not in backlog mode: one merge, then the rest.
	addFiles(t, n, a, 1)
	waitFiles(t, n, a, maxFiles)
	addFiles(t, n, b, 2)
	time.Sleep(100 * time.Millisecond) // twenty intervals
	if got := len(n.byID[b].Files()); got != maxFiles+2 {
		t.Fatalf("%s has %d files during the rest, want %d (no compaction)", b, got, maxFiles+2)
	}
	// Entering backlog mode cuts the rest short.
	addFiles(t, n, b, backlogFiles+1-(maxFiles+2))
	waitFiles(t, n, b, maxFiles)
	st = waitCompactions(t, n, 4)
	if st.BacklogCompactions != 3 || st.Compactions != 4 {
		t.Fatalf("%d compactions, %d in backlog mode; want 4 and 3", st.Compactions, st.BacklogCompactions)
	}
}

// TestSlowWriteLetsCheckpointsRun: writers delayed by a tablet past
// StopFiles hold no lock: checkpoints go on, the writes go on (slowed),
// and every delay is within MaxWriteDelay's bound.
func TestSlowWriteLetsCheckpointsRun(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 1,
		opts: checkpoint.Options{MaxTSFiles: 2, BacklogFiles: 3, StopFiles: 3, MaxWriteDelay: 5 * time.Millisecond,
			MajorEvery: -1, GarbageShare: -1, MemLimit: 64 << 20}}
	n, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	id := tabletID(0)
	addFiles(t, n, id, 10)
	if d := n.coord.WriteDelay(10); d != 5*time.Millisecond {
		t.Fatalf("WriteDelay(10) = %v, want the 5 ms bound", d)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				if n.coord.SlowWrite(wctx, id) != nil {
					return
				}
				row := fmt.Appendf(nil, "w%d-%06d", w, i)
				m := &mutation.RowMutation{Row: row, Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: row}}}
				if err := n.write(ctx, id, m); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				writes++
				mu.Unlock()
			}
		}()
	}
	for range 5 {
		if _, err := n.coord.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wait.ForCtx(t, ctx, "20 slowed writes", func() error {
		if s := n.coord.Stats().SlowedWrites; s < 20 {
			return fmt.Errorf("%d slowed writes", s)
		}
		return nil
	})
	stop()
	wg.Wait()
	st := n.coord.Stats()
	if st.Checkpoints != 15 || writes == 0 || st.MaxFiles < 10 {
		t.Fatalf("checkpoints %d, writes %d, max files %d: want the 5 checkpoints and the writes to go on past the 10 files added", st.Checkpoints, writes, st.MaxFiles)
	}
	t.Logf("%d writes, %d slowed, %v in all, longest %v", writes, st.SlowedWrites, st.SlowdownTime, st.MaxSlowdown)
}
