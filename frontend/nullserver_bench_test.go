package frontend

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"

	"bighive/testkit/fastloop"
	"bighive/tools/bench"
)

// nullServerEnv makes the test binary, run by BenchmarkNullServerCPU, a
// Bigtable server that does nothing (nullBigtable) on a loopback port it
// prints, until it is killed.
const nullServerEnv = "BIGHIVE_NULL_BIGTABLE_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(nullServerEnv) != "" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		g := grpc.NewServer(ServerOptions()...)
		btpb.RegisterBigtableServer(g, nullBigtable{value: make([]byte, 1000)})
		fmt.Println(lis.Addr().String())
		_ = g.Serve(lis)
		os.Exit(0)
	}
	fastloop.Main(m)
}

// BenchmarkNullServerCPU measures the CPU that a gRPC server process
// spends per official-client call when it does nothing else: the floor,
// set by gRPC's per-call work (a new HTTP/2 stream, headers, a goroutine),
// of what any Bigtable API server costs per Put or Get, Bighive's
// included. The server runs as its own process (this test binary,
// re-executed) and its CPU is read from /proc:
//
//	go test ./frontend -run '^$' -bench NullServerCPU -benchtime 50000x -count 3
//
// reports server-cpu-µs/op.
func BenchmarkNullServerCPU(b *testing.B) {
	tbl, pid := startNullServer(b)
	ctx := context.Background()
	value := make([]byte, 1000)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := tbl.ReadRow(ctx, "row"); return err }},
		{"put", func() error {
			m := bigtable.NewMutation()
			m.Set("cf", "q", bigtable.ServerTime, value)
			return tbl.Apply(ctx, "row", m)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetParallelism(32) // 64 callers on 2 cores, as the bench
			cpu0 := pidCPU(b, pid)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := tc.call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((pidCPU(b, pid)-cpu0).Microseconds())/float64(b.N), "server-cpu-µs/op")
		})
	}
}

// BenchmarkNullServerScanCPU is one official-client scanner reading
// nullScanRows rows of 1000-byte values from the server that does
// nothing, as the bench's scan phase reads Bighive's table, and reports
// the client's own CPU per row (client-cpu-µs/row) and the rate (MB/s):
// what the official client alone costs and allows, whatever the server.
//
//	go test ./frontend -run '^$' -bench NullServerScanCPU -benchtime 20x -count 3
func BenchmarkNullServerScanCPU(b *testing.B) {
	tbl, pid := startNullServer(b)
	ctx := context.Background()
	value := make([]byte, 1000)
	server0, client0 := pidCPU(b, pid), pidCPU(b, os.Getpid())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		err := tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
			if len(r["cf"]) != 1 || len(r["cf"][0].Value) != len(value) {
				b.Errorf("row %q: %v, want one cell of %d bytes", r.Key(), r, len(value))
				return false
			}
			n++
			return true
		})
		if err != nil || n != nullScanRows {
			b.Fatalf("scan: %d rows, %v; want %d", n, err, nullScanRows)
		}
	}
	b.StopTimer()
	rows := float64(b.N) * nullScanRows
	b.ReportMetric(float64((pidCPU(b, os.Getpid())-client0).Microseconds())/rows, "client-cpu-µs/row")
	b.ReportMetric(float64((pidCPU(b, pid)-server0).Microseconds())/rows, "server-cpu-µs/row")
	b.ReportMetric(rows*float64(len(bench.Key(0))+1+len(value))/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(0, "ns/op")
}

// startNullServer runs the null server as a process of its own (this test
// binary, re-executed) and returns a table of an official client dialed
// to it, and its pid.
func startNullServer(b *testing.B) (*bigtable.Table, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nullServerEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("null server: %v", err)
	}
	return officialClient(b, strings.TrimSpace(addr)).Open("t"), cmd.Process.Pid
}

// pidCPU is the CPU time process pid has used (bench.ProcessCPU, the
// bench's own reading of /proc).
func pidCPU(b *testing.B, pid int) time.Duration {
	d, err := bench.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
