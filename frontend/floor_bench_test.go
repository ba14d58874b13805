package frontend

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/tools/bench"
)

// BenchmarkCPUPerCall measures the CPU time of one call, everything in
// one process (client, frontend, tserver, master), for the native client
// and for the official Cloud Bigtable client through the frontend, and,
// as the official client's own floor, that client against a Bigtable
// server that does nothing. On a CPU-bound machine a call's rate is about
// cores / CPU per call, so the floor bounds the API's rate whatever the
// frontend and tserver cost:
//
//	go test ./frontend -run '^$' -bench CPUPerCall -count 3
//
// reports cpu-µs/op (user + system time of the process per call). The
// bigtable-api cases go through a frontend; bigtable-api-in-tserver
// through the same API served as cmd/tserver --bigtable serves it, its
// client reaching the tserver in-process.
func BenchmarkCPUPerCall(b *testing.B) {
	ctx := context.Background()
	value := make([]byte, 1000)
	c := inproc.Start(b, inproc.Options{})
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		b.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		b.Fatal(err)
	}
	native, err := c.Client().Open(ctx, "t")
	if err != nil {
		b.Fatal(err)
	}
	api := officialClient(b, serve(b, func(g *grpc.Server) { New(c.Client(), nil).Register(g) }))
	// The API served by the tserver itself (cmd/tserver --bigtable): its
	// client reaches the tserver in-process.
	local := officialClient(b, serve(b, func(g *grpc.Server) {
		New(c.Client(client.WithLocalTServer(c.TServer(0))), nil).Register(g)
	}))
	null := officialClient(b, serve(b, func(g *grpc.Server) { btpb.RegisterBigtableServer(g, nullBigtable{value: value}) }))
	const rows = 1000
	key := func(i int) string { return fmt.Sprintf("row%06d", i%rows) }
	for i := 0; i < rows; i++ {
		if err := native.Put(ctx, key(i), "cf", "q", value); err != nil {
			b.Fatal(err)
		}
	}
	apiPut := func(tbl *bigtable.Table) func(int) error {
		return func(i int) error {
			m := bigtable.NewMutation()
			m.Set("cf", "q", bigtable.ServerTime, value)
			return tbl.Apply(ctx, key(i), m)
		}
	}
	apiGet := func(tbl *bigtable.Table) func(int) error {
		return func(i int) error {
			r, err := tbl.ReadRow(ctx, key(i))
			if err == nil && len(r["cf"]) != 1 {
				err = fmt.Errorf("row %s: %d cells, want 1", key(i), len(r["cf"]))
			}
			return err
		}
	}
	cases := []struct {
		name string
		call func(i int) error
	}{
		{"ping/native", func(i int) error { return native.Ping(ctx, key(i)) }},
		{"get/native", func(i int) error {
			r, err := native.Get(ctx, key(i))
			if err == nil && len(r.Cells) != 1 {
				err = fmt.Errorf("row %s: %d cells, want 1", key(i), len(r.Cells))
			}
			return err
		}},
		{"get/bigtable-api", apiGet(api.Open("t"))},
		{"get/bigtable-api-in-tserver", apiGet(local.Open("t"))},
		{"get/bigtable-client-floor", apiGet(null.Open("t"))},
		{"put/native", func(i int) error { return native.Put(ctx, key(i), "cf", "q", value) }},
		{"put/bigtable-api", apiPut(api.Open("t"))},
		{"put/bigtable-api-in-tserver", apiPut(local.Open("t"))},
		{"put/bigtable-client-floor", apiPut(null.Open("t"))},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.SetParallelism(32) // 64 callers on 2 cores, as the bench
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					if err := tc.call(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func serve(b *testing.B, register func(*grpc.Server)) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	register(g)
	go g.Serve(lis)
	b.Cleanup(g.Stop)
	return lis.Addr().String()
}

// officialClient dials addr the way bighive bench --api bigtable does:
// the client's own connection pool, no metrics, plaintext.
func officialClient(b *testing.B, addr string) *bigtable.Client {
	c, err := bigtable.NewClientWithConfig(context.Background(), "p", "i",
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}},
		option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// nullBigtable answers ReadRows with one one-cell row per requested key
// (a request for a row range: nullScanRows rows, see nullScan), MutateRow
// with success, and PingAndWarm (the official client primes its
// connections with it), doing no other work.
type nullBigtable struct {
	btpb.UnimplementedBigtableServer
	value []byte
}

// nullScanRows is the rows nullBigtable streams for a row range.
const nullScanRows = 20_000

// nullScan streams nullScanRows rows as a scan through Bighive's API
// does: 16-digit keys, one cell cf:v of n.value each, cut into responses
// of about maxResponseBytes, built once.
func (n nullBigtable) nullScan(s btpb.Bigtable_ReadRowsServer) error {
	nullScanOnce.Do(func() {
		resp, size := &btpb.ReadRowsResponse{}, 0
		for i := 0; i < nullScanRows; i++ {
			resp.Chunks = append(resp.Chunks, &btpb.ReadRowsResponse_CellChunk{
				RowKey: []byte(bench.Key(i)), FamilyName: wrapperspb.String("cf"), Qualifier: wrapperspb.Bytes([]byte("v")),
				Value: n.value, RowStatus: &btpb.ReadRowsResponse_CellChunk_CommitRow{CommitRow: true},
			})
			if size += len(bench.Key(i)) + 1 + len(n.value); size >= maxResponseBytes {
				nullScanResps, resp, size = append(nullScanResps, resp), &btpb.ReadRowsResponse{}, 0
			}
		}
		if len(resp.Chunks) > 0 {
			nullScanResps = append(nullScanResps, resp)
		}
	})
	for _, m := range nullScanResps {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	return nil
}

var (
	nullScanOnce  sync.Once
	nullScanResps []*btpb.ReadRowsResponse
)

func (n nullBigtable) ReadRows(req *btpb.ReadRowsRequest, s btpb.Bigtable_ReadRowsServer) error {
	if len(req.GetRows().GetRowRanges()) > 0 {
		return n.nullScan(s)
	}
	for _, k := range req.GetRows().GetRowKeys() {
		if err := s.Send(&btpb.ReadRowsResponse{Chunks: []*btpb.ReadRowsResponse_CellChunk{{
			RowKey: k, FamilyName: wrapperspb.String("cf"), Qualifier: wrapperspb.Bytes([]byte("q")), Value: n.value,
			RowStatus: &btpb.ReadRowsResponse_CellChunk_CommitRow{CommitRow: true},
		}}}); err != nil {
			return err
		}
	}
	return nil
}

func (nullBigtable) MutateRow(context.Context, *btpb.MutateRowRequest) (*btpb.MutateRowResponse, error) {
	return &btpb.MutateRowResponse{}, nil
}

func (nullBigtable) PingAndWarm(context.Context, *btpb.PingAndWarmRequest) (*btpb.PingAndWarmResponse, error) {
	return &btpb.PingAndWarmResponse{}, nil
}
