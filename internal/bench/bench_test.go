package bench_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/frontend"
	"bighive/internal/bench"
	"bighive/master"
	"bighive/tserver"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// inProcess starts one master and one tserver in this process (real
// gRPC on loopback, real storage) and a client. Each side runs under a
// pprof label side=master|tserver|client, and so do the goroutines it
// starts, so a CPU profile can be split with -tagfocus side=tserver.
func inProcess(tb testing.TB, cacheBytes int64) *client.Client {
	tb.Helper()
	dir := tb.TempDir()
	var (
		m   *master.Master
		s   *tserver.Server
		c   *client.Client
		err error
	)
	ctx := context.Background()
	pprof.Do(ctx, pprof.Labels("side", "master"), func(context.Context) {
		var lis net.Listener
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return
		}
		m, err = master.Start(master.Config{ID: "m1", Dir: filepath.Join(dir, "master"), RaftAddr: freeAddr(tb),
			Lease: 2 * time.Second, Heartbeat: 200 * time.Millisecond, Logger: quiet()}, lis)
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	pprof.Do(ctx, pprof.Labels("side", "tserver"), func(ctx context.Context) {
		s, err = tserver.Start(ctx, tserver.Options{Listen: freeAddr(tb), Masters: []string{m.Addr()},
			Root: filepath.Join(dir, "root"), CacheBytes: cacheBytes, HeartbeatInterval: 200 * time.Millisecond, Logger: quiet()})
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		c, err = client.Dial(ctx, []string{m.Addr()})
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// TestTinyRun runs every phase briefly, through each API, and checks
// each produced a plausible result; the phases verify what they read
// themselves (a Get of the wrong size, a scan out of order or short, a
// counter sum that is not the acknowledged increments, a lock release
// that does not match all fail the run).
func TestTinyRun(t *testing.T) {
	for _, api := range []string{bench.APINative, bench.APIBigtable} {
		t.Run(api, func(t *testing.T) { tinyRun(t, api) })
	}
}

func tinyRun(t *testing.T, api string) {
	c := inProcess(t, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := bench.Options{Client: c, API: api, Keys: 600, Tablets: 3, Concurrency: 8, ValueSize: 100,
		Duration: 300 * time.Millisecond, Ops: 200, BatchSize: 10, Scanners: 2, CacheBytes: 1 << 20, Seed: 1}
	if api == bench.APIBigtable {
		fe, err := frontend.Listen("127.0.0.1:0", c, quiet())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fe.Stop(context.Background()) })
		o.BigtableAddr = fe.Addr()
	}
	var out strings.Builder
	o.Out = &out
	rep, err := bench.Run(ctx, o)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.API != api {
		t.Errorf("report of API %q, want %q", rep.API, api)
	}
	for _, phase := range []string{bench.PhasePut, bench.PhaseBulk, bench.PhaseGetWarm, bench.PhaseGetCold, bench.PhaseScan, "scan-2",
		bench.PhaseIncrement, bench.PhaseCheckAndMutate} {
		res, ok := rep.Result(phase)
		if !ok {
			t.Errorf("no result for phase %s", phase)
			continue
		}
		if res.Rows == 0 || res.Bytes == 0 || res.Elapsed <= 0 {
			t.Errorf("%s: %+v", phase, res)
		}
		if !strings.HasPrefix(phase, bench.PhaseScan) && (res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.P999) {
			t.Errorf("%s: latencies %v %v %v", phase, res.P50, res.P99, res.P999)
		}
	}
	// Ops bounds the calls of timed phases; a scan pass returns every row.
	if res, _ := rep.Result(bench.PhasePut); res.Calls > 200 {
		t.Errorf("put made %d calls, Ops is 200", res.Calls)
	}
	if res, _ := rep.Result(bench.PhaseScan); res.Rows%600 != 0 {
		t.Errorf("scan returned %d rows, not a multiple of 600", res.Rows)
	}
	if rep.TSFiles == 0 || rep.TSFileBytes == 0 {
		t.Errorf("no TSFiles after the checkpoint: %+v", rep)
	}
	tables, err := c.ListTables(ctx)
	if err != nil || len(tables) != 0 {
		t.Errorf("tables after the run: %v, %v", tables, err)
	}
}

func TestOptionErrors(t *testing.T) {
	c := &client.Client{}
	for _, o := range []bench.Options{
		{},
		{Client: c, Phases: []string{"nope"}},
		{Client: c, Keys: 4, Tablets: 8},
		{Client: c, API: "grpc"},
		{Client: c, API: bench.APIBigtable}, // no BigtableAddr
	} {
		if _, err := bench.Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) succeeded", o)
		}
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		i    int
		want string
	}{{0, "0000000000000000"}, {42, "0000000000000042"}, {1234567890, "0000001234567890"}} {
		if got := bench.Key(tc.i); got != tc.want {
			t.Errorf("Key(%d) = %q, want %q", tc.i, got, tc.want)
		}
	}
	if !(bench.Key(9) < bench.Key(10)) {
		t.Error("keys do not sort as their indexes")
	}
}

func TestMedian(t *testing.T) {
	run := func(rows int64, p50 time.Duration) *bench.Report {
		return &bench.Report{Results: []bench.Result{{Phase: "put", Rows: rows, Elapsed: 2 * time.Second, P50: p50}}}
	}
	m := bench.Median([]*bench.Report{run(100, 3), run(300, 1), run(200, 2)})
	got, _ := m.Result("put")
	if got.RowsPerSec() != 100 || got.P50 != 2 {
		t.Errorf("median: %v rows/s, p50 %v; want 100, 2", got.RowsPerSec(), got.P50)
	}
}

// BenchmarkPut is the Put phase against an in-process master and tserver,
// for a CPU profile:
//
//	go test -run XXX -bench Put -benchtime 200000x -cpuprofile cpu.out ./internal/bench/
//	go tool pprof -tagfocus side=tserver -top cpu.out
func BenchmarkPut(b *testing.B) {
	c := inProcess(b, 0)
	ctx := context.Background()
	b.ResetTimer()
	var rep *bench.Report
	var err error
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		rep, err = bench.Run(ctx, bench.Options{Client: c, Keys: 1_000_000, Duration: time.Hour, Ops: int64(b.N),
			Phases: []string{bench.PhasePut}})
	})
	if err != nil {
		b.Fatal(err)
	}
	res, _ := rep.Result(bench.PhasePut)
	b.ReportMetric(res.RowsPerSec(), "puts/s")
	b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
}

// readTable loads rows rows of 1000-byte values into a fresh 8-tablet
// table of an in-process cluster whose block cache holds them all, and
// checkpoints it, so reads come from TSFiles in the block cache.
func readTable(b *testing.B, rows int) *client.Table {
	b.Helper()
	c := inProcess(b, 256<<20)
	ctx := context.Background()
	var splits []string
	for t := 1; t < 8; t++ {
		splits = append(splits, bench.Key(t*rows/8))
	}
	if err := c.CreateTable(ctx, client.TableSpec{Name: "r", SplitKeys: splits,
		Families: []client.FamilySpec{{Name: "cf", MaxVersions: 1}}}); err != nil {
		b.Fatal(err)
	}
	var tbl *client.Table
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		if tbl, err = c.Open(ctx, "r"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	value := make([]byte, 1000)
	for start := 0; start < rows; start += 1000 {
		var keys []string
		var ms []*client.Mutation
		for i := start; i < min(start+1000, rows); i++ {
			m := client.NewMutation()
			m.Set("cf", "v", 1, value)
			keys, ms = append(keys, bench.Key(i)), append(ms, m)
		}
		if errs, err := tbl.ApplyBulk(ctx, keys, ms); err != nil || errs != nil {
			b.Fatal(errs, err)
		}
	}
	if _, err := c.CheckpointAll(ctx); err != nil {
		b.Fatal(err)
	}
	return tbl
}

// BenchmarkGet is 64 goroutines reading random rows of a table in the
// block cache (after one warming pass), for a CPU profile of ReadRow.
func BenchmarkGet(b *testing.B) {
	const rows = 50_000
	tbl := readTable(b, rows)
	ctx := context.Background()
	if err := tbl.Scan(ctx, "", "", func(client.Row) bool { return true }); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(n.Add(1)*2654435761) % rows
			r, err := tbl.Get(ctx, bench.Key(i))
			if err != nil || len(r.Cells) != 1 {
				b.Errorf("get %d: %+v %v", i, r, err)
				return
			}
		}
	})
}

// BenchmarkScan is full scans of a table in the block cache; its MB/s
// counts key, qualifier and value bytes, like the bench.
func BenchmarkScan(b *testing.B) {
	const rows = 50_000
	tbl := readTable(b, rows)
	ctx := context.Background()
	b.SetBytes(rows * (16 + 1 + 1000))
	b.ResetTimer()
	for range b.N {
		n := 0
		if err := tbl.Scan(ctx, "", "", func(client.Row) bool { n++; return true }); err != nil || n != rows {
			b.Fatalf("scan: %d rows, %v", n, err)
		}
	}
}
