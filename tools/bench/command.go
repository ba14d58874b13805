package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"bighive/testkit/cluster"
	"bighive/tools/cli"
)

// Command is `bighive bench`: Run, by default on its own local cluster
// of one master and one tserver (real processes), or against --masters.
var Command = cli.Command{
	Name: "bench",
	Args: "[--duration D] [--ops N] [--concurrency N] [--value-size B] [--keys N] [--tablets N] " +
		"[--api native,bigtable] [--bigtable ADDR] [--phases P,…] [--distribution uniform|zipfian] [--floor-probe D] [--counters N] [--runs N] [--cache-bytes B] [--mem-limit B] [--tls] [--hosts N [--gluster [--replicas N]]] [--pids ROLE=PID,…] [--dir DIR] [-q]",
	Summary: "benchmark against a ping floor: PerformanceEvaluation's sequentialWrite, randomWrite, sequentialRead, randomRead, scan, scanRange10/100/1000, " +
		"bulk, increment and checkAndMutate, and YCSB workloads A-F, through the native client and/or the official Cloud Bigtable Go client via a frontend; a local 1+1 cluster (1+N on hosts with --hosts, over GlusterFS with --gluster) unless --masters; " +
		"each phase's CPU µs per operation of the client, the tservers, the masters and the frontend",
	Example: "bench --duration 5s --phases randomWrite,randomRead\nbench --phases ycsb --distribution uniform\nbench --api native,bigtable --duration 5s --runs 3\n" +
		"bench --masters 127.0.0.1:7100 --api bigtable --bigtable 127.0.0.1:8086\nbench --duration 5s --phases put,increment,checkandmutate\n" +
		"bench --masters 127.0.0.1:7100 --concurrency 16\nbench --runs 3 --json -q\nbench --tls --duration 3s --phases put,get,scan\n" +
		"bench --masters 127.0.0.1:7100 --pids tserver=4242,master=4240\nbench --hosts 3 --gluster --phases put,get,scan",
	Run: runBench,
}

func runBench(ctx context.Context, env *cli.Env, args []string) error {
	fs := env.FlagSet()
	var o Options
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each timed phase")
	fs.Int64Var(&o.Ops, "ops", 0, "also end each timed phase after this many calls (0: time only)")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "client goroutines")
	fs.IntVar(&o.ValueSize, "value-size", 1000, "value `bytes`")
	fs.IntVar(&o.Keys, "keys", 500_000, "rows in the keyspace")
	fs.IntVar(&o.Tablets, "tablets", 8, "tablets the table is pre-split into")
	fs.IntVar(&o.BatchSize, "batch", 100, "rows per ApplyBulk")
	fs.IntVar(&o.Scanners, "scanners", 4, "concurrent scanners of the second scan (1: skip it)")
	fs.IntVar(&o.Counters, "counters", 1024, "rows the increment and checkAndMutate phases work on")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the key choices (0: the time)")
	fs.DurationVar(&o.FloorProbe, "floor-probe", 0, "ping probe before each phase, the floor of its ratio (0: duration/5, at most 2s; negative: none, the ratios are to the first ping phase)")
	fs.StringVar(&o.Distribution, "distribution", DistZipfian, "key choice of YCSB workloads A, B, C, E, F: uniform or zipfian (D reads the latest rows)")
	aliases := slices.Sorted(maps.Keys(PhaseAliases))
	phases := fs.String("phases", strings.Join(AllPhases, ","),
		"phases to run (case-insensitive; ping always runs), or the groups "+strings.Join(aliases, ","))
	runs := fs.Int("runs", 1, "runs (each on a fresh cluster when local); more than one prints the medians too")
	cache := fs.Int64("cache-bytes", 64<<20, "the tserver's block cache `bytes` (local: passed as --cache-bytes; remote: what it is)")
	memLimit := fs.Int64("mem-limit", 0, "local tserver's --mem-limit `bytes` (0: its default)")
	dir := fs.String("dir", "", "directory of the local cluster, kept afterwards (default: a temporary one, removed)")
	apis := fs.String("api", APINative, "client(s) of the data calls, comma-separated: native (Bighive's client) and/or bigtable (the official Cloud Bigtable Go client through a frontend); both print the ratios too")
	btAddr := fs.String("bigtable", "", "with --masters and --api bigtable: the frontend's `address`")
	apiOnTServer := fs.Bool("bigtable-on-tserver", false, "local, with --api bigtable: the official client talks to the tserver started with --bigtable (the API served in-process), not to the frontend process")
	quiet := fs.Bool("q", false, "no progress lines")
	withTLS := fs.Bool("tls", false, "local only: run every measurement twice, on a plaintext cluster and on a TLS one (certificates generated), and print the ratios tls/plaintext")
	onHosts := fs.Int("hosts", 0, "local: run the master and `N` tservers each on a host of its own (network and mount namespaces on a bridge; root); 0: one tserver on loopback")
	gluster := fs.Bool("gluster", false, "with --hosts: the tservers' shared root on a GlusterFS volume each tserver host mounts with its own client (root, GlusterFS)")
	replicas := fs.Int("replicas", 1, "with --gluster: the volume's bricks, each a replica of every file")
	pids := fs.String("pids", "", "with --masters: the server processes whose CPU time to measure, as role=pid,… "+
		"(default: the processes of this machine listening on the masters', the live tservers' and the frontend's addresses)")
	cpuProfile := fs.String("cpuprofile", "", "write the CPU profile of this process (the client) over the whole run to `file` (the servers' are on their /debug/pprof/)")
	if _, err := env.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	o.CacheBytes = *cache
	o.Phases = strings.Split(*phases, ",")
	if !*quiet {
		// Progress goes to the terminal or log; with --json stdout holds
		// the JSON document only, so progress goes to stderr.
		out := env.Stdout
		if env.JSON {
			out = env.Stderr
		}
		o.Out, o.Progress, o.ProgressTTY = out, out, isTerminal(out)
	}
	remote := os.Getenv("BIGHIVE_MASTERS") != ""
	fs.Visit(func(f *flag.Flag) { remote = remote || f.Name == "masters" })

	apiList := strings.Split(*apis, ",")
	for _, a := range apiList {
		if a != APINative && a != APIBigtable {
			return fmt.Errorf("bench: unknown --api %q (want %s, %s or both)", a, APINative, APIBigtable)
		}
	}
	if remote && *btAddr == "" && slices.Contains(apiList, APIBigtable) {
		return fmt.Errorf("bench: --api bigtable against --masters needs --bigtable, the frontend's address")
	}
	if *withTLS && remote {
		return fmt.Errorf("bench: --tls compares a plaintext and a TLS cluster, both local; it does not take --masters")
	}
	var hosts *cluster.HostsOptions
	switch {
	case *onHosts < 0:
		return fmt.Errorf("bench: --hosts %d: want a number of tservers, or 0 for none on hosts", *onHosts)
	case *onHosts > 0 && (remote || *withTLS):
		return fmt.Errorf("bench: --hosts starts a local cluster on hosts, in plaintext; it takes neither --masters nor --tls")
	case *onHosts > 0:
		hosts = &cluster.HostsOptions{Gluster: *gluster, Replicas: *replicas}
	case *gluster:
		return fmt.Errorf("bench: --gluster puts the tservers of --hosts on GlusterFS; give --hosts N")
	}
	if *replicas != 1 && !*gluster {
		return fmt.Errorf("bench: --replicas is the bricks of the GlusterFS volume of --gluster")
	}
	if *pids != "" {
		if !remote {
			return fmt.Errorf("bench: --pids names the processes of a cluster given by --masters; a local cluster's are found by themselves")
		}
		procs, err := ParseProcs(*pids)
		if err != nil {
			return err
		}
		o.Procs = procs
	}
	transports := []bool{false}
	if *withTLS {
		transports = append(transports, true)
	}
	o.BigtableAddr = *btAddr
	if o.Seed == 0 { // one seed for the APIs of a run
		o.Seed = uint64(time.Now().UnixNano())
	}

	// Each run measures every API, each on a fresh cluster when local,
	// one after the other, so that the APIs see the same machine load.
	reports := map[string][]*Report{}
	var doc JSONOutput
	var keys []string // api, or api+"/tls", in order
	for run := 1; run <= max(*runs, 1); run++ {
		for _, api := range apiList {
			for _, tls := range transports {
				o.API, o.Run = api, run
				key, mode := api, "plaintext"
				if tls {
					key, mode = api+"/tls", "tls"
				}
				if run == 1 {
					keys = append(keys, key)
				}
				if o.Out != nil {
					fmt.Fprintf(o.Out, "\n=== run %d of %d, api %s, %s ===\n", run, *runs, api, mode)
				}
				var rep *Report
				var err error
				if remote {
					rep, err = benchRemote(ctx, env, o)
				} else {
					rep, err = benchLocal(ctx, o, *dir, run, LocalOptions{CacheBytes: *cache, MemLimit: *memLimit, TLS: tls,
						APIOnTServer: *apiOnTServer, TServers: *onHosts, Hosts: hosts})
				}
				if err != nil {
					return err
				}
				reports[key] = append(reports[key], rep)
				doc.Runs = append(doc.Runs, rep)
				if !env.JSON {
					if err := rep.Print(env.Stdout, fmt.Sprintf("run %d, %s", run, mode)); err != nil {
						return err
					}
				}
			}
		}
		o.Seed++
	}
	final := map[string]*Report{}
	for _, key := range keys {
		final[key] = reports[key][len(reports[key])-1]
		if len(reports[key]) > 1 {
			final[key] = Median(reports[key])
			doc.Medians = append(doc.Medians, final[key])
			if !env.JSON {
				if err := final[key].Print(env.Stdout, fmt.Sprintf("median of %d runs", len(reports[key]))); err != nil {
					return err
				}
			}
		}
	}
	if env.JSON {
		return WriteJSON(env.Stdout, doc)
	}
	if len(apiList) > 1 {
		if err := PrintRatios(env.Stdout, final[APINative], final[APIBigtable]); err != nil {
			return err
		}
	}
	if *withTLS {
		for _, api := range apiList {
			if err := PrintTLSRatios(env.Stdout, final[api], final[api+"/tls"]); err != nil {
				return err
			}
		}
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func benchRemote(ctx context.Context, env *cli.Env, o Options) (*Report, error) {
	c, err := env.Client(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	o.Client = c
	o.Masters = env.Masters
	return Run(ctx, o)
}

// benchLocal runs one measurement on a fresh cluster StartLocal starts
// with lo (its Dir set here: under dir, or a temporary one).
func benchLocal(ctx context.Context, o Options, dir string, run int, lo LocalOptions) (*Report, error) {
	runDir := ""
	if dir != "" {
		runDir = fmt.Sprintf("%s/run%d-%s", dir, run, o.API)
		if lo.TLS {
			runDir += "-tls"
		}
	} else {
		tmp, err := os.MkdirTemp("", "bighive-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		runDir = tmp
	}
	if o.Out != nil {
		where := ""
		if lo.Hosts != nil {
			where = " on hosts"
			if lo.Hosts.Gluster {
				where += fmt.Sprintf(" over GlusterFS (%d bricks)", max(lo.Hosts.Replicas, 1))
			}
		}
		fmt.Fprintf(o.Out, "starting 1 master + %d tserver(s)%s under %s\n", max(lo.TServers, 1), where, runDir)
	}
	lo.Dir = runDir
	c, err := StartLocal(ctx, lo)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cl, err := c.Client(ctx) // with the cluster's client certificate in TLS mode
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	o.Client = cl
	o.Masters = c.MasterAddrs()
	o.Credentials = c.Credentials()
	o.BigtableAddr = c.BigtableAddr() // the cluster's frontend process
	if lo.APIOnTServer {
		o.BigtableAddr = c.TServerAddr(0)
	}
	if lo.Hosts != nil {
		o.Procs = LocalProcs(c)
	}
	rep, err := Run(ctx, o)
	if rep != nil {
		rep.TLS = lo.TLS
	}
	return rep, err
}
