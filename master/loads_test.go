package master

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// TestReportTabletLoads: one call of N loads is one raft command, and each
// load is accepted or refused on its own.
func TestReportTabletLoads(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	c := startCluster(t, 1, func(cfg *Config) { cfg.Metrics = reg })
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	f := newFakeTS(t, "ts0", cl, newOwners())
	f.start(50 * time.Millisecond)
	ctx := ctxT(t, 30*time.Second)
	const n = 20
	var keys [][]byte
	for i := 1; i < n; i++ {
		keys = append(keys, fmt.Appendf(nil, "k%02d", i))
	}
	if _, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: keys}); err != nil {
		t.Fatal(err)
	}
	servingCounts(t, mc, "t", n)
	// The fake's own load reports counted as commands once they returned.
	wait.For(t, 10*time.Second, "the fake's load reports answered", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.loading) > 0 {
			return fmt.Errorf("%d loads unanswered", len(f.loading))
		}
		return nil
	})
	l, err := mc.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: "t"})
	if err != nil {
		t.Fatal(err)
	}

	pos := &pb.LogPosition{Prefix: "ts0_7100", FileTimestamp: 7}
	req := &pb.ReportTabletLoadsRequest{TserverUuid: f.uuid}
	var want []codes.Code
	for i, loc := range l.Locations {
		ep := loc.Epoch
		code := codes.OK
		if i%5 == 1 { // stale
			ep, code = loc.Epoch-1, codes.FailedPrecondition
		}
		req.Loads = append(req.Loads, &pb.TabletLoadReport{TabletId: loc.TabletId, Epoch: ep, Position: pos})
		want = append(want, code)
	}
	req.Loads = append(req.Loads, &pb.TabletLoadReport{TabletId: "t00000000000000ff", Epoch: 1, Position: pos})
	want = append(want, codes.NotFound)

	loadsBefore := gathered(t, reg, "bighive_master_commands_total")
	resp, err := mc.ReportTabletLoads(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	after := gathered(t, reg, "bighive_master_commands_total")
	if d := after["applied,tablet_loads"] - loadsBefore["applied,tablet_loads"]; d != 1 {
		t.Errorf("%d loads made %v tablet_loads commands, want 1", len(req.Loads), d)
	}
	if d := after["applied,tablet_load"] - loadsBefore["applied,tablet_load"]; d != 0 {
		t.Errorf("%v single tablet_load commands, want 0", d)
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results for %d loads", len(resp.Results), len(want))
	}
	for i, r := range resp.Results {
		if got := codes.Code(r.Status.GetCode()); got != want[i] {
			t.Errorf("load %d: %v %q, want %v", i, got, r.Status.GetMessage(), want[i])
		}
		if (r.Tablet != nil) != (want[i] == codes.OK) {
			t.Errorf("load %d: tablet %v with status %v", i, r.Tablet, r.Status)
		}
	}
	d, err := mc.DescribeTable(ctx, &pb.DescribeTableRequest{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for i, tm := range d.Tablets {
		has := false
		for _, p := range tm.LogPositions {
			has = has || p.FileTimestamp == pos.FileTimestamp
		}
		if has != (want[i] == codes.OK) {
			t.Errorf("tablet %s (load %d, %v): positions %v", tm.TabletId, i, want[i], tm.LogPositions)
		}
	}

	// Another tserver's loads are refused, each.
	resp, err = mc.ReportTabletLoads(ctx, &pb.ReportTabletLoadsRequest{TserverUuid: "intruder", Loads: req.Loads[:2]})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if codes.Code(r.Status.GetCode()) != codes.FailedPrecondition || r.Tablet != nil {
			t.Errorf("intruder's load %d: %v", i, r)
		}
	}

	// A malformed request is refused whole, before any command.
	one := &pb.TabletLoadReport{TabletId: l.Locations[0].TabletId, Epoch: l.Locations[0].Epoch, Position: pos}
	tooMany := make([]*pb.TabletLoadReport, limits.MaxTabletLoads+1)
	for i := range tooMany {
		tooMany[i] = one
	}
	bad := []struct {
		name string
		req  *pb.ReportTabletLoadsRequest
	}{
		{"no tserver", &pb.ReportTabletLoadsRequest{Loads: []*pb.TabletLoadReport{one}}},
		{"no loads", &pb.ReportTabletLoadsRequest{TserverUuid: f.uuid}},
		{"too many", &pb.ReportTabletLoadsRequest{TserverUuid: f.uuid, Loads: tooMany}},
		{"no tablet id", &pb.ReportTabletLoadsRequest{TserverUuid: f.uuid, Loads: []*pb.TabletLoadReport{one, {Epoch: 1, Position: pos}}}},
		{"no position", &pb.ReportTabletLoadsRequest{TserverUuid: f.uuid, Loads: []*pb.TabletLoadReport{{TabletId: one.TabletId, Epoch: 1}}}},
		{"negative timestamp", &pb.ReportTabletLoadsRequest{TserverUuid: f.uuid, Loads: []*pb.TabletLoadReport{
			{TabletId: one.TabletId, Epoch: 1, Position: &pb.LogPosition{Prefix: "p", FileTimestamp: -1}}}}},
	}
	before := gathered(t, reg, "bighive_master_commands_total")["applied,tablet_loads"]
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mc.ReportTabletLoads(ctx, tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			t.Log(err)
		})
	}
	if got := gathered(t, reg, "bighive_master_commands_total")["applied,tablet_loads"]; got != before {
		t.Errorf("malformed requests proposed %v commands", got-before)
	}
}
