package tserver_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bighive/client"
	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/tserver"
)

// TestLoadReportsBatched: a tserver assigned many tablets at once reports
// their loads in far fewer ReportTabletLoads calls than tablets (counted
// by the master's gRPC metrics), and every tablet serves.
func TestLoadReportsBatched(t *testing.T) {
	t.Parallel()
	const tablets = 300
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := master.Start(master.Config{ID: "m1", Dir: filepath.Join(dir, "master"), RaftAddr: freeAddr(t), Raft: tserver.SoleMasterRaft(),
		Lease: 5 * time.Second, Heartbeat: 200 * time.Millisecond, Logger: quiet(), Metrics: reg}, lis)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := tserver.Start(context.Background(), tserver.Options{Listen: freeAddr(t), Masters: []string{m.Addr()},
		Root: filepath.Join(dir, "root"), MemLimit: 16 << 20, HeartbeatInterval: 200 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []string
	for i := 1; i < tablets; i++ {
		keys = append(keys, fmt.Sprintf("k%04d", i))
	}
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: keys}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	const metric = "bighive_grpc_server_requests_total"
	batched, _ := value(fams, metric, "code", "OK", "method", pb.Master_ReportTabletLoads_FullMethodName)
	single, _ := value(fams, metric, "code", "OK", "method", pb.Master_ReportTabletLoad_FullMethodName)
	t.Logf("%d tablets loaded with %v ReportTabletLoads calls (%.1f tablets per call), %v ReportTabletLoad calls",
		tablets, batched, tablets/max(batched, 1), single)
	if single != 0 {
		t.Errorf("%v single load reports, want 0", single)
	}
	if batched < 1 || batched > tablets/4 {
		t.Errorf("%v ReportTabletLoads calls for %d tablets, want 1 to %d", batched, tablets, tablets/4)
	}
	// Every tablet serves: a row written to each reads back.
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tablets; i++ {
		row := fmt.Sprintf("k%04d", i)
		if err := tbl.Put(ctx, row, "cf", "q", []byte(row)); err != nil {
			t.Fatalf("put %s: %v", row, err)
		}
	}
	for i := 0; i < tablets; i += 37 {
		row := fmt.Sprintf("k%04d", i)
		r, err := tbl.Get(ctx, row)
		if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != row {
			t.Fatalf("get %s: %+v %v", row, r, err)
		}
	}
}
