package meta

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	spb "bighive/proto/storagepb"
	"bighive/testkit/wait"
)

// fastRaft is a raft configuration for tests on loopback.
func fastRaft() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 20
	c.SnapshotInterval = time.Hour
	return c
}

func openTestNode(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := OpenNode(NodeConfig{ID: "m1", Dir: dir, RaftAddr: "127.0.0.1:0", Raft: fastRaft(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the single node to lead", func() error {
		if s := n.Raft.State(); s != raft.Leader {
			return fmt.Errorf("state %v", s)
		}
		return nil
	})
	return n
}

func nodeApply(t *testing.T, n *Node, cmd *spb.MetaCommand) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.Apply(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func tableCount(t *testing.T, n *Node) int {
	t.Helper()
	var c int
	if err := n.FSM.View(func(r *Reader) error { ts, err := r.Tables(); c = len(ts); return err }); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNodeRestart: a single node bootstraps once, keeps its state across a
// restart without applying any entry twice, and rebuilds a lost meta.db
// from its newest snapshot plus the log.
func TestNodeRestart(t *testing.T) {
	dir := t.TempDir()
	n := openTestNode(t, dir)
	nodeApply(t, n, createCmd("a", "k"))
	ids := nodeApply(t, n, &spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{Count: 3}}}).IDs
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = openTestNode(t, dir) // no second bootstrap; replayed entries skipped
	if c := tableCount(t, n); c != 1 {
		t.Fatalf("after restart %d tables", c)
	}
	next := nodeApply(t, n, &spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{Count: 1}}}).IDs
	if next[0] <= ids[2] {
		t.Fatalf("id counter went back: %s after %s (entries applied twice?)", next[0], ids[2])
	}
	if err := n.Raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	nodeApply(t, n, createCmd("b")) // after the snapshot: only in the log
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(dir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	n = openTestNode(t, dir)
	defer n.Close()
	wait.For(t, 5*time.Second, "the rebuilt state's 2 tables", func() error {
		if got := tableCount(t, n); got != 2 {
			return fmt.Errorf("%d tables", got)
		}
		return nil
	})
}
