package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"bighive/testkit/inproc"
	"bighive/tools/bench"
	"bighive/tools/cli"
)

// TestBenchJSON runs `bighive bench --json` twice against a real
// in-process cluster: stdout is one JSON document with both runs and the
// medians; the progress lines go to stderr, and -q silences them.
func TestBenchJSON(t *testing.T) {
	c := inproc.Start(t, inproc.Options{})
	masters := strings.Join(c.MasterAddrs(), ",")
	args := []string{"bench", "--masters", masters, "--json", "--runs", "2", "--keys", "300", "--tablets", "2",
		"--concurrency", "4", "--value-size", "50", "--duration", "2s", "--ops", "60", "--phases", "randomWrite,ycsbB"}
	for _, quiet := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		a := args
		if quiet { // and without floor probes: every ratio is to the ping phase
			a = append(a, "-q", "--floor-probe", "-1s")
		}
		if code := cli.Run(context.Background(), a, &stdout, &stderr, bench.Command); code != 0 {
			t.Fatalf("bench exited %d: %s", code, stderr.String())
		}
		var doc bench.JSONOutput
		if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
			t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout.String())
		}
		if len(doc.Runs) != 2 || doc.Runs[0].Run != 1 || doc.Runs[1].Run != 2 || len(doc.Medians) != 1 || doc.Medians[0].Runs != 2 {
			t.Fatalf("runs %+v medians %+v", doc.Runs, doc.Medians)
		}
		for _, rep := range append(doc.Runs, doc.Medians...) {
			var phases []string
			for _, r := range rep.Results {
				phases = append(phases, r.Phase)
			}
			if strings.Join(phases, ",") != "ping,randomWrite,ycsbB" {
				t.Errorf("phases %v, want ping,randomWrite,ycsbB", phases)
			}
			if r, _ := rep.Result(bench.PhaseYCSBB); r.FloorRatio <= 0 || r.P99 <= 0 || len(r.Ops) == 0 {
				t.Errorf("ycsbB: %+v", r)
			}
			ping, _ := rep.Result(bench.PhasePing)
			if r, _ := rep.Result(bench.PhaseRandomWrite); (r.Floor == ping.Floor) != quiet || r.Floor <= 0 {
				t.Errorf("quiet %v: randomWrite's floor %v, ping's %v: want its own probe unless --floor-probe is negative", quiet, r.Floor, ping.Floor)
			}
		}
		if got := strings.Contains(stderr.String(), "ycsbB"); got == quiet {
			t.Errorf("quiet %v: stderr %q", quiet, stderr.String())
		}
	}
}
