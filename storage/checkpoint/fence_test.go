package checkpoint_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/replica"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/vfs/errorfs"
)

// The tests of this file drive the fencing rule (doc.go, 'Fencing'): a
// background commit is computed for one load of a tablet and refused when
// that load no longer serves, when the metadata moved on, or without a
// lease; a refused commit installs and deletes nothing.

// fenceNode is a one-tablet node with three TSFiles, its coordinator made
// anew from opts (Log, Meta, Blocks, Refs, LogGC, Tablets and Logger are
// filled in; a nil Meta is the node's own).
// g is the generator that wrote the files: later writes continue its
// timestamps.
func fenceNode(t *testing.T, seed uint64, opts checkpoint.Options) (n *node, want model, cfg nodeConfig, g *gen) {
	t.Helper()
	cfg = nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 1,
		opts: checkpoint.Options{MaxTSFiles: -1}}
	g = &gen{rnd: rand.New(rand.NewPCG(seed, 7)), rows: 30, vsize: 64}
	n, want = prepare(t, cfg, g)
	t.Cleanup(func() { n.close() })
	if opts.Meta == nil {
		opts.Meta = n.meta
	}
	opts.Log, opts.Blocks, opts.Refs, opts.LogGC, opts.Tablets, opts.Logger = n.log, n.mgr, n.meta, n.log, n.tablets, quiet
	opts.MaxTSFiles = -1
	n.coord = checkpoint.New(opts)
	if got := len(n.byID[tabletID(0)].Files()); got < 2 {
		t.Fatalf("tablet has %d TSFiles, want at least 2 to compact", got)
	}
	return n, want, cfg, g
}

// metaFiles returns the footers of the files the metadata names for id.
func metaFiles(t *testing.T, n *node, id string) []blockstore.BlockRef {
	t.Helper()
	m, err := n.meta.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]blockstore.BlockRef, len(m.TSFiles))
	for i, f := range m.TSFiles {
		out[i] = f.FooterRef()
	}
	return out
}

// missingBlocks returns the blocks of files that the block store lacks.
func missingBlocks(t *testing.T, n *node, files []tsfile.Info) []blockstore.BlockID {
	t.Helper()
	ids, err := n.mgr.AllBlockIDs()
	if err != nil {
		t.Fatal(err)
	}
	have := map[blockstore.BlockID]bool{}
	for _, id := range ids {
		have[id] = true
	}
	var missing []blockstore.BlockID
	for _, f := range files {
		for _, b := range f.Blocks {
			if !have[b] {
				missing = append(missing, b)
			}
		}
	}
	return missing
}

// TestRefusedCompactionDeletesNothing: a compaction whose commit the
// metadata refuses — the tablet went to another tserver at a new epoch
// (failover), or a merge deleted it — installs nothing and deletes none of
// the files it would have replaced: the new owner reads them.
func TestRefusedCompactionDeletesNothing(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		refuse func(t *testing.T, n *node, id string) // changes the metadata under the compaction
		why    error
	}{
		{"failover", func(t *testing.T, n *node, id string) {
			m, err := n.meta.Get(id)
			if err != nil {
				t.Fatal(err)
			}
			m.Epoch++
			if err := n.meta.Put(ctx, m); err != nil {
				t.Fatal(err)
			}
		}, checkpoint.ErrStaleEpoch},
		{"merged away", func(t *testing.T, n *node, id string) {
			if err := n.meta.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}, checkpoint.ErrUnknownTablet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, want, _, _ := fenceNode(t, seed, checkpoint.Options{})
			id := tabletID(0)
			e := n.byID[id]
			before := e.Files()
			tc.refuse(t, n, id)
			for _, major := range []bool{false, true} {
				err := n.coord.Compact(ctx, e, major)
				if !errors.Is(err, tc.why) || !errors.Is(err, checkpoint.ErrCommit) {
					t.Fatalf("compaction (major %v) refused by the metadata returned %v, want ErrCommit wrapping %v", major, err, tc.why)
				}
			}
			if got := e.Files(); len(got) != len(before) {
				t.Fatalf("a refused compaction changed the read set: %d files, was %d", len(got), len(before))
			}
			if missing := missingBlocks(t, n, before); len(missing) > 0 {
				t.Fatalf("a refused compaction deleted %d blocks of files it did not own any more: %v", len(missing), missing)
			}
			if tc.why == checkpoint.ErrStaleEpoch {
				// The new owner opens the files the metadata names.
				m, err := n.meta.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				reload(t, n, id, m.Epoch)
				verify(t, n, want)
			}
		})
	}
}

// TestEndedLoadCommitRefused: the tablet is unloaded and loaded again at
// the same epoch on the same node while a compaction of the old load is
// between its write and its commit, or a checkpoint between its flush
// (step 6) and its commit (step 7). The old load's engine is closed, its
// read set empty: committed, the compaction's list would name no file and
// the checkpoint's only its flushed file (with the new log position), and
// a restart would lose every older flushed write. Both must be refused.
func TestEndedLoadCommitRefused(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	id := tabletID(0)
	for _, tc := range []struct {
		name       string
		checkpoint bool // the load ends in a checkpoint, not a compaction
	}{{"compaction", false}, {"checkpoint step 7", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var n *node
			var once atomic.Bool
			reloadOnce := func() error {
				if !once.CompareAndSwap(false, true) {
					return nil
				}
				m, err := n.meta.Get(id)
				if err != nil {
					return err
				}
				reload(t, n, id, m.Epoch) // same epoch: a new load, not a new assignment
				return nil
			}
			opts := checkpoint.WithCompactHook(checkpoint.Options{}, func(checkpoint.Tablet) {
				if err := reloadOnce(); err != nil {
					t.Error(err)
				}
			})
			if tc.checkpoint {
				opts = checkpoint.WithHook(checkpoint.Options{}, func(step int) error {
					if step == 6 {
						return reloadOnce()
					}
					return nil
				})
			}
			n, want, cfg, g := fenceNode(t, seed, opts)
			writeN(t, n, g, want, 100, 1)
			recorded := metaFiles(t, n, id)
			var err error
			if tc.checkpoint {
				_, err = n.coord.Checkpoint(ctx)
			} else {
				err = n.coord.Compact(ctx, n.byID[id], true)
			}
			if !errors.Is(err, checkpoint.ErrLoadEnded) {
				t.Fatalf("commit of an ended load returned %v, want ErrLoadEnded", err)
			}
			if got := metaFiles(t, n, id); !slices.Equal(got, recorded) {
				t.Fatalf("the ended load's commit changed the metadata's files: %v, was %v", got, recorded)
			}
			verify(t, n, want)
			writeN(t, n, g, want, 50, 1)
			if _, err := n.coord.Checkpoint(ctx); err != nil {
				t.Fatalf("checkpoint of the new load: %v", err)
			}
			if err := n.coord.Compact(ctx, n.byID[id], true); err != nil {
				t.Fatalf("compaction of the new load: %v", err)
			}
			verify(t, n, want)
			n.close()
			recoverAndCheck(t, cfg, want)
		})
	}
}

// failInstall is a load whose InstallFlushed fails while fail is set.
type failInstall struct {
	*replica.Replica
	fail atomic.Bool
}

var errInstall = errors.New("test: install failed")

func (f *failInstall) InstallFlushed(info tsfile.Info) error {
	if f.fail.Load() {
		return errInstall
	}
	return f.Replica.InstallFlushed(info)
}

// TestInstallFlushedFailureKeepsFile: step 7 committed a flushed file but
// its install failed. The checkpoint reports it, and the file stays
// pending: the next update names it again and installs it, rather than
// dropping it from the metadata.
func TestInstallFlushedFailureKeepsFile(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	id := tabletID(0)
	var fi *failInstall
	n, want, cfg, g := fenceNode(t, seed, checkpoint.Options{})
	fi = &failInstall{Replica: n.byID[id]}
	opts := checkpoint.Options{Log: n.log, Meta: n.meta, Blocks: n.mgr, Refs: n.meta, LogGC: n.log, MaxTSFiles: -1, Logger: quiet,
		Tablets: func() []checkpoint.Tablet { return []checkpoint.Tablet{fi} }}
	n.coord = checkpoint.New(opts)
	writeN(t, n, g, want, 100, 1)
	readSet := len(fi.Files())
	fi.fail.Store(true)
	if _, err := n.coord.Checkpoint(ctx); !errors.Is(err, errInstall) {
		t.Fatalf("checkpoint whose install failed returned %v, want the install's error", err)
	}
	named := metaFiles(t, n, id)
	if len(named) != readSet+1 || len(fi.Files()) != readSet {
		t.Fatalf("after the failed install the metadata names %d files and the read set holds %d; want %d and %d",
			len(named), len(fi.Files()), readSet+1, readSet)
	}
	flushed := named[0]
	fi.fail.Store(false)
	writeN(t, n, g, want, 50, 1)
	if _, err := n.coord.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint after the failed install: %v", err)
	}
	now := metaFiles(t, n, id)
	found := false
	for _, f := range fi.Files() {
		found = found || f.FooterRef() == flushed
	}
	if !found || !slices.Contains(now, flushed) {
		t.Fatalf("the file whose install failed (%v) is not in the read set (%v) and the metadata (%v)", flushed, found, now)
	}
	verify(t, n, want)
	n.close()
	recoverAndCheck(t, cfg, want)
}

// lostReply is a Metadata that applies a commit and then fails it, as a
// master whose reply was lost does, while lose is set; after is called
// after each commit the inner metadata accepted.
type lostReply struct {
	checkpoint.Metadata
	lose  atomic.Bool
	after func()
}

func (l *lostReply) Commit(ctx context.Context, ups []checkpoint.Update) error {
	if err := l.Metadata.Commit(ctx, ups); err != nil {
		return err
	}
	if l.after != nil {
		l.after()
	}
	if l.lose.Load() {
		return errMetaDown
	}
	return nil
}

// TestCompactionOutcomeUnknown: a compaction's commit applied but its reply
// was lost. The compaction stays pending: nothing is installed or deleted
// yet, the next checkpoint names its output again (a compare-and-swap the
// metadata accepts), and then it is installed and its run deleted.
func TestCompactionOutcomeUnknown(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	id := tabletID(0)
	lr := &lostReply{}
	n, want, cfg, g := fenceNode(t, seed, checkpoint.Options{Meta: lr})
	lr.Metadata = n.meta
	e := n.byID[id]
	run := e.Files()
	lr.lose.Store(true)
	if err := n.coord.Compact(ctx, e, true); !errors.Is(err, errMetaDown) {
		t.Fatalf("compaction whose reply was lost returned %v, want the commit's error", err)
	}
	lr.lose.Store(false)
	if named := metaFiles(t, n, id); len(named) != 1 {
		t.Fatalf("the metadata names %d files after the lost reply, want the compaction's 1", len(named))
	}
	if len(e.Files()) != len(run) || len(missingBlocks(t, n, run)) > 0 {
		t.Fatal("a compaction whose outcome is unknown installed or deleted something")
	}
	writeN(t, n, g, want, 50, 1)
	if _, err := n.coord.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint after the lost reply: %v", err)
	}
	if got := len(e.Files()); got != 2 {
		t.Fatalf("after the checkpoint the read set holds %d files, want 2 (the flush and the compaction)", got)
	}
	if missing := missingBlocks(t, n, run); len(missing) != blockCount(run) {
		t.Fatalf("%d of the run's %d blocks were deleted, want all", len(missing), blockCount(run))
	}
	verify(t, n, want)
	n.close()
	recoverAndCheck(t, cfg, want)
}

func blockCount(files []tsfile.Info) int {
	n := 0
	for _, f := range files {
		n += len(f.Blocks)
	}
	return n
}

// TestNoLeaseNoBackgroundWork: without a valid lease no checkpoint,
// compaction or orphan pass runs, and a compaction whose lease ran out
// after its commit was accepted installs its output but deletes nothing:
// the orphan pass collects the run once the lease holds again.
func TestNoLeaseNoBackgroundWork(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	id := tabletID(0)
	var lease atomic.Bool
	lr := &lostReply{}
	n, want, cfg, _ := fenceNode(t, seed, checkpoint.Options{Meta: lr, Lease: lease.Load})
	lr.Metadata = n.meta
	e := n.byID[id]
	if _, err := n.coord.Checkpoint(ctx); !errors.Is(err, checkpoint.ErrNoLease) {
		t.Fatalf("checkpoint without a lease: %v, want ErrNoLease", err)
	}
	if err := n.coord.Compact(ctx, e, true); !errors.Is(err, checkpoint.ErrNoLease) {
		t.Fatalf("compaction without a lease: %v, want ErrNoLease", err)
	}
	if _, err := n.coord.CollectOrphans(ctx, 0); !errors.Is(err, checkpoint.ErrNoLease) {
		t.Fatalf("orphan pass without a lease: %v, want ErrNoLease", err)
	}

	lease.Store(true)
	lr.after = func() { lease.Store(false) } // the lease runs out as the commit is accepted
	run := e.Files()
	if err := n.coord.Compact(ctx, e, true); err != nil {
		t.Fatalf("compaction whose lease ran out after its commit: %v", err)
	}
	if len(e.Files()) != 1 {
		t.Fatalf("the accepted compaction was not installed: %d files", len(e.Files()))
	}
	if missing := missingBlocks(t, n, run); len(missing) > 0 {
		t.Fatalf("%d blocks deleted without a lease", len(missing))
	}
	lr.after = nil
	lease.Store(true)
	if _, err := n.coord.CollectOrphans(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if missing := missingBlocks(t, n, run); len(missing) != blockCount(run) {
		t.Fatalf("the orphan pass deleted %d of the run's %d blocks, want all", len(missing), blockCount(run))
	}
	verify(t, n, want)
	n.close()
	recoverAndCheck(t, cfg, want)
}
