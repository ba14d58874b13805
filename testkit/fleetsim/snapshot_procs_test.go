package fleetsim

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/master"
	"bighive/testkit/wait"
)

// snapshotRestoreProcs is scenario 5 with master processes. No RPC takes
// a snapshot, so raft takes them itself: every second once 8 entries
// were applied since the last one, keeping 1 entry of log after it. A
// follower stopped while a table is created can then catch up only by
// installing the leader's snapshot.
func snapshotRestoreProcs(t *testing.T, s size) {
	w, _ := newWorld(t, s, Config{}, func(c *master.Config) {
		c.Raft.TrailingLogs, c.Raft.SnapshotThreshold, c.Raft.SnapshotInterval = 1, 8, time.Second
	})
	ctx := ctxFor(t, s.budget())
	l, f := w.followerMisses(ctx)
	applied, err := w.ms.AppliedIndex(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Now()
	// Raft snapshots only once SnapshotThreshold entries were applied since
	// its last snapshot; with batched load reports and chunked DDL the
	// scenario may end fewer than that past it. Every 2 s without a
	// snapshot a small table is created, whose commands (create, assign,
	// loads) pass the threshold.
	nudged, nudges := time.Now(), 0
	sm, err := w.ms.NewestSnapshot(l)
	for ; err == nil && (sm == nil || sm.Index < applied); sm, err = w.ms.NewestSnapshot(l) {
		select {
		case <-ctx.Done():
			t.Fatalf("the leader took no snapshot at index %d or later (%d tables created to pass the threshold): %v", applied, nudges, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(nudged) > 2*time.Second {
			w.createTable(ctx, fmt.Sprintf("nudge%d", nudges), 9)
			nudged, nudges = time.Now(), nudges+1
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot: %d tablets, %d bytes (%.1f MiB) at index %d, taken by raft within %v of the table being served",
		s.tablets+10, sm.Size, float64(sm.Size)/(1<<20), sm.Index, time.Since(waited).Round(time.Millisecond))
	before, err := w.ms.NewestSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	w.ms.Start(f)
	wait.ForCtx(t, ctx, fmt.Sprintf("follower %s at index %d", w.ms.Peers[f].ID, sm.Index), func() error {
		a, err := w.ms.AppliedIndex(ctx, f)
		if err == nil && a < sm.Index {
			err = fmt.Errorf("index %d", a)
		}
		return err
	})
	restored := time.Since(began)
	installed, err := w.ms.NewestSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot: follower %s reached the snapshot's index %v after its start", w.ms.Peers[f].ID, restored.Round(time.Millisecond))
	// Its own snapshots predate its stop; one at the leader's index or
	// later can only be the installed one (the log it would have caught up
	// from is gone).
	if installed == nil || installed.Index < sm.Index || (before != nil && installed.ID == before.ID) {
		t.Fatalf("follower's newest snapshot %+v (before its stop %+v) is not the leader's at index %d: it did not install it", installed, before, sm.Index)
	}
	w.logMasters("snapshot", w.u0)
	w.fl.Close()
	dumps, err := w.ms.StopAndDump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range dumps {
		if !bytes.Equal(d, dumps[l]) {
			t.Fatalf("%s's metadata dump (%d bytes) differs from the leader's (%d bytes)", w.ms.Peers[i].ID, len(d), len(dumps[l]))
		}
	}
	t.Logf("snapshot: all 3 metadata dumps agree byte for byte (%d bytes each)", len(dumps[l]))
}

// followerMisses stops follower f and creates a table of 10 tablets that
// it misses, so that once a snapshot compacted the log it can catch up
// only by installing the snapshot; l is the leader.
func (w *world) followerMisses(ctx context.Context) (l, f int) {
	w.t.Helper()
	l = w.leader()
	f = (l + 1) % 3
	w.ms.Stop(f)
	w.createTable(ctx, "after", 9)
	w.waitServed(ctx, w.s.tablets+10)
	return l, f
}
