package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
	"bighive/tools/cli"
)

// scrape GETs addr's /metrics and returns every sample by its name with
// labels as printed ("name" or `name{a="x",b="y"}`).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s/metrics: line %q: %v", addr, line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s/metrics: %v", addr, err)
	}
	return out
}

// check asserts each named sample exists and passes its test.
func check(t *testing.T, who string, m map[string]float64, want map[string]func(float64) bool) {
	t.Helper()
	for name, ok := range want {
		v, found := m[name]
		if !found {
			t.Errorf("%s: no sample %s", who, name)
		} else if !ok(v) {
			t.Errorf("%s: %s = %v, implausible", who, name, v)
		}
	}
}

func positive(v float64) bool { return v > 0 }
func present(float64) bool    { return true }
func equals(x float64) func(float64) bool {
	return func(v float64) bool { return v == x }
}

func getOK(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

func dialRaw(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// listServices is what `grpcurl -plaintext addr list` prints, through the
// reflection service.
func listServices(t *testing.T, ctx context.Context, addr string) []string {
	t.Helper()
	stream, err := rpb.NewServerReflectionClient(dialRaw(t, addr)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("reflection %s: %v", addr, err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatalf("reflection %s: send: %v", addr, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection %s: recv: %v", addr, err)
	}
	var out []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		out = append(out, s.Name)
	}
	return out
}

func healthOf(ctx context.Context, hc healthpb.HealthClient, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return r.GetStatus(), err
}

// waitHealth polls a health check until it reports want.
func waitHealth(t *testing.T, ctx context.Context, hc healthpb.HealthClient, service string, want healthpb.HealthCheckResponse_ServingStatus, what string) {
	t.Helper()
	wait.ForCtx(t, ctx, fmt.Sprintf("%s: health %v", what, want), func() error {
		st, err := healthOf(ctx, hc, service)
		if err == nil && st != want {
			err = fmt.Errorf("health %v", st)
		}
		return err
	})
}

// TestObservability: a real master, tserver and frontend serve /metrics
// with the families an operator needs (with plausible values after writes
// and a checkpoint), pprof, reflection and health; `bighive status` and
// `version` and every binary's --version print what they should.
func TestObservability(t *testing.T) {
	skipShort(t, "metrics, pprof, health and status")
	const lease = 2 * time.Second
	c, cl := startCluster(t, cluster.Options{Masters: 1, TServers: 1, Lease: lease, Heartbeat: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "obs", 2)
	for i := 0; i < 200; i++ {
		if err := tbl.Put(ctx, rowKey(i*50), "cf", "v", value(i)); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := tbl.Get(ctx, rowKey(i*50)); err != nil {
			t.Fatalf("get: %v", err)
		}
	}
	scanned := 0
	if err := tbl.Scan(ctx, "", "", func(client.Row) bool { scanned++; return true }); err != nil || scanned != 200 {
		t.Fatalf("scan: %d rows, %v", scanned, err)
	}
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}

	tsm := scrape(t, c.TServerHTTPAddr(0))
	check(t, "tserver", tsm, map[string]func(float64) bool{
		"bighive_wal_appends_total":                                                                   positive,
		"bighive_wal_written_bytes_total":                                                             positive,
		"bighive_wal_group_size_records_count":                                                        positive,
		`bighive_wal_group_size_records_bucket{le="+Inf"}`:                                            positive,
		"bighive_wal_fdatasync_duration_seconds_count":                                                positive,
		"bighive_wal_fdatasync_duration_seconds_sum":                                                  positive,
		"bighive_wal_rolls_total":                                                                     positive, // the checkpoint rolled the log
		"bighive_tserver_write_buffer_bytes":                                                          present,
		"bighive_tserver_throttled_writes_total":                                                      equals(0),
		"bighive_checkpoint_runs_total":                                                               positive,
		"bighive_checkpoint_duration_seconds_count":                                                   positive,
		"bighive_checkpoint_flushed_bytes_total":                                                      positive,
		"bighive_checkpoint_flushed_tablets_total":                                                    positive,
		`bighive_checkpoint_lock_window_seconds{quantile="1"}`:                                        present,
		`bighive_compaction_runs_total{kind="merge"}`:                                                 present,
		"bighive_compaction_read_bytes_total":                                                         present,
		`bighive_blockcache_evictions_total{priority="low"}`:                                          present,
		`bighive_blockcache_bytes{priority="medium"}`:                                                 present,
		"bighive_blockcache_hits_total":                                                               present,
		"bighive_blockcache_misses_total":                                                             present,
		"bighive_blockcache_capacity_bytes":                                                           positive,
		"bighive_blockstore_containers":                                                               positive,
		"bighive_blockstore_live_bytes":                                                               positive,
		"bighive_blockstore_dead_bytes":                                                               present,
		"bighive_blockstore_hole_punches_total":                                                       present,
		"bighive_blockstore_open_files":                                                               positive,
		`bighive_tserver_tablets{state="serving"}`:                                                    equals(2),
		"bighive_tserver_recovery_duration_seconds_count":                                             equals(2),
		"bighive_tserver_split_duration_seconds_count":                                                present,
		"bighive_tserver_heartbeat_duration_seconds_count":                                            positive,
		"bighive_tserver_lease_valid":                                                                 equals(1),
		`bighive_grpc_server_requests_total{code="OK",method="/bighive.v1.TServer/Checkpoint"}`:       equals(1),
		`bighive_grpc_server_request_duration_seconds_count{method="/bighive.v1.TServer/Checkpoint"}`: equals(1),
		`bighive_grpc_server_requests_total{code="OK",method="/bighive.v1.TServer/ScanRows"}`:         positive,
		"go_goroutines":    positive,
		"process_open_fds": positive,
	})
	var writes float64
	for name, v := range tsm {
		if strings.HasPrefix(name, "bighive_grpc_server_requests_total{") && strings.Contains(name, `code="OK"`) && (strings.Contains(name, "/bighive.v1.TServer/Mutate") || strings.Contains(name, "/bighive.v1.TServer/BatchCommands/MutateRow")) {
			writes += v
		}
	}
	if writes < 1 {
		t.Errorf("tserver: no OK Mutate* request or batch-stream MutateRow command counted")
	}
	for name := range tsm {
		if strings.Contains(name, "tablet_id") || strings.Contains(name, `table="`) {
			t.Errorf("tserver: per-tablet label in %s", name)
		}
	}

	mm := scrape(t, c.MasterHTTPAddr(0))
	check(t, "master", mm, map[string]func(float64) bool{
		`bighive_master_raft_state{state="leader"}`:                                           equals(1),
		`bighive_master_raft_state{state="follower"}`:                                         equals(0),
		"bighive_master_raft_has_leader":                                                      equals(1),
		"bighive_master_raft_term":                                                            positive,
		"bighive_master_raft_applied_index":                                                   positive,
		"bighive_master_raft_commit_index":                                                    positive,
		`bighive_master_commands_total{result="applied",type="create_tablets"}`:               equals(1),
		`bighive_master_commands_total{result="applied",type="checkpoint"}`:                   positive,
		`bighive_master_tservers{state="live"}`:                                               equals(1),
		`bighive_master_tservers{state="dead"}`:                                               equals(0),
		"bighive_master_tables":                                                               equals(1),
		`bighive_master_tablets{state="unassigned"}`:                                          equals(0),
		`bighive_master_tablets{state="serving"}`:                                             equals(2),
		"bighive_master_heartbeat_duration_seconds_count":                                     positive,
		`bighive_grpc_server_requests_total{code="OK",method="/bighive.v1.Master/Heartbeat"}`: positive,
		"go_goroutines": positive,
	})
	fm := scrape(t, c.FrontendHTTPAddr())
	check(t, "frontend", fm, map[string]func(float64) bool{"go_goroutines": positive, "process_resident_memory_bytes": positive})
	for _, addr := range []string{c.MasterHTTPAddr(0), c.TServerHTTPAddr(0), c.FrontendHTTPAddr()} {
		if body := getOK(t, "http://"+addr+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
			t.Errorf("%s/debug/pprof/ lists no goroutine profile", addr)
		}
	}

	// Reflection: what `grpcurl -plaintext host:port list` shows.
	for _, tc := range []struct{ addr, service string }{
		{c.MasterAddrs()[0], "bighive.v1.Master"},
		{c.TServerAddr(0), "bighive.v1.TServer"},
		{c.BigtableAddr(), "google.bigtable.v2.Bigtable"},
	} {
		got := listServices(t, ctx, tc.addr)
		for _, want := range []string{tc.service, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
			if !slices.Contains(got, want) {
				t.Errorf("reflection on %s lists %v, without %s", tc.addr, got, want)
			}
		}
	}

	// Health: the master has a leader, the tserver a lease.
	mh := healthpb.NewHealthClient(dialRaw(t, c.MasterAddrs()[0]))
	th := healthpb.NewHealthClient(dialRaw(t, c.TServerAddr(0)))
	for _, svc := range []string{"", "bighive.v1.Master"} {
		if st, err := healthOf(ctx, mh, svc); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("master health %q: %v %v, want SERVING", svc, st, err)
		}
	}
	for _, svc := range []string{"", "bighive.v1.TServer"} {
		if st, err := healthOf(ctx, th, svc); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("tserver health %q: %v %v, want SERVING", svc, st, err)
		}
	}
	fh := healthpb.NewHealthClient(dialRaw(t, c.BigtableAddr()))
	if st, err := healthOf(ctx, fh, ""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("frontend health: %v %v, want SERVING", st, err)
	}

	// bighive status and version.
	var out, errb bytes.Buffer
	if code := cli.Run(ctx, []string{"status", "--masters", strings.Join(c.MasterAddrs(), ",")}, &out, &errb); code != 0 {
		t.Fatalf("bighive status: exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"leader: m1 (" + c.MasterAddrs()[0] + ")", "Leader", "tservers: 1 live, 0 dead", c.TServerAddr(0),
		"tables: 1, tablets: 2, unassigned tablets: 0", "wal: ", "cache: "} {
		if !strings.Contains(s, want) {
			t.Errorf("bighive status lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "wal: 0 appends") {
		t.Errorf("bighive status counts no WAL appends:\n%s", s)
	}
	out.Reset()
	if code := cli.Run(ctx, []string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "bighive ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("bighive version: exit %d, %q", code, out.String())
	}
	for _, name := range []string{"master", "tserver", "frontend"} {
		bin, err := cluster.Binary(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(b), name+" ") || !strings.Contains(string(b), "go1.") {
			t.Errorf("%s --version: %v, %q", name, err, b)
		}
	}

	// A tserver whose lease lapsed is NOT_SERVING until it has a lease
	// again. The master is stopped too, so that the tserver cannot renew
	// the lease the moment it resumes: its lapsed state is observable.
	if err := c.PauseMaster(0); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseTServer(0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease + 500*time.Millisecond) // past the lease: the condition under test, not an assertion
	if err := c.ResumeTServer(0); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, ctx, th, "", healthpb.HealthCheckResponse_NOT_SERVING, "tserver after its lease lapsed")
	if st, err := healthOf(ctx, th, "bighive.v1.TServer"); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("tserver health of bighive.v1.TServer with a lapsed lease: %v %v", st, err)
	}
	check(t, "tserver with a lapsed lease", scrape(t, c.TServerHTTPAddr(0)), map[string]func(float64) bool{"bighive_tserver_lease_valid": equals(0)})
	if err := c.ResumeMaster(0); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, ctx, th, "", healthpb.HealthCheckResponse_SERVING, "tserver after the master resumed")
	waitHealth(t, ctx, mh, "", healthpb.HealthCheckResponse_SERVING, "master after it resumed")
}
