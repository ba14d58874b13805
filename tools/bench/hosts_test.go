package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"bighive/testkit/cluster"
	"bighive/tools/bench"
	"bighive/tools/cli"
)

// TestBenchOnHostsGluster is a short smoke run of `bighive bench --hosts 2
// --gluster`, and of `bighive bench --hosts 2` (the tservers' root a local
// directory, README's comparison): the local cluster's master and two
// tservers on hosts, Put, Get and scan measured, and the servers' CPU
// time found by pid. It needs root and GlusterFS and skips without them
// and under -short; it asserts no figure.
func TestBenchOnHostsGluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a bench on a cluster on hosts: runs without -short")
	}
	if err := cluster.HostsAvailable(cluster.HostsOptions{Gluster: true}); err != nil {
		t.Skipf("a cluster on hosts cannot run here: %v", err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"gluster", []string{"--gluster"}},
		{"local root", nil},
	} {
		t.Run(tc.name, func(t *testing.T) { benchOnHosts(t, tc.flags) })
	}
}

func benchOnHosts(t *testing.T, flags []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := append([]string{"bench", "--hosts", "2", "--dir", t.TempDir(), "--json", "-q", "--floor-probe", "-1s",
		"--keys", "300", "--tablets", "2", "--concurrency", "4", "--value-size", "50", "--duration", "1s", "--ops", "100",
		"--phases", "put,get-warm,scan", "--scanners", "1"}, flags...)
	var stdout, stderr bytes.Buffer
	if code := cli.Run(ctx, args, &stdout, &stderr, bench.Command); code != 0 {
		t.Fatalf("bench exited %d: %s", code, stderr.String())
	}
	var doc bench.JSONOutput
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout.String())
	}
	if len(doc.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(doc.Runs))
	}
	rep := doc.Runs[0]
	var phases []string
	for _, r := range rep.Results {
		phases = append(phases, r.Phase)
		if r.Calls == 0 || r.Rows == 0 {
			t.Errorf("%s: no call measured: %+v", r.Phase, r)
		}
		if _, ok := r.CPUOf(bench.RoleTServer + "1"); !ok {
			t.Errorf("%s: no CPU time of tserver1: %+v", r.Phase, r.CPU)
		}
	}
	if got, want := strings.Join(phases, ","), strings.Join([]string{bench.PhasePing, bench.PhaseRandomWrite, bench.PhaseRandomReadWarm, bench.PhaseScan}, ","); got != want {
		t.Errorf("phases %s, want %s", got, want)
	}
	var roles []string
	for _, p := range rep.Procs {
		roles = append(roles, p.Role)
	}
	if strings.Join(roles, ",") != "tserver1,tserver2,master,frontend" || len(rep.Unmeasured) != 0 {
		t.Errorf("measured %v, not measured %q; want both tservers, the master and the frontend", roles, rep.Unmeasured)
	}
	t.Logf("phases %v on 1 master + 2 tservers on hosts (bench %s)", phases, strings.Join(flags, " "))
}

// TestHostsFlagErrors: the flags of a bench on hosts refuse what they
// cannot do, before any cluster starts.
func TestHostsFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gluster"}, "give --hosts N"},
		{[]string{"--hosts", "-1"}, "want a number of tservers"},
		{[]string{"--hosts", "2", "--tls"}, "neither --masters nor --tls"},
		{[]string{"--hosts", "2", "--masters", "127.0.0.1:1"}, "neither --masters nor --tls"},
		{[]string{"--hosts", "2", "--replicas", "3"}, "--replicas is the bricks"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), append([]string{"bench"}, tc.args...), &stdout, &stderr, bench.Command)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want an error saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
