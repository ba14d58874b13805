package checkpoint_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/vfs/errorfs"
)

// reload replaces tablet id of n by a new load, made the way a tserver
// loads an assigned tablet: the old one is closed (unloaded), the metadata
// moves to epoch (an assignment), the new load opens the files the
// metadata names, replays its log positions, and adds the current
// position before it serves.
func reload(t *testing.T, n *node, id string, epoch int64) {
	t.Helper()
	ctx := context.Background()
	old := n.byID[id]
	old.Close()
	m, err := n.meta.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	m.Epoch = epoch
	if err := n.meta.Put(ctx, m); err != nil {
		t.Fatal(err)
	}
	e, err := openLoad(n.mgr, m, n.log, admitter{n})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.RecoverTablet(ctx, e, m.LogPositions, n.cfg.fs, n.cfg.root); err != nil {
		t.Fatalf("replay %s: %v", id, err)
	}
	if err := n.meta.AddLogPosition(ctx, id, epoch, n.log.Position()); err != nil {
		t.Fatal(err)
	}
	if !e.Serve() {
		t.Fatalf("tablet %s: the new load stopped before it served", id)
	}
	for i, tab := range n.tabs {
		if tab == old {
			n.tabs[i] = e
		}
	}
	n.byID[id] = e
}

// TestReloadedTabletIgnoresOldFlush: a checkpoint flushes a tablet's
// buffer but its metadata commit fails (the master unreachable) or is
// refused (the tablet moved away meanwhile); the tablet is then unloaded
// and, later, loaded here again (it moved back), and takes writes. The
// next checkpoint must flush the new load's buffer, not commit the old
// load's leftover file in its place: that file lacks every write since,
// and committing it with the new log position loses them.
func TestReloadedTabletIgnoresOldFlush(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, tc := range []struct {
		name   string
		refuse bool // the commit is refused (stale epoch) rather than failed
	}{
		{name: "commit failed"},
		{name: "commit refused", refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 2,
				opts: checkpoint.Options{MaxTSFiles: -1}}
			g := &gen{rnd: rand.New(rand.NewPCG(seed, uint64(i))), rows: 30, vsize: 64}
			n, want := prepare(t, cfg, g)
			defer func() { n.close() }()
			fm := &failingMeta{Metadata: n.meta}
			n.coord = checkpoint.New(checkpoint.Options{Log: n.log, Meta: fm, Blocks: n.mgr, Refs: n.meta, LogGC: n.log,
				MaxTSFiles: -1, Logger: quiet, Tablets: n.tablets})
			id := tabletID(0)
			epoch := n.byID[id].Epoch()

			if tc.refuse {
				// The tablet moved away: its metadata is at a later epoch.
				m, err := n.meta.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				epoch++
				m.Epoch = epoch
				if err := n.meta.Put(ctx, m); err != nil {
					t.Fatal(err)
				}
				res, err := n.coord.Checkpoint(ctx)
				var ref *checkpoint.RefusedError
				if !errors.As(err, &ref) || ref.Tablets[id] == nil || !errors.Is(err, checkpoint.ErrStaleEpoch) {
					t.Fatalf("checkpoint with a refused tablet: %v, want a RefusedError naming %s for its stale epoch", err, id)
				}
				if res.Committed != cfg.tablets-1 {
					t.Fatalf("checkpoint committed %d tablets, want %d (all but the refused one)", res.Committed, cfg.tablets-1)
				}
			} else {
				fm.fail.Store(true)
				if _, err := n.coord.Checkpoint(ctx); !errors.Is(err, checkpoint.ErrCommit) {
					t.Fatalf("checkpoint with the metadata down: %v, want ErrCommit", err)
				}
				fm.fail.Store(false)
			}
			if !n.byID[id].HasStandby() {
				t.Fatal("the failed checkpoint left no standby buffer; the test proves nothing")
			}

			// Unloaded, and loaded here again at a later epoch.
			epoch++
			reload(t, n, id, epoch)
			verify(t, n, want)
			for range 100 {
				m := g.next()
				if err := n.write(ctx, id, m); err != nil {
					t.Fatalf("write: %v", err)
				}
				want.apply(id, m)
			}
			res, err := n.coord.Checkpoint(ctx)
			if err != nil {
				t.Fatalf("checkpoint after the reload: %v", err)
			}
			if res.Committed != cfg.tablets {
				t.Fatalf("checkpoint after the reload committed %d tablets, want %d", res.Committed, cfg.tablets)
			}
			verify(t, n, want)
			n.close()
			n = &node{}
			recoverAndCheck(t, cfg, want)
		})
	}
}
