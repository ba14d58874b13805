package meta

import (
	"slices"
	"testing"

	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func logSplitCmd(prefix string, items ...*spb.MetaLogSplitDone_Item) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_LogSplitDone{LogSplitDone: &spb.MetaLogSplitDone{Prefix: prefix, Items: items}}}
}

// unassignedPair: tablets t1 and t2 loaded on a at a_1/100, t1 also at
// b_1/50 (it was on b before), both unassigned at epoch 1 (a died).
func unassignedPair(t *testing.T) (f *testFSM, t1, t2 string) {
	f = openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	f.mustApply(registerCmd("b", 1))
	t1, t2 = FormatTabletID(1), FormatTabletID(2)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"}))
	f.mustApply(loadCmd(t1, 1, "a", "a_1", 100))
	f.mustApply(loadCmd(t2, 1, "a", "a_1", 100))
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "a", Reports: []*pb.CheckpointReport{
		{TabletId: t1, Epoch: 1, LogPositions: []*pb.LogPosition{{Prefix: "b_1", FileTimestamp: 50}, {Prefix: "a_1", FileTimestamp: 100}}}}}}})
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Unassign{Unassign: &spb.MetaUnassign{Items: []*spb.MetaUnassign_Item{
		{TabletId: t1, ExpectedEpoch: 1, ExpectedTserver: "a"}, {TabletId: t2, ExpectedEpoch: 1, ExpectedTserver: "a"}}}}})
	return f, t1, t2
}

// TestLogSplitDoneAndRecoveryGC: a split replaces the dead prefix's
// positions by recovery files only for tablets still unassigned at the
// planned epoch and position (only a_1 is split; t1's b_1 position stays);
// the first checkpoint moves the files to the garbage list; deleting them
// empties it.
func TestLogSplitDoneAndRecoveryGC(t *testing.T) {
	f, t1, t2 := unassignedPair(t)

	res := f.mustApply(logSplitCmd("a_1",
		&spb.MetaLogSplitDone_Item{TabletId: t1, ExpectedEpoch: 1, FromFileTimestamp: 100, RecoveryFiles: []string{"recovery/x/t1.log", "recovery/y/t1.log"}},
		&spb.MetaLogSplitDone_Item{TabletId: t2, ExpectedEpoch: 1, FromFileTimestamp: 99, RecoveryFiles: []string{"recovery/x/t2.log"}}, // planned from another position
		&spb.MetaLogSplitDone_Item{TabletId: "t00000000000000ff", ExpectedEpoch: 1}))
	if res.Applied != 1 {
		t.Fatalf("applied %d items, want 1", res.Applied)
	}
	tm := f.tablet(t1)
	if len(tm.LogPositions) != 1 || tm.LogPositions[0].Prefix != "b_1" || !slices.Equal(tm.RecoveryFiles, []string{"recovery/x/t1.log", "recovery/y/t1.log"}) {
		t.Fatalf("after split: positions %v, recovery files %v", tm.LogPositions, tm.RecoveryFiles)
	}
	if tm := f.tablet(t2); len(tm.LogPositions) != 1 || len(tm.RecoveryFiles) != 0 {
		t.Fatalf("mismatched item changed t2: %v", tm)
	}
	// An assigned tablet is never changed by a late split.
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t2, ExpectedEpoch: 1, TserverUuid: "b"}))
	if res := f.mustApply(logSplitCmd("a_1", &spb.MetaLogSplitDone_Item{TabletId: t2, ExpectedEpoch: 1, FromFileTimestamp: 100})); res.Applied != 0 {
		t.Fatal("split applied to an assigned tablet")
	}

	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, ExpectedEpoch: 1, TserverUuid: "b"}))
	f.mustApply(loadCmd(t1, 2, "b", "b_1", 200))
	garbage := func() (g []string, inUse map[string]bool) {
		_ = f.View(func(r *Reader) (err error) {
			g = r.RecoveryGarbage(10)
			inUse, err = r.RecoveryFilesInUse()
			return err
		})
		return g, inUse
	}
	if g, inUse := garbage(); len(g) != 0 || len(inUse) != 2 {
		t.Fatalf("before the checkpoint: garbage %v, in use %v", g, inUse)
	}
	// A compaction's report (no positions) keeps them.
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "b", Reports: []*pb.CheckpointReport{
		{TabletId: t1, Epoch: 2}}}}})
	if len(f.tablet(t1).RecoveryFiles) != 2 {
		t.Fatal("a compaction dropped the recovery files")
	}
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "b", Reports: []*pb.CheckpointReport{
		{TabletId: t1, Epoch: 2, LogPositions: []*pb.LogPosition{{Prefix: "b_1", FileTimestamp: 300}}}}}}})
	g, inUse := garbage()
	if len(f.tablet(t1).RecoveryFiles) != 0 || !slices.Equal(g, []string{"recovery/x/t1.log", "recovery/y/t1.log"}) || len(inUse) != 0 {
		t.Fatalf("after the checkpoint: tablet %v, garbage %v, in use %v", f.tablet(t1).RecoveryFiles, g, inUse)
	}
	res = f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_RecoveryFilesDeleted{RecoveryFilesDeleted: &spb.MetaRecoveryFilesDeleted{
		Paths: []string{"recovery/x/t1.log", "recovery/y/t1.log", "recovery/z/none.log"}}}})
	if g, _ := garbage(); res.Applied != 2 || len(g) != 0 {
		t.Fatalf("after deletion: applied %d, garbage %v", res.Applied, g)
	}
}

// TestLogCleanCheckpoint: a handoff's report (log_clean) empties the
// tablet's log positions, whatever positions it carries, and retires its
// recovery files as any checkpoint does: its next owner replays no log.
func TestLogCleanCheckpoint(t *testing.T) {
	f, t1, _ := unassignedPair(t)
	f.mustApply(logSplitCmd("a_1", &spb.MetaLogSplitDone_Item{TabletId: t1, ExpectedEpoch: 1, FromFileTimestamp: 100, RecoveryFiles: []string{"recovery/x/t1.log"}}))
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, ExpectedEpoch: 1, TserverUuid: "b"}))
	f.mustApply(loadCmd(t1, 2, "b", "b_1", 200))
	if tm := f.tablet(t1); len(tm.LogPositions) == 0 || len(tm.RecoveryFiles) != 1 {
		t.Fatalf("before: positions %v, recovery files %v", tm.LogPositions, tm.RecoveryFiles)
	}
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "b", Reports: []*pb.CheckpointReport{
		{TabletId: t1, Epoch: 2, LogClean: true, LogPositions: []*pb.LogPosition{{Prefix: "b_1", FileTimestamp: 300}}}}}}})
	var garbage []string
	_ = f.View(func(r *Reader) error { garbage = r.RecoveryGarbage(10); return nil })
	if tm := f.tablet(t1); len(tm.LogPositions) != 0 || len(tm.RecoveryFiles) != 0 || !slices.Equal(garbage, []string{"recovery/x/t1.log"}) {
		t.Fatalf("after a clean handoff: positions %v, recovery files %v, garbage %v", tm.LogPositions, tm.RecoveryFiles, garbage)
	}
}

// TestSplitLogsRetiredByCheckpoint: a split child names its child log
// until its first checkpoint, which moves the log to the garbage list.
func TestSplitLogsRetiredByCheckpoint(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	parent := FormatTabletID(2)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: parent, TserverUuid: "a"}))
	ids := f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{Count: 2}}}).IDs
	kid := func(id, s, e string) *pb.SplitChild {
		return &pb.SplitChild{TabletId: id, Range: &pb.RowRange{StartRow: []byte(s), EndRow: []byte(e)}, ChildLogs: []string{"splitlog/" + id + ".log"}}
	}
	f.mustApply(splitCmd(parent, 1, "a", kid(ids[0], "m", "q"), kid(ids[1], "q", "")))
	var inUse map[string]bool
	_ = f.View(func(r *Reader) (err error) { inUse, err = r.RecoveryFilesInUse(); return err })
	if !inUse["splitlog/"+ids[0]+".log"] || !inUse["splitlog/"+ids[1]+".log"] {
		t.Fatalf("child logs not in use after the split: %v", inUse)
	}
	child := f.tablet(ids[0])
	f.mustApply(loadCmd(ids[0], child.Epoch, "a", "a_1", 100))
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "a", Reports: []*pb.CheckpointReport{
		{TabletId: ids[0], Epoch: child.Epoch, LogPositions: []*pb.LogPosition{{Prefix: "a_1", FileTimestamp: 200}}}}}}})
	var garbage []string
	_ = f.View(func(r *Reader) (err error) {
		garbage = r.RecoveryGarbage(10)
		inUse, err = r.RecoveryFilesInUse()
		return err
	})
	if len(f.tablet(ids[0]).ChildLogs) != 0 || !slices.Equal(garbage, []string{"splitlog/" + ids[0] + ".log"}) || inUse["splitlog/"+ids[0]+".log"] || !inUse["splitlog/"+ids[1]+".log"] {
		t.Fatalf("after the child's checkpoint: child logs %v, garbage %v, in use %v", f.tablet(ids[0]).ChildLogs, garbage, inUse)
	}
}

// TestLogSplitsDone: the splits of two dead prefixes in one command replace
// each tablet's positions of both prefixes (a tablet that lists both gets
// the recovery files of both), and a mismatched item of one prefix is
// skipped without stopping the other.
func TestLogSplitsDone(t *testing.T) {
	f, t1, t2 := unassignedPair(t)

	res := f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_LogSplitsDone{LogSplitsDone: &spb.MetaLogSplitsDone{Splits: []*spb.MetaLogSplitDone{
		{Prefix: "a_1", Items: []*spb.MetaLogSplitDone_Item{
			{TabletId: t1, ExpectedEpoch: 1, FromFileTimestamp: 100, RecoveryFiles: []string{"recovery/a/t1.log"}},
			{TabletId: t2, ExpectedEpoch: 1, FromFileTimestamp: 100, RecoveryFiles: []string{"recovery/a/t2.log"}}}},
		{Prefix: "b_1", Items: []*spb.MetaLogSplitDone_Item{
			{TabletId: t1, ExpectedEpoch: 1, FromFileTimestamp: 50, RecoveryFiles: []string{"recovery/b/t1.log"}},
			{TabletId: t2, ExpectedEpoch: 1, FromFileTimestamp: 50, RecoveryFiles: []string{"recovery/b/t2.log"}}}}, // t2 lists no b_1 position
	}}}})
	if res.Applied != 3 {
		t.Fatalf("applied %d items, want 3", res.Applied)
	}
	if tm := f.tablet(t1); len(tm.LogPositions) != 0 || !slices.Equal(tm.RecoveryFiles, []string{"recovery/a/t1.log", "recovery/b/t1.log"}) {
		t.Fatalf("t1: positions %v, recovery files %v", tm.LogPositions, tm.RecoveryFiles)
	}
	if tm := f.tablet(t2); len(tm.LogPositions) != 0 || !slices.Equal(tm.RecoveryFiles, []string{"recovery/a/t2.log"}) {
		t.Fatalf("t2: positions %v, recovery files %v", tm.LogPositions, tm.RecoveryFiles)
	}
}
