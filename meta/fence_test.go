package meta

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// TestCheckpointFenceFiles: a fenced checkpoint report swaps the TSFile
// list only if it leaves out no recorded file but its replaced run
// (ABORTED otherwise, nothing changed); a report without fence_files, as
// logged before the field existed, applies as it did.
func TestCheckpointFenceFiles(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t"))
	f.mustApply(registerCmd("a", 1))
	id := FormatTabletID(1)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: id, TserverUuid: "a"}))
	ref := func(n uint64) *pb.TSFileRef { return &pb.TSFileRef{BlockStoreUuid: "bs-a", FooterBlock: n} }
	report := func(fence bool, files, replaced []*pb.TSFileRef) *spb.MetaCommand {
		return &spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: "a",
			Reports: []*pb.CheckpointReport{{TabletId: id, Epoch: 1, Tsfiles: files, Replaced: replaced, FenceFiles: fence}}}}}
	}
	footers := func() []uint64 {
		var out []uint64
		for _, r := range f.tablet(id).Tsfiles {
			out = append(out, r.FooterBlock)
		}
		return out
	}
	steps := []struct {
		name     string
		cmd      *spb.MetaCommand
		want     codes.Code
		wantList []uint64
	}{
		{"first files", report(true, []*pb.TSFileRef{ref(10), ref(11)}, nil), codes.OK, []uint64{10, 11}},
		{"a flush added", report(true, []*pb.TSFileRef{ref(12), ref(10), ref(11)}, nil), codes.OK, []uint64{12, 10, 11}},
		{"drops a file it does not replace", report(true, []*pb.TSFileRef{ref(13), ref(11)}, []*pb.TSFileRef{ref(12)}), codes.Aborted, []uint64{12, 10, 11}},
		{"an ended load's empty list", report(true, nil, []*pb.TSFileRef{ref(10), ref(11)}), codes.Aborted, []uint64{12, 10, 11}},
		{"same footer of another store", report(true, []*pb.TSFileRef{{BlockStoreUuid: "bs-b", FooterBlock: 12}, ref(10), ref(11)}, nil), codes.Aborted, []uint64{12, 10, 11}},
		{"a compaction replaces its run", report(true, []*pb.TSFileRef{ref(13), ref(11)}, []*pb.TSFileRef{ref(12), ref(10)}), codes.OK, []uint64{13, 11}},
		{"the retried compaction", report(true, []*pb.TSFileRef{ref(13), ref(11)}, []*pb.TSFileRef{ref(12), ref(10)}), codes.OK, []uint64{13, 11}},
		{"unfenced, as logged before the field", report(false, []*pb.TSFileRef{ref(14)}, nil), codes.OK, []uint64{14}},
	}
	for _, s := range steps {
		res := f.apply(s.cmd)
		err := res.Err
		if err == nil && len(res.Statuses) == 1 {
			err = res.Statuses[0]
		}
		if c := apierr.CodeOf(err); c != s.want {
			t.Fatalf("%s: code %v (%v), want %v", s.name, c, err, s.want)
		}
		if got := footers(); !slices.Equal(got, s.wantList) {
			t.Fatalf("%s: files %v, want %v", s.name, got, s.wantList)
		}
	}
}
