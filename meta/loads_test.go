package meta

import (
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func loadsCmd(loads ...*spb.MetaCommand) *spb.MetaCommand {
	c := &spb.MetaTabletLoads{}
	for _, l := range loads {
		c.Loads = append(c.Loads, l.GetTabletLoad())
	}
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_TabletLoads{TabletLoads: c}}
}

// TestTabletLoadsPerLoad: in one command, each load is applied or refused
// on its own, with the reason a single TabletLoad would give.
func TestTabletLoadsPerLoad(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "g", "m", "s"))
	f.mustApply(registerCmd("a", 1))
	f.mustApply(registerCmd("b", 1))
	t1, t2, t3, t4 := FormatTabletID(1), FormatTabletID(2), FormatTabletID(3), FormatTabletID(4)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"},
		&spb.MetaAssign_Item{TabletId: t3, TserverUuid: "b"}, &spb.MetaAssign_Item{TabletId: t4, TserverUuid: "a"}))
	before3 := f.tablet(t3)

	res := f.mustApply(loadsCmd(
		loadCmd(t1, 1, "a", "a_1", 10),                  // applied
		loadCmd(t2, 0, "a", "a_1", 10),                  // stale epoch
		loadCmd(t3, 1, "a", "a_1", 10),                  // b's tablet
		loadCmd("t00000000000000ff", 1, "a", "a_1", 10), // no such tablet
		loadCmd(t4, 1, "a", "", 10),                     // no prefix
		loadCmd(t2, 1, "a", "a_1", 10),                  // applied, after its stale report
	))
	want := []codes.Code{codes.OK, codes.FailedPrecondition, codes.FailedPrecondition, codes.NotFound, codes.InvalidArgument, codes.OK}
	if len(res.Statuses) != len(want) || len(res.Tablets) != len(want) {
		t.Fatalf("%d statuses and %d tablets for %d loads", len(res.Statuses), len(res.Tablets), len(want))
	}
	for i, c := range want {
		if got := apierr.CodeOf(res.Statuses[i]); got != c {
			t.Errorf("load %d: %v (%v), want %v", i, got, res.Statuses[i], c)
		}
		if (res.Tablets[i] != nil) != (c == codes.OK) {
			t.Errorf("load %d: tablet %v with status %v", i, res.Tablets[i], c)
		}
	}
	for _, id := range []string{t1, t2} {
		tm := f.tablet(id)
		if tm.State != pb.TabletState_TABLET_STATE_SERVING || len(tm.LogPositions) != 1 || tm.LogPositions[0].FileTimestamp != 10 {
			t.Errorf("accepted load of %s not recorded: %v", id, tm)
		}
	}
	if got := f.tablet(t3); got.State != before3.State || len(got.LogPositions) != len(before3.LogPositions) {
		t.Errorf("refused load changed %s: %v", t3, got)
	}
	if got := f.tablet(t4); got.State != pb.TabletState_TABLET_STATE_ASSIGNED {
		t.Errorf("load with a bad position changed %s: %v", t4, got)
	}

	// Empty and oversized commands are refused whole.
	if c := apierr.CodeOf(f.apply(loadsCmd()).Err); c != codes.InvalidArgument {
		t.Errorf("empty loads command: %v", c)
	}
	big := make([]*spb.MetaCommand, limits.MaxTabletLoads+1)
	for i := range big {
		big[i] = loadCmd(t4, 1, "a", "a_1", 10)
	}
	if c := apierr.CodeOf(f.apply(loadsCmd(big...)).Err); c != codes.InvalidArgument {
		t.Errorf("%d loads: %v", len(big), c)
	}
	if got := f.tablet(t4); got.State != pb.TabletState_TABLET_STATE_ASSIGNED {
		t.Errorf("oversized command changed %s: %v", t4, got)
	}
}

// TestTabletLoadsInternalErrorRollsBack: a corrupt record fails the whole
// command, and the loads applied before it in the command are rolled back.
func TestTabletLoadsInternalErrorRollsBack(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	t1, t2 := FormatTabletID(1), FormatTabletID(2)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"}))
	f.mu.RLock()
	if err := f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTablets).Put([]byte(t2), []byte{0xff, 0x01})
	}); err != nil {
		t.Fatal(err)
	}
	f.mu.RUnlock()
	res := f.apply(loadsCmd(loadCmd(t1, 1, "a", "a_1", 10), loadCmd(t2, 1, "a", "a_1", 10)))
	if c := apierr.CodeOf(res.Err); c != codes.Internal {
		t.Fatalf("command over a corrupt record: %v, want Internal", res.Err)
	}
	if tm := f.tablet(t1); tm.State != pb.TabletState_TABLET_STATE_ASSIGNED || len(tm.LogPositions) != 0 {
		t.Errorf("load before the failed one was not rolled back: %v", tm)
	}
}
