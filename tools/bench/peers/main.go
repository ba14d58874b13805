// Command peers runs Bighive's benchmark workloads against well-known
// peers in the same run, one after the other on the same machine, and
// prints one table of medians with Bighive's figures beside theirs:
//
//   - Bighive through its native client and through the official Cloud
//     Bigtable Go client (its own `bighive bench`, a fresh local cluster
//     of one master, one tserver and a frontend), with the ping floor;
//   - embedded Pebble (tools/bench/pebble, another module);
//   - Redis with appendfsync always (Debian's redis-server, measured with
//     redis-benchmark);
//   - a one-node etcd (Debian's etcd-server, through its Go client);
//   - Google's Bigtable emulator (cbtemulator, through the official
//     Cloud Bigtable Go client).
//
// It is its own Go module: Bighive does not depend on any peer, and
// `go test ./...` in the repository root does not build this.
//
//	cd tools/bench/peers && go run . --runs 3
//
// Every server binds to 127.0.0.1 only, lives in a temporary directory,
// and is stopped at the end, also on an error or an interrupt.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The peers, in the order of the table's columns (the floor comes with
// peerBighive).
const (
	peerBighive   = "bighive"
	peerPebble    = "pebble"
	peerRedis     = "redis"
	peerEtcd      = "etcd"
	peerEmulator  = "emulator"
	peerBighiveBT = "bighive-bigtable"
)

var allPeers = []string{peerBighive, peerPebble, peerRedis, peerEtcd, peerEmulator, peerBighiveBT}

type options struct {
	duration     time.Duration
	runs         int
	concurrency  int
	valueSize    int
	keys         int
	batch        int
	cacheBytes   int64
	seed         uint64
	only         []string
	install      bool
	keep         bool
	apiOnTServer bool // Bighive through the official client: the tserver serves the API
	quiet        bool
	emulator     string
	root         string

	// Found or built at the start.
	moduleDir, clientBin, pebbleBin, emulatorBin, redisBin, redisBenchBin, etcdBin string
}

func (o options) want(peer string) bool { return slices.Contains(o.only, peer) }

// logOut receives progress lines (stderr; nothing with -q).
var logOut io.Writer = os.Stderr

// logf returns a progress printer for one peer.
func logf(peer string) func(string, ...any) {
	return func(f string, args ...any) {
		fmt.Fprintf(logOut, "%s %-8s "+f+"\n", append([]any{time.Now().Format("15:04:05"), peer}, args...)...)
	}
}

func main() {
	var o options
	only := flag.String("only", strings.Join(allPeers, ","), "peers to run, comma-separated: "+strings.Join(allPeers, ", "))
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each timed phase")
	flag.IntVar(&o.runs, "runs", 1, "runs, each peer once per run on fresh data; the table holds the medians")
	flag.IntVar(&o.concurrency, "concurrency", 64, "callers (goroutines, connections of redis-benchmark)")
	flag.IntVar(&o.valueSize, "value", 1000, "value `bytes`")
	flag.IntVar(&o.keys, "keys", 500_000, "rows in the keyspace")
	flag.IntVar(&o.batch, "batch", 100, "rows per bulk batch")
	flag.Int64Var(&o.cacheBytes, "cache-bytes", 64<<20, "Bighive's and Pebble's block cache `bytes`; the warm range is half of it")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed of run 1 (run i uses seed+i-1)")
	flag.BoolVar(&o.install, "install", true, "as root, apt-get install redis-server and etcd-server when missing")
	flag.BoolVar(&o.apiOnTServer, "bigtable-on-tserver", false, "Bighive through the official client: talk to the tserver serving the API itself (tserver --bigtable), not to a frontend process")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (data and logs of every peer)")
	flag.BoolVar(&o.quiet, "q", false, "no progress lines")
	flag.StringVar(&o.emulator, "emulator", "", "cbtemulator `binary` (default: PATH, then google-cloud-cli's, else built from this module)")
	flag.StringVar(&o.root, "root", "", "Bighive repository `dir` (default: git rev-parse --show-toplevel, else ../../..)")
	flag.Parse()
	for _, p := range strings.Split(*only, ",") {
		p = strings.TrimSpace(strings.ToLower(p))
		if p == "" {
			continue
		}
		if !slices.Contains(allPeers, p) {
			fmt.Fprintf(os.Stderr, "peers: unknown peer %q in --only (want %s)\n", p, strings.Join(allPeers, ", "))
			os.Exit(2)
		}
		o.only = append(o.only, p)
	}
	if len(o.only) == 0 || o.runs < 1 || o.concurrency < 1 || o.valueSize < 1 || o.keys < 1 || o.batch < 1 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "peers: --only needs a peer; --runs, --concurrency, --value, --keys, --batch and --duration must be positive")
		os.Exit(2)
	}
	if o.quiet {
		logOut = io.Discard
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	p := newProcs()
	err := run(ctx, &o, p)
	stop()
	p.stopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o *options, p *procs) (err error) {
	if err := setup(o); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bighive-peers-")
	if err != nil {
		return err
	}
	defer func() {
		if o.keep || (err != nil && ctx.Err() == nil) {
			fmt.Fprintf(os.Stderr, "peers: data and logs kept in %s\n", tmp)
			return
		}
		os.RemoveAll(tmp)
	}()
	if err := findPeers(o, tmp); err != nil {
		return err
	}
	if err := buildBinaries(o, tmp); err != nil {
		return err
	}
	vers := versions(*o)

	// all[column] holds one figures per run.
	all := map[string][]figures{}
	started := time.Now()
	for r := range o.runs {
		seed := o.seed + uint64(r)
		runDir := filepath.Join(tmp, fmt.Sprintf("run%d", r+1))
		steps := []struct {
			peer string
			do   func(dir string) error
		}{
			{peerBighive, func(dir string) error {
				res, err := runBighive(ctx, *o, p, dir, seed)
				if err != nil {
					return err
				}
				for api, col := range map[string]string{"native": peerBighive, "bigtable": peerBighiveBT} {
					if res[api] != nil {
						all[col] = append(all[col], res[api])
					}
				}
				return nil
			}},
			{peerPebble, func(dir string) error { return one(all, peerPebble)(runPebble(ctx, *o, p, dir, seed)) }},
			{peerRedis, func(dir string) error { return one(all, peerRedis)(runRedis(ctx, *o, p, dir, seed)) }},
			{peerEtcd, func(dir string) error { return one(all, peerEtcd)(runEtcd(ctx, *o, p, dir, seed)) }},
			{peerEmulator, func(dir string) error { return one(all, peerEmulator)(runEmulator(ctx, *o, p, dir, seed)) }},
		}
		for _, s := range steps {
			if !o.want(s.peer) && !(s.peer == peerBighive && o.want(peerBighiveBT)) {
				continue
			}
			dir := filepath.Join(runDir, s.peer)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			logf(s.peer)("run %d of %d", r+1, o.runs)
			t := time.Now()
			if err := s.do(dir); err != nil {
				return fmt.Errorf("run %d, %s: %w", r+1, s.peer, err)
			}
			logf(s.peer)("done in %v", time.Since(t).Round(time.Second))
			if !o.keep {
				os.RemoveAll(dir) // the next peer gets the disk space back
			}
		}
	}
	med := map[string]figures{}
	for col, runs := range all {
		med[col] = medians(runs)
	}
	printTable(os.Stdout, *o, med, vers, started)
	return nil
}

// one records a peer's figures of one run under column col.
func one(all map[string][]figures, col string) func(figures, error) error {
	return func(f figures, err error) error {
		if err != nil {
			return err
		}
		all[col] = append(all[col], f)
		return nil
	}
}

// setup finds the Bighive repository and this module's directory.
func setup(o *options) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	o.moduleDir = wd
	if b, err := os.ReadFile(filepath.Join(wd, "go.mod")); err != nil || !strings.HasPrefix(string(b), "module bighive/tools/bench/peers\n") {
		return errors.New("run this from tools/bench/peers (go run .): its go.mod builds the emulator when there is no cbtemulator")
	}
	if o.root == "" {
		if out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
			o.root = strings.TrimSpace(string(out))
		} else {
			o.root = filepath.Join(wd, "..", "..", "..")
		}
	}
	if o.root, err = filepath.Abs(o.root); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(o.root, "cmd", "bighive")); err != nil {
		return fmt.Errorf("%s is not Bighive's repository (no cmd/bighive); pass --root", o.root)
	}
	return nil
}

// findPeers finds (or installs) the servers of the selected peers before
// anything runs, so that a missing one fails at once.
func findPeers(o *options, tmp string) error {
	var err error
	if o.want(peerRedis) {
		if o.redisBin, err = ensureDebian("redis-server", "redis-server", o.install); err != nil {
			return err
		}
		if o.redisBenchBin, err = ensureDebian("redis-benchmark", "redis-tools", o.install); err != nil {
			return err
		}
	}
	if o.want(peerEtcd) {
		if o.etcdBin, err = ensureDebian("etcd", "etcd-server", o.install); err != nil {
			return err
		}
	}
	if o.want(peerEmulator) {
		if o.emulatorBin, err = findEmulator(*o, tmp); err != nil {
			return err
		}
	}
	return nil
}

// medians combines runs figure by figure.
func medians(runs []figures) figures {
	out := figures{}
	for phase := range runs[0] {
		var rows, mbs, p50, p99, floor []float64
		for _, r := range runs {
			f, ok := r[phase]
			if !ok {
				continue
			}
			rows = append(rows, f.RowsPS)
			mbs = append(mbs, f.MBPS)
			p50 = append(p50, float64(f.P50))
			p99 = append(p99, float64(f.P99))
			floor = append(floor, f.Floor)
		}
		out[phase] = figure{RowsPS: median(rows), MBPS: median(mbs), P50: time.Duration(median(p50)),
			P99: time.Duration(median(p99)), Floor: median(floor)}
	}
	return out
}

// median is the middle value (the mean of the middle two for an even
// count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
