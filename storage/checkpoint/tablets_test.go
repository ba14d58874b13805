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
	n, want := writtenNode(t, 3, 1)
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
	if rep := reloadTablet(t, n, 1); rep.Records != 0 {
		t.Errorf("the picked tablet's next load replayed %d records, want 0", rep.Records)
	}
	verify(t, n, want)
}

// TestCheckpointFencedTabletNeedsNoLog: a checkpoint of a tablet whose
// writes are fenced (a handoff's last flush) empties its list of log
// positions: its next load reads no log file and reads every write.
func TestCheckpointFencedTabletNeedsNoLog(t *testing.T) {
	ctx := context.Background()
	n, want := writtenNode(t, 2, 3)
	picked, other := n.tabs[0], n.tabs[1]
	picked.FenceWrites()
	keep := func(t checkpoint.Tablet) bool { return t.ID() == picked.ID() }
	if res, err := n.coord.CheckpointTablets(ctx, keep); err != nil || res.Committed != 1 {
		t.Fatalf("checkpoint of the fenced tablet: %+v, %v", res, err)
	}
	m, err := n.meta.Get(picked.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.LogPositions) != 0 {
		t.Fatalf("the fenced tablet's positions after its checkpoint: %v, want none", m.LogPositions)
	}
	if om, err := n.meta.Get(other.ID()); err != nil || len(om.LogPositions) == 0 {
		t.Fatalf("the other tablet's positions: %v, %v; want them kept", om.LogPositions, err)
	}
	if rep := reloadTablet(t, n, 0); len(rep.Files) != 0 || rep.Records != 0 {
		t.Errorf("the fenced tablet's next load read %d log files, %d records; want none", len(rep.Files), rep.Records)
	}
	verify(t, n, want)
}

// writtenNode opens a node of the given tablets and writes 300 rows
// into them (seed picks them); it closes with the test.
func writtenNode(t *testing.T, tablets int, seed uint64) (*node, model) {
	cfg := nodeConfig{fs: errorfs.NewCrashableMem(), root: "/", metaPath: filepath.Join(t.TempDir(), "meta.db"), tablets: tablets,
		opts: checkpoint.Options{MaxTSFiles: -1}}
	n, err := openNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.close() })
	want := model{}
	writeN(t, n, &gen{rnd: rand.New(rand.NewPCG(seed, seed+1)), rows: 40, vsize: 64}, want, 300, cfg.tablets)
	return n, want
}

// reloadTablet ends the load of the node's i-th tablet and loads it again from
// its metadata, as its next owner would: it returns what its replay read.
func reloadTablet(t *testing.T, n *node, i int) checkpoint.RecoveryReport {
	old := n.tabs[i]
	m, err := n.meta.Get(old.ID())
	if err != nil {
		t.Fatal(err)
	}
	e, err := openLoad(n.mgr, m, n.log, admitter{n})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	rep, err := checkpoint.RecoverTablet(context.Background(), e, m.LogPositions, n.cfg.fs, n.cfg.root)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Serve() {
		t.Fatal("the new load did not serve")
	}
	n.tabs[i], n.byID[old.ID()] = e, e
	return rep
}

func positionsString(ps []wal.Position) string {
	var out string
	for _, p := range ps {
		out += p.String() + " "
	}
	return out
}
