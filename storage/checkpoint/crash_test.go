package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/checkpoint/localmeta"
	"bighive/storage/vfs/errorfs"
)

func snapshotMeta(t *testing.T, db *localmeta.DB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeN(t *testing.T, n *node, g *gen, want model, count, tablets int) {
	t.Helper()
	ctx := context.Background()
	for range count {
		tab := tabletID(g.rnd.IntN(tablets))
		m := g.next()
		if err := n.write(ctx, tab, m); err != nil {
			t.Fatalf("write: %v", err)
		}
		want.apply(tab, m)
	}
}

// prepare opens a node on mem, writes, checkpoints, compacts and writes
// again, so the checkpoint under test starts with TSFiles, an old
// position and full buffers.
func prepare(t *testing.T, cfg nodeConfig, g *gen) (*node, model) {
	t.Helper()
	ctx := context.Background()
	n, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := model{}
	for range 3 {
		writeN(t, n, g, want, 150, cfg.tablets)
		if _, err := n.coord.Checkpoint(ctx); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	}
	if err := n.coord.Compact(ctx, n.tabs[0], false); err != nil {
		t.Fatalf("compact: %v", err)
	}
	writeN(t, n, g, want, 150, cfg.tablets)
	return n, want
}

// recoverAndCheck opens a node on the crash image and checks it reads
// want, holds only referenced blocks, and checkpoints cleanly after.
func recoverAndCheck(t *testing.T, cfg nodeConfig, want model) {
	t.Helper()
	ctx := context.Background()
	rn, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	defer rn.close()
	verify(t, rn, want)
	rn.checkBlocks(t)
	if _, err := rn.coord.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint after recovery: %v", err)
	}
	verify(t, rn, want)
}

// TestCrashBetweenSteps takes the durable state (block store and WAL as a
// crash leaves them, metadata as committed) after each of the seven steps
// of a checkpoint and recovers from it: every acknowledged write reads
// back, and no block leaks.
func TestCrashBetweenSteps(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for step := 1; step <= 7; step++ {
		t.Run(fmt.Sprintf("step%d", step), func(t *testing.T) {
			mem := errorfs.NewCrashableMem()
			dir := t.TempDir()
			snap := filepath.Join(dir, "snap.db")
			var n *node
			var armed atomic.Bool
			var clone *errorfs.MemFS
			hook := func(s int) error {
				if armed.Load() && s == step {
					clone = mem.CrashClone()
					snapshotMeta(t, n.meta, snap)
				}
				return nil
			}
			cfg := nodeConfig{fs: mem, root: "/", metaPath: filepath.Join(dir, "meta.db"), tablets: 4,
				opts: checkpoint.WithHook(checkpoint.Options{MaxTSFiles: -1, FlushParallelism: 1}, hook)}
			g := &gen{rnd: rand.New(rand.NewPCG(seed, uint64(step))), rows: 40, vsize: 64}
			var want model
			n, want = prepare(t, cfg, g)
			armed.Store(true)
			if _, err := n.coord.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			n.close()
			if clone == nil {
				t.Fatalf("step %d not reached", step)
			}
			recoverAndCheck(t, nodeConfig{fs: clone, root: "/", metaPath: snap, tablets: 4}, want)
		})
	}
}

// TestCrashInsideCheckpoint crashes the machine before a seeded choice of
// the block store's mutating operations during a checkpoint (inside step
// 6: between block writes, syncs and metadata records).
func TestCrashInsideCheckpoint(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	// Hole punches and pre-flushes run on the block store's background
	// pool, the punches of the compaction before the checkpoint too: they
	// may or may not fall inside the checkpoint, so they are no crash
	// points (the count of crash points must be the same in every run of
	// the same data).
	pred := errorfs.And(errorfs.Mutating(), errorfs.PathMatch("/blocks/*"),
		errorfs.Not(errorfs.Kinds(errorfs.OpPunchHole, errorfs.OpSyncRange)))
	var on atomic.Bool
	var inj atomic.Pointer[errorfs.Injector]
	gate := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !on.Load() {
			return nil
		}
		return (*inj.Load()).MaybeError(op)
	})
	run := func(t *testing.T, mem *errorfs.MemFS, i errorfs.Injector, sub uint64) (*node, model, string) {
		dir := t.TempDir()
		inj.Store(&i)
		on.Store(false)
		cfg := nodeConfig{fs: errorfs.Wrap(mem, gate), root: "/", metaPath: filepath.Join(dir, "meta.db"), tablets: 4,
			opts: checkpoint.Options{MaxTSFiles: -1, FlushParallelism: 1}}
		g := &gen{rnd: rand.New(rand.NewPCG(seed, sub)), rows: 40, vsize: 64}
		n, want := prepare(t, cfg, g)
		on.Store(true)
		n.coord.Checkpoint(context.Background()) //nolint:errcheck // fails after the crash
		on.Store(false)
		return n, want, dir
	}
	rnd := rand.New(rand.NewPCG(seed, 1))
	for k := range 5 {
		sub := uint64(k + 2)
		// Count the block store operations of this very run (same data,
		// same sub-seed), then crash before a random one of them.
		counter := errorfs.NewCounter(pred)
		n, _, _ := run(t, errorfs.NewCrashableMem(), counter, sub)
		n.close()
		total := counter.Count()
		if total < 4 {
			t.Fatalf("only %d block store operations in a checkpoint", total)
		}
		at := rnd.Int64N(total)
		t.Run(fmt.Sprintf("op%d", at), func(t *testing.T) {
			mem := errorfs.NewCrashableMem()
			var clone *errorfs.MemFS
			n, want, dir := run(t, mem, errorfs.CrashAt(at, pred, mem, &clone), sub)
			snap := filepath.Join(dir, "snap.db")
			snapshotMeta(t, n.meta, snap)
			n.close()
			if clone == nil {
				t.Fatalf("no crash at op %d", at)
			}
			recoverAndCheck(t, nodeConfig{fs: clone, root: "/", metaPath: snap, tablets: 4}, want)
		})
	}
}

// failingMeta fails Commit while fail is set.
type failingMeta struct {
	checkpoint.Metadata
	fail atomic.Bool
}

var errMetaDown = errors.New("test: metadata unavailable")

func (f *failingMeta) Commit(ctx context.Context, ups []checkpoint.Update) error {
	if f.fail.Load() {
		return errMetaDown
	}
	return f.Metadata.Commit(ctx, ups)
}

// TestFailuresRetried fails a checkpoint at each place it can fail — a
// flush (injected I/O error), the metadata commit, or a step — and checks
// that writes go on, reads stay right, the next checkpoint completes the
// work, and a restart recovers everything with no leaked block.
func TestFailuresRetried(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	cases := []struct {
		name    string
		failAt  int  // hook step that returns an error (0: none)
		flush   bool // fail block store writes during the checkpoint
		commit  bool // fail the metadata commit
		wantErr error
	}{
		{name: "flush", flush: true, wantErr: checkpoint.ErrFlush},
		{name: "commit", commit: true, wantErr: checkpoint.ErrCommit},
		{name: "step5", failAt: 5},
		{name: "step6", failAt: 6},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			errStep := errors.New("test: injected step failure")
			var armed atomic.Bool
			hook := func(s int) error {
				if armed.Load() && s == tc.failAt {
					return errStep
				}
				return nil
			}
			tog := errorfs.NewToggle(errorfs.And(errorfs.Kinds(errorfs.OpSync), errorfs.PathMatch("*.data")))
			cfg := nodeConfig{fs: errorfs.Wrap(errorfs.NewCrashableMem(), tog), root: "/", metaPath: filepath.Join(dir, "meta.db"),
				tablets: 3, opts: checkpoint.WithHook(checkpoint.Options{MaxTSFiles: -1}, hook)}
			g := &gen{rnd: rand.New(rand.NewPCG(seed, uint64(i))), rows: 30, vsize: 64}
			n, want := prepare(t, cfg, g)
			fm := &failingMeta{Metadata: n.meta}
			// Rewire the coordinator over the failing metadata.
			opts := checkpoint.WithHook(checkpoint.Options{Log: n.log, Meta: fm, Blocks: n.mgr, Refs: n.meta, LogGC: n.log,
				MaxTSFiles: -1, Logger: quiet, Tablets: n.tablets}, hook)
			n.coord = checkpoint.New(opts)
			armed.Store(true)
			tog.Set(tc.flush)
			fm.fail.Store(tc.commit)
			_, err := n.coord.Checkpoint(ctx)
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.failAt != 0 && !errors.Is(err, errStep) {
				t.Fatalf("Checkpoint: %v", err)
			}
			armed.Store(false)
			tog.Set(false)
			fm.fail.Store(false)
			writeN(t, n, g, want, 100, cfg.tablets)
			verify(t, n, want)
			if _, err := n.coord.Checkpoint(ctx); err != nil {
				t.Fatalf("retry checkpoint: %v", err)
			}
			for _, tab := range n.tabs {
				if tab.HasStandby() {
					t.Errorf("tablet %s still has a standby buffer", tab.ID())
				}
			}
			verify(t, n, want)
			n.close()
			cfg.opts = checkpoint.Options{MaxTSFiles: -1}
			recoverAndCheck(t, cfg, want)
		})
	}
}
