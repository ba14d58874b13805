package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Bighive's and Pebble's own benchmarks run as programs of their own
// modules, built once at the start, and print JSON that is read here.

// buildBinaries builds Bighive's client (the `bench` command) and
// tools/bench/pebble into tmp, as the selected peers need them.
func buildBinaries(o *options, tmp string) error {
	build := func(dir, out string, pkg string) error {
		fmt.Fprintf(logOut, "peers: go build %s in %s\n", pkg, dir)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
		}
		return nil
	}
	if o.want(peerBighive) || o.want(peerBighiveBT) {
		o.clientBin = filepath.Join(tmp, "bighive-client")
		if err := build(o.root, o.clientBin, "./cmd/bighive"); err != nil {
			return err
		}
	}
	if o.want(peerPebble) {
		o.pebbleBin = filepath.Join(tmp, "pebble-bench")
		if err := build(filepath.Join(o.root, "tools", "bench", "pebble"), o.pebbleBin, "."); err != nil {
			return err
		}
	}
	return nil
}

// bighiveJSON is the part of `bighive bench --json` read here.
type bighiveJSON struct {
	Runs []struct {
		API     string `json:"api"`
		Results []struct {
			Phase  string  `json:"phase"`
			RowsPS float64 `json:"rows_per_sec"`
			MBPS   float64 `json:"mb_per_sec"`
			P50    int64   `json:"p50_ns"`
			P99    int64   `json:"p99_ns"`
			Floor  float64 `json:"floor_per_sec"`
		} `json:"results"`
	} `json:"runs"`
}

// runBighive runs Bighive's own bench once (a fresh local cluster of one
// master, one tserver and a frontend per API, as `bighive bench` starts
// it) through the native client and/or the official Cloud Bigtable
// client, and returns the figures by API ("native", "bigtable").
func runBighive(ctx context.Context, o options, p *procs, dir string, seed uint64) (map[string]figures, error) {
	var apis []string
	if o.want(peerBighive) {
		apis = append(apis, "native")
	}
	if o.want(peerBighiveBT) {
		apis = append(apis, "bigtable")
	}
	args := []string{"bench", "--json", "-q",
		"--phases", strings.Join([]string{phaseWrite, phaseBulk, phaseReadWarm, phaseRead, phaseScan}, ","),
		"--scanners", "1", "--runs", "1", "--api", strings.Join(apis, ","),
		"--duration", o.duration.String(), "--concurrency", strconv.Itoa(o.concurrency),
		"--value-size", strconv.Itoa(o.valueSize), "--keys", strconv.Itoa(o.keys),
		"--batch", strconv.Itoa(o.batch), "--cache-bytes", strconv.FormatInt(o.cacheBytes, 10),
		"--seed", strconv.FormatUint(seed, 10), "--dir", filepath.Join(dir, "bighive")}
	if o.apiOnTServer {
		args = append(args, "--bigtable-on-tserver")
	}
	cmd := exec.Command(o.clientBin, args...)
	cmd.Dir = o.root // the bench builds ./cmd/master, ./cmd/tserver, ./cmd/frontend of the module here
	// TMPDIR: the bench's cluster builds its binaries under the temporary
	// directory; here, one of this run's own.
	cmd.Env = append(cleanEnv(), "TMPDIR="+dir)
	logf("bighive")("bighive bench %s", strings.Join(args[1:], " "))
	limit := time.Duration(len(apis))*(12*o.duration+10*time.Minute) + 5*time.Minute
	out, err := p.run(ctx, cmd, filepath.Join(dir, "bighive.log"), limit)
	if err != nil {
		return nil, err
	}
	var doc bighiveJSON
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("bighive bench output: %w: %.300q", err, out)
	}
	res := map[string]figures{}
	for _, r := range doc.Runs {
		f := figures{}
		for _, x := range r.Results {
			f[x.Phase] = figure{RowsPS: x.RowsPS, MBPS: x.MBPS, P50: time.Duration(x.P50), P99: time.Duration(x.P99), Floor: x.Floor}
		}
		res[r.API] = f
	}
	for _, a := range apis {
		if res[a] == nil {
			return nil, fmt.Errorf("bighive bench printed no run of api %s", a)
		}
	}
	return res, nil
}

// cleanEnv is the environment without BIGHIVE_* variables, so that the
// bench starts its own local cluster (not BIGHIVE_MASTERS's) in plaintext.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "BIGHIVE_") {
			env = append(env, e)
		}
	}
	return env
}

// pebbleJSON is `tools/bench/pebble --json`'s output.
type pebbleJSON struct {
	Runs [][]struct {
		Phase  string  `json:"phase"`
		RowsPS float64 `json:"rows_per_s"`
		MBPS   float64 `json:"mb_per_s"`
		P50    int64   `json:"p50_ns"`
		P99    int64   `json:"p99_ns"`
	} `json:"runs"`
}

// runPebble runs tools/bench/pebble once: embedded Pebble on the same
// workloads, in its own process.
func runPebble(ctx context.Context, o options, p *procs, dir string, seed uint64) (figures, error) {
	args := []string{"--json", "--runs", "1", "--dir", filepath.Join(dir, "pebble"),
		"--duration", o.duration.String(), "--concurrency", strconv.Itoa(o.concurrency),
		"--value-size", strconv.Itoa(o.valueSize), "--keys", strconv.Itoa(o.keys),
		"--batch", strconv.Itoa(o.batch), "--cache-bytes", strconv.FormatInt(o.cacheBytes, 10),
		"--seed", strconv.FormatUint(seed, 10)}
	logf("pebble")("tools/bench/pebble %s", strings.Join(args, " "))
	out, err := p.run(ctx, exec.Command(o.pebbleBin, args...), filepath.Join(dir, "pebble.log"), 10*o.duration+15*time.Minute)
	if err != nil {
		return nil, err
	}
	var doc pebbleJSON
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("tools/bench/pebble output: %w: %.300q", err, out)
	}
	if len(doc.Runs) != 1 {
		return nil, fmt.Errorf("tools/bench/pebble printed %d runs, want 1", len(doc.Runs))
	}
	f := figures{}
	for _, x := range doc.Runs[0] {
		f[x.Phase] = figure{RowsPS: x.RowsPS, MBPS: x.MBPS, P50: time.Duration(x.P50), P99: time.Duration(x.P99)}
	}
	return f, nil
}

// requireVersion returns the version a go.mod file requires of module.
func requireVersion(gomod, module string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "require" && len(fs) >= 3 {
			fs = fs[1:]
		}
		if len(fs) >= 2 && fs[0] == module {
			return fs[1]
		}
	}
	return ""
}
