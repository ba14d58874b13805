package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"

	"bighive/client"
	"bighive/internal/tlsconf"
)

// Phase names, in the order a run executes them. The write, read and
// scan phases are named as in HBase's PerformanceEvaluation; ycsbA … ycsbF
// are YCSB's core workloads.
const (
	// PhasePing is the floor: a no-op RPC per call (the tserver's Ping,
	// or PingAndWarm through the Bigtable API). It always runs first.
	PhasePing            = "ping"
	PhaseSequentialWrite = "sequentialWrite"
	PhaseRandomWrite     = "randomWrite"
	PhaseBulk            = "bulk"
	PhaseSequentialRead  = "sequentialRead"
	PhaseRandomReadWarm  = "randomReadWarm"
	PhaseRandomRead      = "randomRead"
	// PhaseScan is full scans by one scanner; with Options.Scanners > 1 a
	// second phase "scan-N" follows with N scanners.
	PhaseScan          = "scan"
	PhaseScanRange10   = "scanRange10"
	PhaseScanRange100  = "scanRange100"
	PhaseScanRange1000 = "scanRange1000"
	PhaseYCSBA         = "ycsbA"
	PhaseYCSBB         = "ycsbB"
	PhaseYCSBC         = "ycsbC"
	PhaseYCSBD         = "ycsbD"
	PhaseYCSBE         = "ycsbE"
	PhaseYCSBF         = "ycsbF"
	// PhaseIncrement and PhaseCheckAndMutate run last: ReadModifyWrite
	// increments and compare-and-set conditional mutations of
	// Options.Counters rows.
	PhaseIncrement      = "increment"
	PhaseCheckAndMutate = "checkAndMutate"
)

// AllPhases are the phases of a run, in order.
var AllPhases = []string{PhasePing, PhaseSequentialWrite, PhaseRandomWrite, PhaseBulk,
	PhaseSequentialRead, PhaseRandomReadWarm, PhaseRandomRead, PhaseScan,
	PhaseScanRange10, PhaseScanRange100, PhaseScanRange1000,
	PhaseYCSBA, PhaseYCSBB, PhaseYCSBC, PhaseYCSBD, PhaseYCSBE, PhaseYCSBF,
	PhaseIncrement, PhaseCheckAndMutate}

// PhaseAliases are further names Options.Phases accepts, each for a group
// of phases; the first five are the phase names of earlier versions.
var PhaseAliases = map[string][]string{
	"put":       {PhaseRandomWrite},
	"get":       {PhaseRandomReadWarm, PhaseRandomRead},
	"get-warm":  {PhaseRandomReadWarm},
	"get-cold":  {PhaseRandomRead},
	"write":     {PhaseSequentialWrite, PhaseRandomWrite},
	"read":      {PhaseSequentialRead, PhaseRandomReadWarm, PhaseRandomRead},
	"scanRange": {PhaseScanRange10, PhaseScanRange100, PhaseScanRange1000},
	"ycsb":      {PhaseYCSBA, PhaseYCSBB, PhaseYCSBC, PhaseYCSBD, PhaseYCSBE, PhaseYCSBF},
}

// resolvePhases turns names of phases or aliases (case-insensitive) into
// the set of phases they select, always with ping.
func resolvePhases(names []string) (map[string]bool, error) {
	sel := map[string]bool{PhasePing: true}
	for _, n := range names {
		n = strings.TrimSpace(n)
		found := false
		for a, group := range PhaseAliases {
			if strings.EqualFold(a, n) {
				for _, p := range group {
					sel[p] = true
				}
				found = true
			}
		}
		for _, p := range AllPhases {
			if strings.EqualFold(p, n) {
				sel[p], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: unknown phase %q (want some of %s, or %s)", ErrOptions, n,
				strings.Join(AllPhases, ","), strings.Join(slices.Sorted(maps.Keys(PhaseAliases)), ","))
		}
	}
	return sel, nil
}

// isFullScan reports whether phase is a full-table scan phase (scan,
// scan-N), whose figure is MB/s.
func isFullScan(phase string) bool {
	return phase == PhaseScan || strings.HasPrefix(phase, PhaseScan+"-")
}

// Errors of the package.
var (
	ErrOptions  = errors.New("bench: bad options")
	ErrMismatch = errors.New("bench: read back the wrong data")
)

const (
	family    = "cf"
	qualifier = "v"
	keyLen    = 16
)

// Options configure a run.
type Options struct {
	// Client is the connected client (required): it creates, checkpoints
	// and drops the table, and with API native it makes the data calls.
	Client *client.Client
	// API is what the phases' data calls go through: APINative (the
	// default) or APIBigtable, the official Cloud Bigtable Go client
	// through the frontend at BigtableAddr.
	API          string
	BigtableAddr string
	// Credentials secure the run's own connections besides Client's (the
	// tservers' Status, the Bigtable client): tlsconf.Credentials of the
	// --tls-* files; nil is plaintext.
	Credentials credentials.TransportCredentials
	// Table is created by the run and dropped afterwards (default "bench").
	// An existing table of that name is dropped first.
	Table string
	// Tablets is the number of tablets the table is pre-split into
	// (default 8).
	Tablets int
	// Duration of each timed phase (default 10 s).
	Duration time.Duration
	// Ops, if > 0, also ends each timed phase after this many calls.
	Ops int64
	// Concurrency is the number of client goroutines (default 64).
	Concurrency int
	// ValueSize is the size of each value (default 1000).
	ValueSize int
	// Keys is the keyspace: rows 0 … Keys-1 (default 500 000).
	Keys int
	// BatchSize is the rows per ApplyBulk (default 100).
	BatchSize int
	// Scanners is the number of concurrent scanners of the second scan
	// (default 4; 1 skips it).
	Scanners int
	// Counters is the number of rows the increment and checkandmutate
	// phases work on (default 1024, at most Keys).
	Counters int
	// CacheBytes is the tserver's block cache capacity; it sizes the hot
	// range of get-warm (default 256 MiB, the tserver's default).
	CacheBytes int64
	// Phases selects phases of AllPhases or groups of PhaseAliases,
	// case-insensitive (default all); ping always runs. Reads need the
	// data: when a read, scan or YCSB phase is selected, the keyspace is
	// filled even if bulk is not.
	Phases []string
	// Distribution is the key choice of the YCSB workloads A, B, C, E and
	// F: DistZipfian (the default, YCSB's scrambled Zipfian) or
	// DistUniform. Workload D always reads the latest rows (Zipfian over
	// recency), as YCSB defines it.
	Distribution string

	selected map[string]bool // the resolved Phases
	// Masters are the masters' addresses; with Procs nil, the processes
	// of this machine listening on them, on the live tservers' addresses
	// and on BigtableAddr are the ones whose CPU time the run measures
	// besides its own.
	Masters []string
	// Procs, if not nil, are the server processes whose CPU time the run
	// measures (`bench --pids`), instead of those found by address.
	Procs []Proc
	// FloorProbe is the length of the ping probe before each phase after
	// ping, whose pings/s are the floor of that phase's ratio (default
	// Duration/5, at most 2 s; negative: no probes, every phase's ratio is
	// to the ping phase at the start of the run).
	FloorProbe time.Duration
	// Run is the run's index, recorded in the report (0: not given).
	Run int
	// Seed seeds the key choices (default: the time).
	Seed uint64
	// Out gets one progress line per step (nil: none).
	Out io.Writer
	// Progress gets a rate line every ProgressEvery (default 1 s) while a
	// phase runs (nil: none). With ProgressTTY each line overwrites the
	// previous one (a carriage return and an erase, for a terminal);
	// otherwise each is a line of its own.
	Progress      io.Writer
	ProgressTTY   bool
	ProgressEvery time.Duration
}

func (o *Options) defaults() error {
	if o.Client == nil {
		return fmt.Errorf("%w: Client is required", ErrOptions)
	}
	switch o.API {
	case "":
		o.API = APINative
	case APINative:
	case APIBigtable:
		if o.BigtableAddr == "" {
			return fmt.Errorf("%w: API %s needs BigtableAddr, the frontend's address", ErrOptions, APIBigtable)
		}
	default:
		return fmt.Errorf("%w: unknown API %q (want %s or %s)", ErrOptions, o.API, APINative, APIBigtable)
	}
	if o.Credentials == nil {
		o.Credentials = tlsconf.Credentials(nil)
	}
	if o.Table == "" {
		o.Table = "bench"
	}
	if o.Tablets <= 0 {
		o.Tablets = 8
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.ValueSize <= 0 {
		o.ValueSize = 1000
	}
	if o.Keys <= 0 {
		o.Keys = 500_000
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	if o.Scanners <= 0 {
		o.Scanners = 4
	}
	if o.Counters <= 0 {
		o.Counters = 1024
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 256 << 20
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if len(o.Phases) == 0 {
		o.Phases = AllPhases
	}
	sel, err := resolvePhases(o.Phases)
	if err != nil {
		return err
	}
	o.selected = sel
	switch o.Distribution {
	case "":
		o.Distribution = DistZipfian
	case DistZipfian, DistUniform:
	default:
		return fmt.Errorf("%w: unknown distribution %q (want %s or %s)", ErrOptions, o.Distribution, DistUniform, DistZipfian)
	}
	switch {
	case o.FloorProbe == 0:
		o.FloorProbe = min(o.Duration/5, 2*time.Second)
	case o.FloorProbe < 0:
		o.FloorProbe = 0
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if o.Tablets > o.Keys {
		return fmt.Errorf("%w: %d tablets for %d keys", ErrOptions, o.Tablets, o.Keys)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (o *Options) has(phase string) bool { return o.selected[phase] }

// hasAny reports whether any of phases is selected.
func (o *Options) hasAny(phases ...string) bool { return slices.ContainsFunc(phases, o.has) }

// Key is row i's key: i as 16 decimal digits, so keys sort as their
// indexes and a range of indexes is a range of rows.
func Key(i int) string {
	var b [keyLen]byte
	for j := keyLen - 1; j >= 0; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
	return string(b[:])
}

// Run runs the selected phases once on a fresh table and returns their
// results. It drops the table when it is done.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &runner{opts: opts, rep: &Report{API: opts.API, Run: opts.Run, Seed: opts.Seed, Keys: opts.Keys, ValueSize: opts.ValueSize,
		Concurrency: opts.Concurrency, Tablets: opts.Tablets, CacheBytes: opts.CacheBytes, Distribution: opts.Distribution,
		Cores: runtime.NumCPU()}}
	r.values = newValues(opts.Seed, opts.ValueSize)
	r.logf("api %s; seed %d; %d keys of %d-byte values, %d tablets, %d goroutines, %v per phase",
		opts.API, opts.Seed, opts.Keys, opts.ValueSize, opts.Tablets, opts.Concurrency, opts.Duration)
	if err := r.createTable(ctx); err != nil {
		return nil, err
	}
	r.measuredProcs(ctx)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := opts.Client.DeleteTable(dctx, opts.Table); err != nil {
			r.logf("drop table %s: %v", opts.Table, err)
		}
	}()
	st, err := r.openStore(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	r.st = st
	if err := r.run(ctx); err != nil {
		return r.rep, err
	}
	return r.rep, nil
}

type runner struct {
	opts   Options
	rep    *Report
	st     store
	values values      // the rows' values
	floor  float64     // the ping phase's calls/s
	ack    *ackCounter // rows the YCSB workloads inserted
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (r *runner) createTable(ctx context.Context) error {
	c := r.opts.Client
	tables, err := c.ListTables(ctx)
	if err != nil {
		return fmt.Errorf("bench: list tables: %w", err)
	}
	if contains(tables, r.opts.Table) {
		if err := c.DeleteTable(ctx, r.opts.Table); err != nil {
			return fmt.Errorf("bench: drop old table: %w", err)
		}
	}
	var splits []string
	for t := 1; t < r.opts.Tablets; t++ {
		splits = append(splits, Key(t*r.opts.Keys/r.opts.Tablets))
	}
	spec := client.TableSpec{Name: r.opts.Table, SplitKeys: splits,
		Families: []client.FamilySpec{{Name: family, MaxVersions: 1}}}
	if err := c.CreateTable(ctx, spec); err != nil {
		return fmt.Errorf("bench: create table: %w", err)
	}
	return waitServing(ctx, c, r.opts.Table)
}

// measuredProcs sets the server processes whose CPU time the run
// measures besides its own: Options.Procs, or those of this machine that
// listen on the addresses of the live tservers, the masters and the
// frontend. A server found in this process (an in-process cluster) is
// left out: its CPU time is in the client's.
func (r *runner) measuredProcs(ctx context.Context) {
	o := &r.opts
	procs, missing := o.Procs, []string(nil)
	if procs == nil {
		var tservers []string
		list, err := o.Client.TServers(ctx)
		if err != nil {
			missing = append(missing, fmt.Sprintf("tservers: %v", err))
		}
		for _, s := range list {
			if s.Live {
				tservers = append(tservers, s.Address)
			}
		}
		servers := append(numbered(RoleTServer, tservers), numbered(RoleMaster, o.Masters)...)
		if o.BigtableAddr != "" {
			servers = append(servers, server{RoleFrontend, o.BigtableAddr})
		}
		found, notFound := findProcs(ctx, servers)
		missing = append(missing, notFound...)
		for _, p := range found {
			if p.Pid == os.Getpid() {
				missing = append(missing, fmt.Sprintf("%s %s: in this process, its CPU time is the client's", p.Role, p.Addr))
				continue
			}
			procs = append(procs, p)
		}
	}
	r.rep.Procs, r.rep.Unmeasured = procs, missing
	names := []string{fmt.Sprintf("%s (pid %d)", RoleClient, os.Getpid())}
	for _, p := range procs {
		names = append(names, fmt.Sprintf("%s (pid %d)", p.Role, p.Pid))
	}
	r.logf("cpu time of: %s", strings.Join(names, ", "))
	for _, m := range missing {
		r.logf("cpu time not measured: %s", m)
	}
}

// waitServing polls until every tablet of table is served.
func waitServing(ctx context.Context, c *client.Client, table string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		tablets, err := c.Tablets(ctx, table)
		ok := err == nil && len(tablets) > 0
		for _, tb := range tablets {
			ok = ok && tb.State == "serving"
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: table %s not serving: %w (last error: %v)", table, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// step is one phase of a run and the function that runs it.
type step struct {
	phase string
	run   func(context.Context) (Result, error)
}

func (r *runner) run(ctx context.Context) error {
	o := &r.opts
	if err := r.record(r.ping(ctx)); err != nil {
		return err
	}
	if err := r.steps(ctx, []step{
		{PhaseSequentialWrite, r.sequentialWrite},
		{PhaseRandomWrite, r.randomWrite},
	}); err != nil {
		return err
	}
	reads := o.hasAny(PhaseSequentialRead, PhaseRandomReadWarm, PhaseRandomRead, PhaseScan,
		PhaseScanRange10, PhaseScanRange100, PhaseScanRange1000,
		PhaseYCSBA, PhaseYCSBB, PhaseYCSBC, PhaseYCSBD, PhaseYCSBE, PhaseYCSBF)
	if o.has(PhaseBulk) {
		if err := r.steps(ctx, []step{{PhaseBulk, func(ctx context.Context) (Result, error) { return r.bulk(ctx, true) }}}); err != nil {
			return err
		}
	} else if reads {
		if _, err := r.bulk(ctx, false); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if reads {
		if err := r.reads(ctx); err != nil {
			return err
		}
	}
	return r.steps(ctx, []step{
		{PhaseIncrement, r.increment},
		{PhaseCheckAndMutate, r.checkAndMutate},
	})
}

// reads checkpoints and runs the selected read, scan and YCSB phases.
func (r *runner) reads(ctx context.Context) error {
	o := &r.opts
	if err := r.checkpoint(ctx); err != nil {
		return err
	}
	steps := []step{
		{PhaseSequentialRead, r.sequentialRead},
		{PhaseRandomReadWarm, r.randomReadWarm},
		{PhaseRandomRead, r.randomRead},
		{PhaseScan, func(ctx context.Context) (Result, error) { return r.scan(ctx, 1) }},
	}
	if o.Scanners > 1 {
		steps = append(steps, step{PhaseScan, func(ctx context.Context) (Result, error) { return r.scan(ctx, o.Scanners) }})
	}
	for _, n := range []int{10, 100, 1000} {
		steps = append(steps, step{fmt.Sprintf("%s%d", PhaseScan+"Range", n), func(ctx context.Context) (Result, error) { return r.scanRange(ctx, n) }})
	}
	for _, w := range ycsbWorkloads {
		steps = append(steps, step{w.phase, func(ctx context.Context) (Result, error) { return r.ycsb(ctx, w) }})
	}
	return r.steps(ctx, steps)
}

// steps runs the selected ones of steps, each after a floor probe.
func (r *runner) steps(ctx context.Context, steps []step) error {
	for _, s := range steps {
		if !r.opts.has(s.phase) {
			continue
		}
		if err := r.probeFloor(ctx); err != nil {
			return err
		}
		if err := r.record(s.run(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// probeFloor measures the floor again, for FloorProbe, just before a
// phase, so that the phase's ratio is to the floor of the same moment's
// machine load.
func (r *runner) probeFloor(ctx context.Context) error {
	if r.opts.FloorProbe <= 0 {
		return nil
	}
	res, err := r.drive(ctx, "ping (floor)", r.opts.Concurrency, r.opts.FloorProbe, r.opts.Ops, r.pingOp)
	if err != nil {
		return fmt.Errorf("bench: floor probe: %w", err)
	}
	r.floor = res.CallsPerSec()
	return nil
}

func (r *runner) record(res Result, err error) error {
	if err != nil {
		return fmt.Errorf("bench: phase %s: %w", res.Phase, err)
	}
	res.Load = loadAvg()
	if res.Phase == PhasePing {
		r.floor = res.CallsPerSec()
	}
	if r.floor > 0 {
		res.Floor = r.floor
		res.FloorRatio = res.RowsPerSec() / r.floor
	}
	r.rep.Results = append(r.rep.Results, res)
	r.logf("%s", res.String())
	return nil
}

// checkpoint flushes every write buffer to TSFiles and records the data's
// size on disk.
func (r *runner) checkpoint(ctx context.Context) error {
	start := time.Now()
	res, err := r.opts.Client.CheckpointAll(ctx)
	if err != nil {
		return fmt.Errorf("bench: checkpoint: %w", err)
	}
	flushed, bytes := 0, int64(0)
	for _, x := range res {
		flushed += x.TabletsFlushed
		bytes += x.BytesFlushed
	}
	st, err := tserverStatus(ctx, r.opts.Client, r.opts.Credentials, r.opts.Table)
	if err != nil {
		r.logf("tserver status: %v", err)
	}
	r.rep.TSFileBytes, r.rep.TSFiles = st.tsfileBytes, st.tsfiles
	r.logf("checkpoint: flushed %d tablets (%.1f MB) in %v; table now %.1f MB in %d TSFiles, %.1f MB in write buffers",
		flushed, mb(bytes), time.Since(start).Round(time.Millisecond), mb(st.tsfileBytes), st.tsfiles, mb(st.memBytes))
	return nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }
