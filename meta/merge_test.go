package meta

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func mergeCmd(l string, le int64, r string, re int64, ts, merged string, files ...*pb.TSFileRef) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_Merge{Merge: &spb.MetaMerge{Report: &pb.ReportMergeRequest{
		LeftTabletId: l, LeftEpoch: le, RightTabletId: r, RightEpoch: re, TserverUuid: ts, MergedTabletId: merged, Tsfiles: files}}}}
}

func TestMergeAtomic(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "g", "m")) // t1 = ["", g), t2 = [g, m), t3 = [m, "")
	f.mustApply(createCmd("u"))           // t4 = ["", "")
	f.mustApply(registerCmd("a", 1))
	f.mustApply(registerCmd("b", 1))
	t1, t2, t3, t4 := FormatTabletID(1), FormatTabletID(2), FormatTabletID(3), FormatTabletID(4)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"},
		&spb.MetaAssign_Item{TabletId: t3, TserverUuid: "b"}, &spb.MetaAssign_Item{TabletId: t4, TserverUuid: "a"}))
	// The parents' TSFile lists, as checkpoints committed them.
	for i, id := range []string{t1, t2} {
		f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "a",
			Reports: []*pb.CheckpointReport{{TabletId: id, Epoch: 1, Tsfiles: []*pb.TSFileRef{{BlockStoreUuid: "bs-a", FooterBlock: uint64(10 + i)}}}}}}})
	}
	merged := f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{Count: 1}}}).IDs[0]
	flushed := &pb.TSFileRef{BlockStoreUuid: "bs-a", FooterBlock: 99}
	bad := []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"stale left epoch", mergeCmd(t1, 0, t2, 1, "a", merged), codes.FailedPrecondition},
		{"stale right epoch", mergeCmd(t1, 1, t2, 2, "a", merged), codes.FailedPrecondition},
		{"right on another tserver", mergeCmd(t2, 1, t3, 1, "a", merged), codes.FailedPrecondition},
		{"not adjacent", mergeCmd(t2, 1, t1, 1, "a", merged), codes.InvalidArgument},
		{"other table", mergeCmd(t1, 1, t4, 1, "a", merged), codes.InvalidArgument},
		{"itself", mergeCmd(t1, 1, t1, 1, "a", merged), codes.InvalidArgument},
		{"unallocated id", mergeCmd(t1, 1, t2, 1, "a", FormatTabletID(99)), codes.InvalidArgument},
		{"existing id", mergeCmd(t1, 1, t2, 1, "a", t4), codes.AlreadyExists},
		{"missing fields", mergeCmd(t1, 1, "", 1, "a", merged), codes.InvalidArgument},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if c := apierr.CodeOf(f.apply(tc.cmd).Err); c != tc.want {
				t.Fatalf("code %v, want %v", c, tc.want)
			}
			if f.tablet(t1).Epoch != 1 || f.tablet(t2).Epoch != 1 {
				t.Fatal("a parent changed")
			}
		})
	}
	good := mergeCmd(t1, 1, t2, 1, "a", merged, flushed)
	res := f.mustApply(good)
	if len(res.Tablets) != 1 {
		t.Fatalf("merged %v", res.Tablets)
	}
	m := res.Tablets[0]
	if m.TabletId != merged || m.Epoch != 1 || m.TserverUuid != "a" || m.State != pb.TabletState_TABLET_STATE_ASSIGNED || m.Table != "t" ||
		string(m.Range.GetStartRow()) != "" || string(m.Range.GetEndRow()) != "m" {
		t.Fatalf("merged tablet %v", m)
	}
	var footers []uint64
	for _, r := range m.Tsfiles {
		footers = append(footers, r.FooterBlock)
	}
	if fmt.Sprint(footers) != "[99 10 11]" {
		t.Errorf("merged TSFiles %v, want the flushed file then both parents' lists", footers)
	}
	_ = f.View(func(r *Reader) error {
		for _, id := range []string{t1, t2} {
			if _, err := r.Tablet(id); apierr.CodeOf(err) != codes.NotFound {
				t.Errorf("parent %s still there: %v", id, err)
			}
		}
		all, _ := r.TableTablets("t", nil, 0)
		var ranges []string
		for _, tm := range all {
			ranges = append(ranges, fmt.Sprintf("[%s,%s)", tm.Range.GetStartRow(), tm.Range.GetEndRow()))
		}
		if fmt.Sprint(ranges) != "[[,m) [m,)]" {
			t.Errorf("ranges after merge %v", ranges)
		}
		if got := r.TabletIDsOf("a"); len(got) != 2 { // merged and t4
			t.Errorf("owner index of a: %v", got)
		}
		return nil
	})
	// A retried report whose answer was lost gets the same tablet.
	if res := f.mustApply(good); len(res.Tablets) != 1 || res.Tablets[0].TabletId != merged {
		t.Fatalf("retry: %v", res.Tablets)
	}
}
