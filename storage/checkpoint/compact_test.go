package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/vfs/errorfs"
	"bighive/testkit/wait"
)

// TestCompactionModel interleaves random writes and deletes, checkpoints,
// merging and major compactions, and checks every tablet against the
// reference model after each step and after a restart; replaced files'
// blocks must be gone and the file count bounded.
func TestCompactionModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(seed, 0))
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 3,
		opts: checkpoint.Options{MaxTSFiles: 3, MergeWidth: 2, CompactionRate: -1}}
	n, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rnd: rand.New(rand.NewPCG(seed, 1)), rows: 25, vsize: 32}
	want := model{}
	for step := range 40 {
		writeN(t, n, g, want, 20+rnd.IntN(60), cfg.tablets)
		switch k := rnd.IntN(10); {
		case k < 5:
			if _, err := n.coord.Checkpoint(ctx); err != nil {
				t.Fatalf("step %d: checkpoint: %v", step, err)
			}
		case k < 8:
			if err := n.coord.Compact(ctx, n.tabs[rnd.IntN(len(n.tabs))], false); err != nil {
				t.Fatalf("step %d: merge: %v", step, err)
			}
		default:
			if err := n.coord.Compact(ctx, n.tabs[rnd.IntN(len(n.tabs))], true); err != nil {
				t.Fatalf("step %d: major: %v", step, err)
			}
		}
		verify(t, n, want)
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
	if _, err := n.coord.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tab := range n.tabs {
		if err := n.coord.Compact(ctx, tab, true); err != nil {
			t.Fatal(err)
		}
		if got := len(tab.Files()); got > 1 {
			t.Errorf("tablet %s has %d files after a major compaction", tab.ID(), got)
		}
	}
	verify(t, n, want)
	n.checkBlocks(t) // replaced files' blocks were deleted
	n.close()
	cfg.opts = checkpoint.Options{MaxTSFiles: -1}
	recoverAndCheck(t, cfg, want)
}

// TestMajorEvery: the periodic major compaction is on by default (24 h),
// its clock starts when a tablet is first seen, a major compaction
// restarts it, and a negative period turns it off.
func TestMajorEvery(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name   string
		every  time.Duration
		period time.Duration // 0: never due
	}{
		{"default", 0, 24 * time.Hour},
		{"set", time.Hour, time.Hour},
		{"off", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkpoint.New(checkpoint.Options{MajorEvery: tc.every, Tablets: func() []checkpoint.Tablet { return nil }})
			if checkpoint.MajorDue(c, "t", t0) {
				t.Fatal("due when first seen")
			}
			if tc.period == 0 {
				if checkpoint.MajorDue(c, "t", t0.Add(1000*time.Hour)) {
					t.Fatal("due with the periodic major compaction off")
				}
				return
			}
			if checkpoint.MajorDue(c, "t", t0.Add(tc.period-time.Second)) {
				t.Fatal("due before one period since first seen")
			}
			if !checkpoint.MajorDue(c, "t", t0.Add(tc.period)) {
				t.Fatal("not due one period after first seen")
			}
			checkpoint.NoteMajor(c, "t", t0.Add(tc.period))
			if checkpoint.MajorDue(c, "t", t0.Add(2*tc.period-time.Second)) {
				t.Fatal("due before one period since the last major compaction")
			}
			if !checkpoint.MajorDue(c, "t", t0.Add(2*tc.period)) {
				t.Fatal("not due one period after the last major compaction")
			}
		})
	}
}

// TestPeriodicMajorCompactionPurges: with only the periodic major
// compaction on, Run compacts a tablet whose rows were all deleted down to
// one entry (the row tombstone of highest sequence) by itself, and the
// rows stay deleted after a restart.
func TestPeriodicMajorCompactionPurges(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 1,
		opts: checkpoint.Options{MaxTSFiles: -1, MajorEvery: 50 * time.Millisecond, CompactionRate: -1, MemLimit: 64 << 20}}
	n, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := tabletID(0)
	rows := 20
	writeThenDeleteRows(t, n, id, rows)
	if got := len(n.byID[id].Files()); got != 2 {
		t.Fatalf("%d files before the periodic major compaction, want 2", got)
	}
	n.run()
	wait.For(t, 30*time.Second, "a periodic major compaction", func() error {
		if n.coord.Stats().MajorCompacts == 0 {
			return errors.New("none")
		}
		return nil
	})
	files := n.byID[id].Files()
	if len(files) != 1 || files[0].Entries != 1 {
		t.Fatalf("after the periodic major compaction: %+v, want one file of one entry", files)
	}
	n.close()
	cfg.opts = checkpoint.Options{MaxTSFiles: -1, MajorEvery: -1}
	n, err = openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	for i := range rows {
		if got, err := readRow(n.byID[id], []byte(fmt.Sprintf("r%02d", i))); err != nil || len(got) != 0 {
			t.Fatalf("deleted row r%02d after a restart = %v %v", i, got, err)
		}
	}
}

// TestGarbageShareTriggersMajor: with periodic and merging compactions
// off, a tablet whose files are mostly deleted rows gets a major
// compaction of its own (Options.GarbageShare) that leaves one file of one
// entry, and no further one for that file; with the trigger off it gets
// none.
func TestGarbageShareTriggersMajor(t *testing.T) {
	for _, c := range []struct {
		share  float64
		majors int64
	}{{0, 1}, {-1, 0}} {
		t.Run(fmt.Sprintf("share %v", c.share), func(t *testing.T) {
			ctx := context.Background()
			cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 1,
				opts: checkpoint.Options{MaxTSFiles: -1, MajorEvery: -1, GarbageShare: c.share, CompactionRate: -1, MemLimit: 64 << 20, Interval: 5 * time.Millisecond}}
			n, err := openNode(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer n.close()
			id := tabletID(0)
			writeThenDeleteRows(t, n, id, 50)
			n.run()
			if c.majors > 0 {
				wait.For(t, 30*time.Second, "a major compaction for the garbage share", func() error {
					if n.coord.Stats().GarbageMajors == 0 {
						return errors.New("none")
					}
					return nil
				})
			}
			// Many intervals more: the one file left is not compacted
			// again (its one entry is all garbage, but nothing would go).
			time.Sleep(200 * time.Millisecond)
			st := n.coord.Stats()
			if st.GarbageMajors != c.majors || st.MajorCompacts != c.majors {
				t.Fatalf("%d major compactions (%d for garbage), want %d", st.MajorCompacts, st.GarbageMajors, c.majors)
			}
			files := n.byID[id].Files()
			if c.majors > 0 && (len(files) != 1 || files[0].Entries != 1) {
				t.Fatalf("after the major compaction: %+v, want one file of one entry", files)
			}
			if c.majors == 0 && len(files) != 2 {
				t.Fatalf("%d files without the trigger, want 2", len(files))
			}
		})
	}
}

// writeThenDeleteRows writes rows cells of tablet id, checkpoints, deletes
// the rows and checkpoints again: two TSFiles, the newer all tombstones.
func writeThenDeleteRows(t *testing.T, n *node, id string, rows int) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range []mutation.Kind{mutation.SetCell, mutation.DeleteRow} {
		for i := range rows {
			op := mutation.Op{Kind: kind, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("v")}
			if kind == mutation.DeleteRow {
				op = mutation.Op{Kind: kind}
			}
			if err := n.write(ctx, id, &mutation.RowMutation{Row: []byte(fmt.Sprintf("r%02d", i)), Ops: []mutation.Op{op}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.coord.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
