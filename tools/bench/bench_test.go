package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/frontend"
	"bighive/master"
	"bighive/testkit/ports"
	"bighive/testkit/wait"
	"bighive/tools/bench"
	"bighive/tserver"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var freeAddr = ports.AddrT

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
		t.Run(api, func(t *testing.T) {
			if testing.Short() && api == bench.APIBigtable {
				t.Skip("every phase through the Bigtable API: runs without -short")
			}
			tinyRun(t, api)
		})
	}
}

func tinyRun(t *testing.T, api string) {
	c := inProcess(t, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ops = 200
	o := bench.Options{Client: c, API: api, Keys: 600, Tablets: 3, Concurrency: 8, ValueSize: 100,
		Duration: 300 * time.Millisecond, Ops: ops, BatchSize: 10, Scanners: 2, CacheBytes: 1 << 20, Seed: 1,
		Run: 2, ProgressEvery: 20 * time.Millisecond}
	if api == bench.APIBigtable {
		fe, err := frontend.Listen("127.0.0.1:0", c, quiet())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fe.Stop(context.Background()) })
		o.BigtableAddr = fe.Addr()
	}
	var out, progress strings.Builder
	o.Out, o.Progress = &out, &progress
	rep, err := bench.Run(ctx, o)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.API != api || rep.Run != 2 || rep.Distribution != bench.DistZipfian {
		t.Errorf("report of API %q run %d distribution %q, want %q, 2, %q", rep.API, rep.Run, rep.Distribution, api, bench.DistZipfian)
	}
	phases := append(slices.Clone(bench.AllPhases), "scan-2")
	if len(rep.Results) != len(phases) {
		t.Errorf("%d results, want %d (%v)", len(rep.Results), len(phases), phases)
	}
	for _, phase := range phases {
		res, ok := rep.Result(phase)
		if !ok {
			t.Errorf("no result for phase %s", phase)
			continue
		}
		if res.Rows == 0 || res.Elapsed <= 0 || (res.Bytes == 0) != (phase == bench.PhasePing) {
			t.Errorf("%s: %+v", phase, res)
		}
		l := res.Latency
		if l.P50 <= 0 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
			t.Errorf("%s: latencies %+v", phase, l)
		}
		// The ratio to the floor is the phase's rows/s over the pings/s of
		// the probe just before it (ping's own for ping).
		ping, _ := rep.Result(bench.PhasePing)
		if want := res.RowsPerSec() / res.Floor; res.Floor <= 0 || math.Abs(res.FloorRatio-want) > 1e-9*want {
			t.Errorf("%s: floor ratio %v over %v pings/s, want %v", phase, res.FloorRatio, res.Floor, want)
		}
		if (res.Floor == ping.CallsPerSec()) != (phase == bench.PhasePing) {
			t.Errorf("%s: floor %v, ping phase %v: want a probe of its own", phase, res.Floor, ping.CallsPerSec())
		}
		// The servers are in this process: only the client's CPU is
		// measured, and it is all of it.
		if c, ok := res.CPUOf(bench.RoleClient); !ok || c.CPU <= 0 || c.PerOp <= 0 || len(res.CPU) != 1 || res.CoresBusy <= 0 {
			t.Errorf("%s: cpu %+v, cores busy %v: want the client's alone", phase, res.CPU, res.CoresBusy)
		}
	}
	if len(rep.Procs) != 0 || len(rep.Unmeasured) == 0 || !strings.Contains(rep.Unmeasured[0], "tserver") ||
		!strings.Contains(rep.Unmeasured[0], "in this process") {
		t.Errorf("procs %+v, not measured %q: want the in-process tserver not measured", rep.Procs, rep.Unmeasured)
	}
	// Ops bounds the calls of timed phases; a scan pass returns every row,
	// a ranged scan its n rows.
	for _, phase := range []string{bench.PhaseRandomWrite, bench.PhaseYCSBA, bench.PhasePing} {
		if res, _ := rep.Result(phase); res.Calls > ops {
			t.Errorf("%s made %d calls, Ops is %d", phase, res.Calls, ops)
		}
	}
	if res, _ := rep.Result(bench.PhaseScan); res.Rows%600 != 0 {
		t.Errorf("scan returned %d rows, not a multiple of 600", res.Rows)
	}
	for phase, n := range map[string]int64{bench.PhaseScanRange10: 10, bench.PhaseScanRange100: 100, bench.PhaseScanRange1000: 600} {
		if res, _ := rep.Result(phase); res.Rows != n*res.Calls {
			t.Errorf("%s: %d rows in %d calls, want %d a call", phase, res.Rows, res.Calls, n)
		}
	}
	checkMixes(t, rep)
	if rep.TSFiles == 0 || rep.TSFileBytes == 0 {
		t.Errorf("no TSFiles after the checkpoint: %+v", rep)
	}
	// Progress: plain rate lines (not a terminal), one per tick.
	if p := progress.String(); !strings.Contains(p, " rows/s (") || strings.Contains(p, "\r") {
		t.Errorf("progress output %q: want plain rate lines", p)
	}
	tables, err := c.ListTables(ctx)
	if err != nil || len(tables) != 0 {
		t.Errorf("tables after the run: %v, %v", tables, err)
	}
	checkJSON(t, rep)
}

// checkMixes checks the YCSB phases' operation counts: only the kinds of
// the workload, adding up to the calls, in its proportions (within 4
// standard deviations of a binomial count).
func checkMixes(t *testing.T, rep *bench.Report) {
	t.Helper()
	mixes := map[string]map[string]float64{
		bench.PhaseYCSBA: {"read": 0.5, "update": 0.5},
		bench.PhaseYCSBB: {"read": 0.95, "update": 0.05},
		bench.PhaseYCSBC: {"read": 1},
		bench.PhaseYCSBD: {"read": 0.95, "insert": 0.05},
		bench.PhaseYCSBE: {"scan": 0.95, "insert": 0.05},
		bench.PhaseYCSBF: {"read": 0.5, "readModifyWrite": 0.5},
	}
	for phase, mix := range mixes {
		res, _ := rep.Result(phase)
		var sum int64
		for _, op := range res.Ops {
			sum += op.Count
			p, ok := mix[op.Kind]
			n := float64(res.Calls)
			if tol := 4*math.Sqrt(n*p*(1-p)) + 1; !ok || math.Abs(float64(op.Count)-n*p) > tol {
				t.Errorf("%s: %d %s of %d calls, want %.0f ± %.0f", phase, op.Count, op.Kind, res.Calls, n*p, tol)
			}
			if op.P50 <= 0 || op.P50 > op.Max {
				t.Errorf("%s %s: latencies %+v", phase, op.Kind, op.Latency)
			}
		}
		if sum != res.Calls || res.Calls == 0 {
			t.Errorf("%s: ops %+v add up to %d, calls %d", phase, res.Ops, sum, res.Calls)
		}
	}
}

// checkJSON writes the report the way --json does and decodes it: the
// fields a reader relies on are there under their names, and the results
// decode back to what was written.
func checkJSON(t *testing.T, rep *bench.Report) {
	t.Helper()
	var buf bytes.Buffer
	if err := bench.WriteJSON(&buf, bench.JSONOutput{Runs: []*bench.Report{rep}, Medians: []*bench.Report{bench.Median([]*bench.Report{rep, rep})}}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			API     string                       `json:"api"`
			Run     int                          `json:"run"`
			Results []map[string]json.RawMessage `json:"results"`
		} `json:"runs"`
		Medians []struct {
			Runs    int                          `json:"runs"`
			Results []map[string]json.RawMessage `json:"results"`
		} `json:"medians"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("decode %s: %v", buf.String(), err)
	}
	if len(doc.Runs) != 1 || doc.Runs[0].Run != 2 || doc.Runs[0].API != rep.API || len(doc.Medians) != 1 || doc.Medians[0].Runs != 2 {
		t.Fatalf("JSON document %s", buf.String())
	}
	for _, results := range [][]map[string]json.RawMessage{doc.Runs[0].Results, doc.Medians[0].Results} {
		if len(results) != len(rep.Results) {
			t.Fatalf("%d results in JSON, want %d", len(results), len(rep.Results))
		}
		for _, r := range results {
			for _, f := range []string{"phase", "calls", "rows", "bytes", "elapsed_ns", "rows_per_sec", "calls_per_sec", "mb_per_sec",
				"floor_per_sec", "floor_ratio", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "load",
				"cpu", "cores_busy", "machine_cores_busy"} {
				if _, ok := r[f]; !ok {
					t.Errorf("result %s lacks %q", r["phase"], f)
				}
			}
			if strings.HasPrefix(string(r["phase"]), `"ycsb`) {
				var ops []bench.OpStats
				if err := json.Unmarshal(r["ops"], &ops); err != nil || len(ops) == 0 || ops[0].Kind == "" || ops[0].P99 <= 0 {
					t.Errorf("result %s: ops %s (%v)", r["phase"], r["ops"], err)
				}
			}
		}
	}
	var back bench.JSONOutput
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Runs[0], rep) {
		t.Errorf("decoded report differs:\n%+v\nwant\n%+v", back.Runs[0], rep)
	}
}

// TestLocalCPU runs a short bench on a local cluster of real processes:
// every phase reports the CPU time per row of the client and of the
// tserver, master and frontend, found by the addresses they listen on.
func TestLocalCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("a bench on a local cluster of real processes: runs without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := bench.StartLocal(ctx, bench.LocalOptions{Dir: t.TempDir(), CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out strings.Builder
	rep, err := bench.Run(ctx, bench.Options{Client: cl, Masters: c.MasterAddrs(), BigtableAddr: c.BigtableAddr(),
		Keys: 2000, Tablets: 2, Concurrency: 8, ValueSize: 100, Duration: time.Second, Seed: 1, CacheBytes: 8 << 20,
		Phases: []string{bench.PhaseRandomWrite}, Out: &out})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, p := range rep.Procs {
		roles = append(roles, p.Role)
	}
	if strings.Join(roles, ",") != "tserver,master,frontend" || len(rep.Unmeasured) != 0 {
		t.Fatalf("measured %v, not measured %q; want tserver, master and frontend", roles, rep.Unmeasured)
	}
	for _, res := range rep.Results {
		for _, role := range []string{bench.RoleClient, bench.RoleTServer} {
			if c, ok := res.CPUOf(role); !ok || c.CPU <= 0 || c.PerOp <= 0 {
				t.Errorf("%s: %s cpu %+v (%v)", res.Phase, role, c, ok)
			}
		}
		if _, ok := res.CPUOf(bench.RoleFrontend); !ok || res.CoresBusy <= 0 {
			t.Errorf("%s: cpu %+v, cores busy %v", res.Phase, res.CPU, res.CoresBusy)
		}
	}
	var table bytes.Buffer
	if err := rep.Print(&table, "local"); err != nil {
		t.Fatal(err)
	}
	t.Log(table.String())
	if !strings.Contains(table.String(), "cpu µs/op") || !strings.Contains(table.String(), "frontend") {
		t.Errorf("report lacks the CPU table:\n%s", table.String())
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
		{Client: c, Distribution: "pareto"},
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
	run := func(rows int64, p50 time.Duration, ratio float64, reads int64) *bench.Report {
		return &bench.Report{Results: []bench.Result{{Phase: "put", Rows: rows, Elapsed: 2 * time.Second,
			Latency: bench.Latency{P50: p50, Max: 10 * p50}, FloorRatio: ratio,
			Ops: []bench.OpStats{{Kind: "read", Count: reads, Latency: bench.Latency{P99: p50}}}}}}
	}
	m := bench.Median([]*bench.Report{run(100, 3, 0.5, 10), run(300, 1, 0.1, 30), run(200, 2, 0.3, 20)})
	got, _ := m.Result("put")
	if got.RowsPerSec() != 100 || got.P50 != 2 || got.Max != 20 || got.FloorRatio != 0.3 || m.Runs != 3 {
		t.Errorf("median: %v rows/s, p50 %v, max %v, floor ratio %v, runs %d; want 100, 2, 20, 0.3, 3",
			got.RowsPerSec(), got.P50, got.Max, got.FloorRatio, m.Runs)
	}
	if op, ok := got.Op("read"); !ok || op.Count != 10 || op.P99 != 2 {
		t.Errorf("median of the reads: %+v, want 10/s, p99 2", op)
	}
}

// TestLatencyPercentiles: exact nearest-rank percentiles.
func TestLatencyPercentiles(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(1000 - i) // 1 … 1000, unsorted
	}
	r := bench.LatencyOf(lat)
	if r.P50 != 500 || r.P90 != 900 || r.P99 != 990 || r.P999 != 999 || r.Max != 1000 {
		t.Errorf("percentiles of 1…1000: %+v", r)
	}
	if r := bench.LatencyOf([]time.Duration{7}); r.P50 != 7 || r.P999 != 7 || r.Max != 7 {
		t.Errorf("percentiles of one latency: %+v", r)
	}
}

// BenchmarkPut is the Put phase against an in-process master and tserver,
// for a CPU profile:
//
//	go test -run XXX -bench Put -benchtime 200000x -cpuprofile cpu.out ./tools/bench/
//	go tool pprof -tagfocus side=tserver -top cpu.out
func BenchmarkPut(b *testing.B) {
	c := inProcess(b, 0)
	ctx := context.Background()
	b.ResetTimer()
	var rep *bench.Report
	var err error
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		rep, err = bench.Run(ctx, bench.Options{Client: c, Keys: 1_000_000, Duration: time.Hour, Ops: int64(b.N),
			Phases: []string{bench.PhaseRandomWrite}})
	})
	if err != nil {
		b.Fatal(err)
	}
	res, _ := rep.Result(bench.PhaseRandomWrite)
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
	wait.For(b, time.Minute, "table r open", func() (err error) {
		tbl, err = c.Open(ctx, "r")
		return err
	})
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
