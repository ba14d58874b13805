package meta

import (
	"testing"

	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// TestOwnerGeneration checks which commands change a tserver's ownership
// generation: giving it or taking from it a tablet does, loading one and
// checkpoints do not (the heartbeat would reconcile for nothing), and
// neither does a change to another tserver's tablets.
func TestOwnerGeneration(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	f.mustApply(registerCmd("b", 1))
	t1, t2 := FormatTabletID(1), FormatTabletID(2)
	type gens struct{ a, b uint64 }
	read := func() gens { return gens{f.OwnerGeneration("a"), f.OwnerGeneration("b")} }
	steps := []struct {
		name           string
		cmd            *spb.MetaCommand
		aMoves, bMoves bool
	}{
		{"assign both to a", assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"}), true, false},
		{"load t1 at a", loadCmd(t1, 1, "a", "a_1", 100), false, false},
		{"checkpoint t1", &spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "a",
			Reports: []*pb.CheckpointReport{{TabletId: t1, Epoch: 1, LogPositions: []*pb.LogPosition{{Prefix: "a_1", FileTimestamp: 200}}}}}}}, false, false},
		{"unassign t1", &spb.MetaCommand{Cmd: &spb.MetaCommand_Unassign{Unassign: &spb.MetaUnassign{Items: []*spb.MetaUnassign_Item{
			{TabletId: t1, ExpectedEpoch: 1, ExpectedTserver: "a"}}}}}, true, false},
		{"assign t1 to b", assignCmd(&spb.MetaAssign_Item{TabletId: t1, ExpectedEpoch: 1, TserverUuid: "b"}), false, true},
	}
	for _, st := range steps {
		before := read()
		f.mustApply(st.cmd)
		after := read()
		if (after.a != before.a) != st.aMoves || (after.b != before.b) != st.bMoves {
			t.Errorf("%s: generation of a %d → %d, of b %d → %d; want a changed=%v, b changed=%v",
				st.name, before.a, after.a, before.b, after.b, st.aMoves, st.bMoves)
		}
	}
}
