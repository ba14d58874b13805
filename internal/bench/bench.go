package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"bighive/client"
)

// Phase names, in the order a run executes them.
const (
	PhasePut     = "put"
	PhaseBulk    = "bulk"
	PhaseGetWarm = "get-warm"
	PhaseGetCold = "get-cold"
	PhaseScan    = "scan"
	// PhaseIncrement and PhaseCheckAndMutate run last: ReadModifyWrite
	// increments and compare-and-set conditional mutations of
	// Options.Counters rows.
	PhaseIncrement      = "increment"
	PhaseCheckAndMutate = "checkandmutate"
)

// AllPhases are the phase groups Options.Phases may name; "get" selects
// both Get phases.
var AllPhases = []string{PhasePut, PhaseBulk, "get", PhaseScan, PhaseIncrement, PhaseCheckAndMutate}

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
	// Phases selects phase groups of AllPhases (default all). Reads need
	// the data: when get or scan is selected, the keyspace is filled even
	// if bulk is not.
	Phases []string
	// Seed seeds the key choices (default: the time).
	Seed uint64
	// Out gets one progress line per step (nil: none).
	Out io.Writer
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
	for _, p := range o.Phases {
		if !contains(AllPhases, p) {
			return fmt.Errorf("%w: unknown phase %q (want %s)", ErrOptions, p, strings.Join(AllPhases, ","))
		}
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

func (o *Options) has(phase string) bool { return contains(o.Phases, phase) }

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
	r := &runner{opts: opts, rep: &Report{API: opts.API, Seed: opts.Seed, Keys: opts.Keys, ValueSize: opts.ValueSize,
		Concurrency: opts.Concurrency, Tablets: opts.Tablets, CacheBytes: opts.CacheBytes}}
	r.value = make([]byte, opts.ValueSize)
	rng := rand.New(rand.NewPCG(opts.Seed, 0))
	for i := range r.value {
		r.value[i] = byte(rng.Uint32())
	}
	r.logf("api %s; seed %d; %d keys of %d-byte values, %d tablets, %d goroutines, %v per phase",
		opts.API, opts.Seed, opts.Keys, opts.ValueSize, opts.Tablets, opts.Concurrency, opts.Duration)
	if err := r.createTable(ctx); err != nil {
		return nil, err
	}
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
	opts  Options
	rep   *Report
	st    store
	value []byte
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

func (r *runner) run(ctx context.Context) error {
	o := &r.opts
	if o.has(PhasePut) {
		if err := r.record(r.put(ctx)); err != nil {
			return err
		}
	}
	reads := o.has("get") || o.has(PhaseScan)
	if o.has(PhaseBulk) || reads {
		res, err := r.bulk(ctx, o.has(PhaseBulk))
		if o.has(PhaseBulk) {
			err = r.record(res, err)
		}
		if err != nil {
			return err
		}
	}
	if reads {
		if err := r.reads(ctx); err != nil {
			return err
		}
	}
	if o.has(PhaseIncrement) {
		if err := r.record(r.increment(ctx)); err != nil {
			return err
		}
	}
	if o.has(PhaseCheckAndMutate) {
		if err := r.record(r.checkAndMutate(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// reads checkpoints and runs the selected read phases.
func (r *runner) reads(ctx context.Context) error {
	o := &r.opts
	if err := r.checkpoint(ctx); err != nil {
		return err
	}
	if o.has("get") {
		if err := r.record(r.getWarm(ctx)); err != nil {
			return err
		}
		if err := r.record(r.getCold(ctx)); err != nil {
			return err
		}
	}
	if o.has(PhaseScan) {
		if err := r.record(r.scan(ctx, 1)); err != nil {
			return err
		}
		if o.Scanners > 1 {
			if err := r.record(r.scan(ctx, o.Scanners)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *runner) record(res Result, err error) error {
	if err != nil {
		return fmt.Errorf("bench: phase %s: %w", res.Phase, err)
	}
	res.Load = loadAvg()
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
	st, err := tserverStatus(ctx, r.opts.Client, r.opts.Table)
	if err != nil {
		r.logf("tserver status: %v", err)
	}
	r.rep.TSFileBytes, r.rep.TSFiles = st.tsfileBytes, st.tsfiles
	r.logf("checkpoint: flushed %d tablets (%.1f MB) in %v; table now %.1f MB in %d TSFiles, %.1f MB in write buffers",
		flushed, mb(bytes), time.Since(start).Round(time.Millisecond), mb(st.tsfileBytes), st.tsfiles, mb(st.memBytes))
	return nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }
