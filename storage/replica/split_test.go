package replica_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"bighive/storage/split"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
	"bighive/storage/wal"
)

// splitMaster is the master seam of a split: it hands out two ids and
// commits every report.
type splitMaster struct{}

func (splitMaster) AllocateTabletIDs(context.Context, int) ([]string, error) {
	return []string{"c1", "c2"}, nil
}

func (splitMaster) ReportSplit(context.Context, split.Report) error { return nil }

// TestCancelDuringChildLogAppend runs a real split of the replica's tablet
// and, while it dual-writes, cancels a write's request context while its
// split-log append is in flight (held back by the errorfs seam). The
// split must still commit, and the write come back either acknowledged —
// then visible in the parent and in its child's log, which the
// child replays — or failed and in neither log.
func TestCancelDuringChildLogAppend(t *testing.T) {
	hold := newHoldOnce(errorfs.OpWrite, "/splitlog/")
	g := newRig(t, hold)
	for _, row := range []string{"a", "b", "y", "z"} {
		if err := g.rep.Write(context.Background(), put(row, "before")); err != nil {
			t.Fatal(err)
		}
	}
	routed, cont := make(chan struct{}), make(chan struct{})
	opts := split.Options{FS: g.fs, Root: g.root, Blocks: g.mgr, Exclusive: g.coord.Exclusive, BeginSplit: g.coord.BeginSplit,
		Master: splitMaster{}, Logger: quiet,
		OpenFile: func(f tsfile.Info) (*tsfile.Reader, error) {
			return tsfile.Open(g.mgr, f.FooterRef(), tsfile.ReaderOptions{})
		},
		Hook: func(s split.Step) error {
			if s == split.StepChildLogs {
				close(routed)
				<-cont
			}
			return nil
		}}
	req := split.Request{TabletID: "t1", Epoch: 1, Start: g.rep.Start(), End: g.rep.End(), Row: []byte("m"), Tablet: g.rep, Route: g.rep.Route}
	splitDone := make(chan error, 1)
	go func() { _, err := split.Run(context.Background(), opts, req); splitDone <- err }()
	<-routed // dual-writing from here on

	hold.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- g.rep.Write(ctx, put("x", "v")) }()
	<-hold.entered // in the WAL; its split-log write is in flight
	cancel()
	var err error
	returned := false
	select { // the outcome, not the time, is checked
	case err = <-res:
		returned = true
	case <-time.After(200 * time.Millisecond):
	}
	close(hold.release)
	if !returned {
		err = <-res
	}
	close(cont)
	if serr := <-splitDone; serr != nil {
		t.Fatalf("split: %v", serr)
	}
	inChildLog := false
	if _, rerr := wal.ReplayFile(vfs.Default, filepath.Join(g.root, split.ChildLogPath("c2")), func(rec *wal.Record) error {
		inChildLog = inChildLog || string(rec.Mutation.Row) == "x"
		return nil
	}); rerr != nil {
		t.Fatalf("replay the child log: %v", rerr)
	}
	vis, inLog := g.visible(t, "x", "v"), g.logged(t, "x")
	t.Logf("write returned %v; visible %v, in the log %v, in the child log %v", err, vis, inLog, inChildLog)
	switch {
	case err == nil && (!vis || !inChildLog):
		t.Fatalf("an acknowledged write is visible %v, in its child's log %v", vis, inChildLog)
	case err != nil && inLog && !vis:
		t.Fatalf("write failed with %v, but its record is in the log and not applied", err)
	case err != nil && errors.Is(err, context.Canceled):
		t.Fatalf("the request context cut the write short after it was logged: %v", err)
	}
}
