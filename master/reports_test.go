package master

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// oneTServer: a single master, one fake tserver serving table "t" split at "m".
func oneTServer(t *testing.T) (pb.MasterClient, *fakeTS, []*pb.TabletLocation) {
	t.Helper()
	c := startCluster(t, 1, nil)
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	f := newFakeTS(t, "ts0", cl, newOwners())
	f.start(50 * time.Millisecond)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: [][]byte{[]byte("m")}}); err != nil {
		t.Fatal(err)
	}
	servingCounts(t, mc, "t", 2)
	l, err := mc.GetTableLocations(context.Background(), &pb.GetTableLocationsRequest{Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return mc, f, l.Locations
}

func TestCheckpointEpochFencing(t *testing.T) {
	mc, f, locs := oneTServer(t)
	ctx := ctxT(t, 10*time.Second)
	a, b := locs[0], locs[1]
	pos := []*pb.LogPosition{{Prefix: "ts0_7100", FileTimestamp: 42}}
	files := []*pb.TSFileRef{{BlockStoreUuid: "bs-ts0", FooterBlock: 9, Blocks: []uint64{7, 8, 9}, SizeBytes: 100}}
	resp, err := mc.ReportCheckpoint(ctx, &pb.ReportCheckpointRequest{TserverUuid: f.uuid, Reports: []*pb.CheckpointReport{
		{TabletId: a.TabletId, Epoch: a.Epoch, LogPositions: pos, Tsfiles: files},
		{TabletId: b.TabletId, Epoch: b.Epoch - 1, LogPositions: pos}, // stale
		{TabletId: b.TabletId, Epoch: b.Epoch + 1, LogPositions: pos}, // from the future: also not this epoch
		{TabletId: "t00000000000000ff", Epoch: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.FailedPrecondition, codes.FailedPrecondition, codes.NotFound}
	for i, st := range resp.Statuses {
		if codes.Code(st.Code) != want[i] {
			t.Errorf("report %d: %v %q, want %v", i, codes.Code(st.Code), st.Message, want[i])
		}
	}
	// A checkpoint from a tserver that does not own the tablet is refused too.
	resp, err = mc.ReportCheckpoint(ctx, &pb.ReportCheckpointRequest{TserverUuid: "intruder", Reports: []*pb.CheckpointReport{
		{TabletId: a.TabletId, Epoch: a.Epoch}}})
	if err != nil || codes.Code(resp.Statuses[0].Code) != codes.FailedPrecondition {
		t.Fatalf("non-owner checkpoint: %v %v", resp, err)
	}
	d, err := mc.DescribeTable(ctx, &pb.DescribeTableRequest{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range d.Tablets {
		switch tm.TabletId {
		case a.TabletId:
			if len(tm.LogPositions) != 1 || tm.LogPositions[0].FileTimestamp != 42 || len(tm.Tsfiles) != 1 {
				t.Errorf("accepted checkpoint not recorded: %v", tm)
			}
		case b.TabletId:
			if len(tm.LogPositions) != 1 || tm.LogPositions[0].FileTimestamp != 1 {
				t.Errorf("stale checkpoint changed the tablet: %v", tm)
			}
		}
	}
	gc, err := mc.GetGCReferences(ctx, &pb.GetGCReferencesRequest{BlockStoreUuid: "bs-ts0", WalPrefix: "ts0_7100"})
	if err != nil {
		t.Fatal(err)
	}
	if len(gc.Blocks) != 3 || len(gc.LogPositions) != 2 { // 42 (a) and 1 (b)
		t.Errorf("GC references %v", gc)
	}
	// A stale load report is refused as well.
	if _, err := mc.ReportTabletLoad(ctx, &pb.ReportTabletLoadRequest{TabletId: a.TabletId, Epoch: a.Epoch - 1, TserverUuid: f.uuid,
		Position: pos[0]}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("stale load report: %v", err)
	}
}

func TestReportSplit(t *testing.T) {
	t.Parallel()
	mc, f, locs := oneTServer(t)
	ctx := ctxT(t, 10*time.Second)
	parent := locs[1] // [m, "")
	ids, err := mc.AllocateTabletIds(ctx, &pb.AllocateTabletIdsRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	kid := func(i int, s, e string) *pb.SplitChild {
		return &pb.SplitChild{TabletId: ids.TabletIds[i], Range: &pb.RowRange{StartRow: []byte(s), EndRow: []byte(e)},
			LogPositions: []*pb.LogPosition{{Prefix: "ts0_7100", FileTimestamp: 5}}, ChildLogs: []string{"splitlog/" + ids.TabletIds[i] + ".log"}}
	}
	bad := []struct {
		name string
		req  *pb.ReportSplitRequest
		want codes.Code
	}{
		{"stale epoch", &pb.ReportSplitRequest{ParentTabletId: parent.TabletId, ParentEpoch: parent.Epoch - 1, TserverUuid: f.uuid,
			Children: []*pb.SplitChild{kid(0, "m", "s"), kid(1, "s", "")}}, codes.FailedPrecondition},
		{"gap", &pb.ReportSplitRequest{ParentTabletId: parent.TabletId, ParentEpoch: parent.Epoch, TserverUuid: f.uuid,
			Children: []*pb.SplitChild{kid(0, "m", "s"), kid(1, "t", "")}}, codes.InvalidArgument},
		{"unknown parent", &pb.ReportSplitRequest{ParentTabletId: "t00000000000000ff", ParentEpoch: 1, TserverUuid: f.uuid,
			Children: []*pb.SplitChild{kid(0, "m", "s"), kid(1, "s", "")}}, codes.NotFound},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := mc.ReportSplit(ctx, tc.req); status.Code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			l, err := mc.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: "t"})
			if err != nil || len(l.Locations) != 2 || l.Locations[1].TabletId != parent.TabletId {
				t.Fatalf("a refused split changed the table: %v %v", l, err)
			}
		})
	}
	resp, err := mc.ReportSplit(ctx, &pb.ReportSplitRequest{ParentTabletId: parent.TabletId, ParentEpoch: parent.Epoch, TserverUuid: f.uuid,
		Children: []*pb.SplitChild{kid(0, "m", "s"), kid(1, "s", "")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range resp.Children {
		if ch.TserverUuid != f.uuid || ch.Epoch != 1 || ch.State != pb.TabletState_TABLET_STATE_ASSIGNED || len(ch.ChildLogs) != 1 {
			t.Errorf("child %v", ch)
		}
	}
	l, err := mc.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: "t", StartRow: []byte("n")})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Locations) != 2 || l.Locations[0].TabletId != ids.TabletIds[0] || !bytes.Equal(l.Locations[1].Range.StartRow, []byte("s")) ||
		l.Locations[0].TserverUuid != f.uuid {
		t.Fatalf("locations after split: %v", l.Locations)
	}
	// The tserver drops the parent on its next heartbeats and serves the children.
	wait.For(t, 10*time.Second, "the tserver serving the children, not the parent", func() error {
		s := f.serving()
		_, p := s[parent.TabletId]
		_, c0 := s[ids.TabletIds[0]]
		_, c1 := s[ids.TabletIds[1]]
		if p || !c0 || !c1 {
			return fmt.Errorf("serving the parent %v, the children %v and %v", p, c0, c1)
		}
		return nil
	})
}

func TestCachePriorityAndDeletePushedInHeartbeats(t *testing.T) {
	mc, f, locs := oneTServer(t)
	ctx := ctxT(t, 10*time.Second)
	if _, err := mc.SetCachePriority(ctx, &pb.SetCachePriorityRequest{Table: "t", Priority: pb.CachePriority_CACHE_PRIORITY_LOW}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the priority pushed", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if p := f.prios["t"]; p != pb.CachePriority_CACHE_PRIORITY_LOW {
			return fmt.Errorf("priority %v", p)
		}
		return nil
	})
	if _, err := mc.DeleteTable(ctx, &pb.DeleteTableRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the deleted table's tablets unloaded", func() error {
		s := f.serving()
		for _, l := range locs {
			if _, ok := s[l.TabletId]; ok {
				return fmt.Errorf("tablet %s still served", l.TabletId)
			}
		}
		return nil
	})
}
