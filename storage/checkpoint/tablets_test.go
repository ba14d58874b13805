package checkpoint_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"bighive/storage/checkpoint"
	"bighive/storage/vfs/errorfs"
	"bighive/storage/wal"
)

// TestCheckpointTabletsFlushesOnlyThose: a checkpoint of one tablet (a
// handoff's) flushes its buffer and moves its log position to the file
// rolled to, which then holds none of its records, and leaves the other
// tablets' buffers, files and positions as they were.
func TestCheckpointTabletsFlushesOnlyThose(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: 3,
		opts: checkpoint.Options{MaxTSFiles: -1}}
	n, err := openNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	want := model{}
	writeN(t, n, &gen{rnd: rand.New(rand.NewPCG(1, 2)), rows: 40, vsize: 64}, want, 300, cfg.tablets)
	type before struct {
		mem       int64
		files     int
		positions string
	}
	was := map[string]before{}
	for _, tab := range n.tabs {
		m, err := n.meta.Get(tab.ID())
		if err != nil {
			t.Fatal(err)
		}
		if tab.MemoryUsage() == 0 {
			t.Fatalf("tablet %s took no write", tab.ID())
		}
		was[tab.ID()] = before{tab.MemoryUsage(), len(tab.Files()), positionsString(m.LogPositions)}
	}
	picked := n.tabs[1]
	res, err := n.coord.CheckpointTablets(ctx, func(t checkpoint.Tablet) bool { return t.ID() == picked.ID() })
	if err != nil {
		t.Fatal(err)
	}
	if res.Flushed != 1 || res.Committed != 1 {
		t.Fatalf("checkpoint of one tablet: %+v, want 1 flushed and committed", res)
	}
	for _, tab := range n.tabs {
		m, err := n.meta.Get(tab.ID())
		if err != nil {
			t.Fatal(err)
		}
		b := was[tab.ID()]
		now := before{tab.MemoryUsage(), len(tab.Files()), positionsString(m.LogPositions)}
		if tab == picked {
			if now.mem != 0 || now.files != b.files+1 || now.positions == b.positions {
				t.Errorf("the picked tablet %s: %+v before, %+v after; want its buffer flushed into one more file and a new position", tab.ID(), b, now)
			}
			continue
		}
		if now != b {
			t.Errorf("tablet %s, not picked: %+v before, %+v after; want nothing changed", tab.ID(), b, now)
		}
	}
	// The picked tablet's next load replays nothing and reads every write.
	m, err := n.meta.Get(picked.ID())
	if err != nil {
		t.Fatal(err)
	}
	e, err := openLoad(n.mgr, m, n.log, admitter{n})
	if err != nil {
		t.Fatal(err)
	}
	picked.Close()
	rep, err := checkpoint.RecoverTablet(ctx, e, m.LogPositions, n.cfg.fs, n.cfg.root)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 0 {
		t.Errorf("the picked tablet's next load replayed %d records, want 0", rep.Records)
	}
	if !e.Serve() {
		t.Fatal("the new load did not serve")
	}
	n.tabs[1], n.byID[picked.ID()] = e, e
	verify(t, n, want)
}

func positionsString(ps []wal.Position) string {
	var out string
	for _, p := range ps {
		out += p.String() + " "
	}
	return out
}
