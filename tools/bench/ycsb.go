package bench

import (
	"context"
	"fmt"
)

// ycsbMaxScan is the longest scan of workload E (YCSB's maxscanlength of
// that workload); lengths are uniform in [1, ycsbMaxScan].
const ycsbMaxScan = 100

// ycsbWorkload is one of YCSB's core workloads: the proportions of its
// operation kinds (summing to 1) and whether its reads prefer the latest
// rows.
type ycsbWorkload struct {
	phase                           string
	read, update, insert, scan, rmw float64
	latest                          bool
}

// ycsbWorkloads are YCSB's core workloads A–F, over the loaded keyspace
// (one record per row, one field cf:v of ValueSize bytes): an update
// writes the record's field, an insert writes a new row after the last,
// a read-modify-write reads a record and then writes it.
var ycsbWorkloads = []ycsbWorkload{
	{phase: PhaseYCSBA, read: 0.5, update: 0.5},                 // update heavy
	{phase: PhaseYCSBB, read: 0.95, update: 0.05},               // read mostly
	{phase: PhaseYCSBC, read: 1},                                // read only
	{phase: PhaseYCSBD, read: 0.95, insert: 0.05, latest: true}, // read latest
	{phase: PhaseYCSBE, scan: 0.95, insert: 0.05},               // short ranges
	{phase: PhaseYCSBF, read: 0.5, rmw: 0.5},                    // read-modify-write
}

// pick chooses an operation kind for u uniform in [0, 1).
func (w ycsbWorkload) pick(u float64) opKind {
	for _, c := range []struct {
		p float64
		k opKind
	}{{w.read, kindRead}, {w.update, kindUpdate}, {w.insert, kindInsert}, {w.scan, kindScan}, {w.rmw, kindReadModifyWrite}} {
		if u < c.p {
			return c.k
		}
		u -= c.p
	}
	switch { // rounding: the last kind with a share
	case w.rmw > 0:
		return kindReadModifyWrite
	case w.scan > 0:
		return kindScan
	case w.insert > 0:
		return kindInsert
	case w.update > 0:
		return kindUpdate
	}
	return kindRead
}

// ycsbKey chooses a row among the limit rows known to exist (the loaded
// keyspace and the acknowledged inserts): the latest rows first for
// workload D, otherwise by Options.Distribution (scrambled Zipfian or
// uniform).
func (r *runner) ycsbKey(w *worker, wl ycsbWorkload, limit int64) int64 {
	switch {
	case wl.latest:
		w.zipf.grow(limit)
		return limit - 1 - w.zipf.next(w.rng.Float64())
	case r.opts.Distribution == DistUniform:
		return w.rng.Int64N(limit)
	}
	w.zipf.grow(limit)
	return scramble(w.zipf.next(w.rng.Float64()), limit)
}

// ycsb runs one YCSB workload. Reads, updates and scans choose among the
// rows that exist; inserts append rows after them, numbered by the run's
// acknowledged-insert counter (shared by the workloads of a run, so D's
// rows are there for E). Every read and scan is checked as in the other
// phases; a scan must return exactly the rows of its range. Rows count
// operations (a scan is one), so rows/s is YCSB's operations/s.
func (r *runner) ycsb(ctx context.Context, wl ycsbWorkload) (Result, error) {
	if r.ack == nil {
		r.ack = newAckCounter(int64(r.opts.Keys))
	}
	dist := r.opts.Distribution
	if wl.latest {
		dist = "latest"
	}
	r.logf("%s: YCSB read %.0f%% update %.0f%% insert %.0f%% scan %.0f%% read-modify-write %.0f%%, %s keys, %d goroutines",
		wl.phase, 100*wl.read, 100*wl.update, 100*wl.insert, 100*wl.scan, 100*wl.rmw, dist, r.opts.Concurrency)
	base := newZipfian(r.ack.limit.Load(), zipfTheta)
	init := func(w *worker) { w.zipf = base }
	op := func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		kind := wl.pick(w.rng.Float64())
		w.kind = kind
		switch kind {
		case kindInsert:
			i := r.ack.take()
			n, b, err := r.putOne(ctx, int(i))
			if err != nil {
				return 0, 0, fmt.Errorf("insert: %w", err)
			}
			r.ack.ack(i)
			return n, b, nil
		case kindScan:
			limit := r.ack.limit.Load()
			lo := r.ycsbKey(w, wl, limit)
			hi := min(lo+1+w.rng.Int64N(ycsbMaxScan), limit)
			_, b, err := r.scanExact(ctx, int(lo), int(hi))
			return 1, b, err // one operation, as YCSB counts
		}
		k := int(r.ycsbKey(w, wl, r.ack.limit.Load()))
		switch kind {
		case kindUpdate:
			return r.putOne(ctx, k)
		case kindReadModifyWrite:
			b, err := r.getOne(ctx, k)
			if err != nil {
				return 0, 0, err
			}
			_, pb, err := r.putOne(ctx, k)
			return 1, b + pb, err
		}
		b, err := r.getOne(ctx, k)
		return 1, b, err
	}
	return r.driveInit(ctx, wl.phase, r.opts.Concurrency, r.opts.Duration, r.opts.Ops, init, op)
}
