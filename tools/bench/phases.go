package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// opKind is the kind of operation a call of a mixed phase made (a YCSB
// workload's read, update, …); single-kind phases leave it kindCall.
type opKind uint8

const (
	kindCall opKind = iota
	kindRead
	kindUpdate
	kindInsert
	kindScan
	kindReadModifyWrite
	nKinds
)

var kindNames = [nKinds]string{"call", "read", "update", "insert", "scan", "readModifyWrite"}

// worker is one client goroutine's state.
type worker struct {
	id   int
	rng  *rand.Rand
	kind opKind // set by a mixed phase's op for the call it made
	lat  [nKinds][]time.Duration
	zipf zipfian // the worker's copy of a YCSB phase's key generator
}

// opFunc runs call number i of a phase and returns how many rows it
// handled and how many bytes it moved.
type opFunc func(ctx context.Context, w *worker, i int64) (rows, bytes int64, err error)

// drive runs op on conc goroutines until d has passed or maxOps calls
// were started (maxOps <= 0: no limit), each goroutine at least once,
// then waits for the calls in flight. It stops at the first error. While
// it runs, a rate line goes to Options.Progress every ProgressEvery. The CPU time of the client and
// of Report.Procs is read just before the first call starts and just
// after the last one ends, so the result's CPU figures cover exactly its
// Elapsed.
func (r *runner) drive(ctx context.Context, phase string, conc int, d time.Duration, maxOps int64, op opFunc) (Result, error) {
	return r.driveInit(ctx, phase, conc, d, maxOps, nil, op)
}

// driveInit is drive with init run on each worker before it starts.
func (r *runner) driveInit(ctx context.Context, phase string, conc int, d time.Duration, maxOps int64, init func(*worker), op opFunc) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next        atomic.Int64
		rows, bytes atomic.Int64
		wg          sync.WaitGroup
		errOnce     sync.Once
		firstErr    error
	)
	workers := make([]*worker, conc)
	for w := range workers {
		workers[w] = &worker{id: w, rng: rand.New(rand.NewPCG(r.opts.Seed, uint64(w)+1))}
		if init != nil {
			init(workers[w])
		}
	}
	cpu0 := sampleCPU(r.rep.Procs)
	start := time.Now()
	stop := start.Add(d)
	stopProgress := r.progress(phase, start, &rows)
	for _, w := range workers {
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			// Every worker makes at least one call, so that a phase (a
			// floor probe above all, a fifth of a phase) measures
			// something even when the machine is too loaded to start
			// the workers before the duration ran out.
			for first := true; ctx.Err() == nil && (first || time.Now().Before(stop)); first = false {
				i := next.Add(1) - 1
				if maxOps > 0 && i >= maxOps {
					return
				}
				t0 := time.Now()
				n, b, err := op(ctx, w, i)
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				w.lat[w.kind] = append(w.lat[w.kind], time.Since(t0))
				w.kind = kindCall
				rows.Add(n)
				bytes.Add(b)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := sampleCPU(r.rep.Procs)
	stopProgress()
	res := Result{Phase: phase, Elapsed: elapsed, Rows: rows.Load(), Bytes: bytes.Load()}
	cpuOver(&res, r.rep.Procs, cpu0, cpu1)
	var all []time.Duration
	for k := range nKinds {
		var lat []time.Duration
		for _, w := range workers {
			lat = append(lat, w.lat[k]...)
		}
		all = append(all, lat...)
		if k != kindCall && len(lat) > 0 {
			res.Ops = append(res.Ops, OpStats{Kind: kindNames[k], Count: int64(len(lat)), Latency: latencyOf(lat)})
		}
	}
	res.Calls = int64(len(all))
	res.Latency = latencyOf(all)
	return res, firstErr
}

// progress prints phase's rate every ProgressEvery until the function it
// returns is called.
func (r *runner) progress(phase string, start time.Time, rows *atomic.Int64) (stop func()) {
	w := r.opts.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(r.opts.ProgressEvery)
		defer t.Stop()
		last, lastT := int64(0), start
		for {
			select {
			case <-done:
				if r.opts.ProgressTTY {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case now := <-t.C:
				n := rows.Load()
				line := fmt.Sprintf("%s  %-15s %6.1fs %10.0f rows/s (%9.0f rows/s so far, %d rows)", now.Format("15:04:05"), phase,
					now.Sub(start).Seconds(), perSec(float64(n-last), now.Sub(lastT)), perSec(float64(n), now.Sub(start)), n)
				last, lastT = n, now
				if r.opts.ProgressTTY {
					fmt.Fprint(w, "\r\033[K"+line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (r *runner) timed(phase string, ctx context.Context, op opFunc) (Result, error) {
	return r.drive(ctx, phase, r.opts.Concurrency, r.opts.Duration, r.opts.Ops, op)
}

// ping: the floor, a no-op RPC to the tserver of a random row (PingAndWarm
// through the Bigtable API) per call.
func (r *runner) ping(ctx context.Context) (Result, error) {
	op := r.pingOp
	// Untimed first: the connections and the location cache fill, so the
	// floor is not the cost of a cold start.
	if _, err := r.drive(ctx, "ping warm-up", r.opts.Concurrency, r.opts.Duration, 16*int64(r.opts.Concurrency), op); err != nil {
		return Result{Phase: PhasePing}, fmt.Errorf("warm-up: %w", err)
	}
	r.logf("ping: no-op RPCs, %d goroutines", r.opts.Concurrency)
	return r.timed(PhasePing, ctx, op)
}

// pingOp is one no-op RPC to the tserver of a random row.
func (r *runner) pingOp(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
	k := Key(w.rng.IntN(r.opts.Keys))
	if err := r.st.Ping(ctx, k); err != nil {
		return 0, 0, fmt.Errorf("ping %s: %w", k, err)
	}
	return 1, 0, nil
}

// putOne writes row i's value to row i.
func (r *runner) putOne(ctx context.Context, i int) (int64, int64, error) {
	k, v := Key(i), r.values.of(i)
	if err := r.st.Put(ctx, k, v); err != nil {
		return 0, 0, fmt.Errorf("put %s: %w", k, err)
	}
	return 1, int64(len(k) + len(qualifier) + len(v)), nil
}

// sequentialWrite: durable Puts of the rows in key order, call i writing
// row i (mod Keys), so concurrent calls go to neighbouring rows of one
// tablet.
func (r *runner) sequentialWrite(ctx context.Context) (Result, error) {
	r.logf("%s: rows in order, %d goroutines", PhaseSequentialWrite, r.opts.Concurrency)
	return r.timed(PhaseSequentialWrite, ctx, func(ctx context.Context, _ *worker, i int64) (int64, int64, error) {
		return r.putOne(ctx, int(i%int64(r.opts.Keys)))
	})
}

// randomWrite: durable Puts of random rows.
func (r *runner) randomWrite(ctx context.Context) (Result, error) {
	r.logf("%s: random rows, %d goroutines", PhaseRandomWrite, r.opts.Concurrency)
	return r.timed(PhaseRandomWrite, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		return r.putOne(ctx, w.rng.IntN(r.opts.Keys))
	})
}

// permute maps 0 … n-1 onto itself: i·p mod n with p a prime that does
// not divide n, so consecutive indexes land far apart in the keyspace.
func permute(i, n int) int {
	p := 1_000_003
	if n%p == 0 {
		p = 999_983
	}
	return int(uint64(i) * uint64(p) % uint64(n))
}

// bulk: ApplyBulk of BatchSize rows, batch b holding the permuted indexes
// b·BatchSize … (b+1)·BatchSize-1 (mod Keys). The timed part is the
// result; then, untimed, the batches continue until the whole keyspace
// has been written once.
func (r *runner) bulk(ctx context.Context, timed bool) (Result, error) {
	o := &r.opts
	batches := int64((o.Keys + o.BatchSize - 1) / o.BatchSize)
	var cursor atomic.Int64 // next batch, across the timed and the fill part
	op := func(ctx context.Context, _ *worker, _ int64) (int64, int64, error) {
		b := cursor.Add(1) - 1
		rows, vals := make([]string, o.BatchSize), make([][]byte, o.BatchSize)
		var n int64
		for j := range rows {
			i := permute(int((b*int64(o.BatchSize)+int64(j))%int64(o.Keys)), o.Keys)
			rows[j], vals[j] = Key(i), r.values.of(i)
			n += int64(len(rows[j]) + len(qualifier) + len(vals[j]))
		}
		if err := r.st.Bulk(ctx, rows, time.Now().UnixMicro(), vals); err != nil {
			return 0, 0, fmt.Errorf("apply bulk: %w", err)
		}
		return int64(len(rows)), n, nil
	}
	var res Result
	if timed {
		r.logf("bulk: ApplyBulk of %d random rows, %d goroutines", o.BatchSize, o.Concurrency)
		var err error
		if res, err = r.timed(PhaseBulk, ctx, op); err != nil {
			return res, err
		}
	}
	if left := batches - cursor.Load(); left > 0 {
		start := time.Now()
		if _, err := r.drive(ctx, "fill", o.Concurrency, 24*time.Hour, left, op); err != nil {
			return res, fmt.Errorf("fill: %w", err)
		}
		r.logf("fill: wrote the rest of the %d rows in %v", o.Keys, time.Since(start).Round(time.Millisecond))
	}
	res.Phase = PhaseBulk
	return res, nil
}

// getOne reads row i, which must hold row i's value: one cell, of
// ValueSize bytes, that are the bytes of row i's value.
func (r *runner) getOne(ctx context.Context, i int) (int64, error) {
	k := Key(i)
	cells, v, n, err := r.st.Get(ctx, k)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", k, err)
	}
	if cells != 1 || len(v) != r.opts.ValueSize {
		return 0, fmt.Errorf("%w: get %s: %d cells (the first of %d bytes), want 1 of %d bytes", ErrMismatch, k, cells, len(v), r.opts.ValueSize)
	}
	if !bytes.Equal(v, r.values.of(i)) {
		return 0, fmt.Errorf("%w: get %s: not the row's value (%x…)", ErrMismatch, k, v[:min(len(v), 8)])
	}
	return n, nil
}

// hotRows is the size of randomReadWarm's hot range: rows whose TSFile bytes
// take at most half the block cache (and at most the keyspace).
func (r *runner) hotRows() int {
	perRow := int64(r.opts.ValueSize + 64) // value, key, qualifier, timestamp, index entry
	if r.rep.TSFileBytes > 0 {
		perRow = max(perRow, r.rep.TSFileBytes/int64(r.opts.Keys))
	}
	return int(min(int64(r.opts.Keys), r.opts.CacheBytes/2/perRow))
}

// sequentialRead: Gets of the rows in key order, call i reading row i
// (mod Keys).
func (r *runner) sequentialRead(ctx context.Context) (Result, error) {
	r.logf("%s: rows in order, %d goroutines", PhaseSequentialRead, r.opts.Concurrency)
	return r.timed(PhaseSequentialRead, ctx, func(ctx context.Context, _ *worker, i int64) (int64, int64, error) {
		b, err := r.getOne(ctx, int(i%int64(r.opts.Keys)))
		return 1, b, err
	})
}

// randomReadWarm: one pass over the hot range fills the block cache, then
// random Gets within it.
func (r *runner) randomReadWarm(ctx context.Context) (Result, error) {
	hot := r.hotRows()
	r.rep.HotRows = hot
	start := time.Now()
	if _, err := r.drive(ctx, "warm-up", r.opts.Concurrency, 24*time.Hour, int64(hot), func(ctx context.Context, _ *worker, i int64) (int64, int64, error) {
		b, err := r.getOne(ctx, int(i))
		return 1, b, err
	}); err != nil {
		return Result{Phase: PhaseRandomReadWarm}, fmt.Errorf("warm-up: %w", err)
	}
	r.logf("%s: read the hot range of %d rows (%.0f MB of a %.0f MB cache) in %v", PhaseRandomReadWarm, hot,
		mb(int64(hot)*int64(r.opts.ValueSize+keyLen)), mb(r.opts.CacheBytes), time.Since(start).Round(time.Millisecond))
	return r.timed(PhaseRandomReadWarm, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		b, err := r.getOne(ctx, w.rng.IntN(hot))
		return 1, b, err
	})
}

// randomRead: random Gets over the whole keyspace.
func (r *runner) randomRead(ctx context.Context) (Result, error) {
	if r.rep.TSFileBytes > 0 {
		r.logf("%s: %.0f MB of TSFiles, %.0f MB cache: at most %.0f%% of Gets can hit the block cache", PhaseRandomRead,
			mb(r.rep.TSFileBytes), mb(r.opts.CacheBytes), min(100, 100*float64(r.opts.CacheBytes)/float64(r.rep.TSFileBytes)))
	}
	return r.timed(PhaseRandomRead, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		b, err := r.getOne(ctx, w.rng.IntN(r.opts.Keys))
		return 1, b, err
	})
}

// scan: n scanners over disjoint ranges that together cover the table,
// each scanning its range again until the phase time is up. A full pass
// must return every row once, in order.
func (r *runner) scan(ctx context.Context, n int) (Result, error) {
	phase := PhaseScan
	if n > 1 {
		phase = fmt.Sprintf("%s-%d", PhaseScan, n)
	}
	r.logf("%s: %d scanner(s) over disjoint ranges", phase, n)
	d := r.opts.Duration
	return r.drive(ctx, phase, n, d, 0, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		lo, hi := w.id*r.opts.Keys/n, (w.id+1)*r.opts.Keys/n
		start, end := Key(lo), Key(hi)
		if w.id == 0 {
			start = ""
		}
		if w.id == n-1 {
			end = ""
		}
		var rows, bytes int64
		want := lo
		var bad error
		err := r.st.Scan(ctx, start, end, func(key string, cells int, n int64) bool {
			if key != Key(want) || cells != 1 {
				bad = fmt.Errorf("%w: scan: row %q with %d cells, want %q", ErrMismatch, key, cells, Key(want))
				return false
			}
			want++
			rows++
			bytes += n
			return true
		})
		if err == nil {
			err = bad
		}
		if err == nil && want != hi {
			err = fmt.Errorf("%w: scan of [%s, %s) ended at row %d, want %d", ErrMismatch, start, end, want, hi)
		}
		return rows, bytes, err
	})
}

// scanRange: scans of n rows from a random row (PerformanceEvaluation's
// scanRange10/100/1000); each must return exactly those rows, in order.
func (r *runner) scanRange(ctx context.Context, n int) (Result, error) {
	phase := fmt.Sprintf("%sRange%d", PhaseScan, n)
	n = min(n, r.opts.Keys)
	r.logf("%s: scans of %d rows from a random row, %d goroutines", phase, n, r.opts.Concurrency)
	return r.timed(phase, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		lo := w.rng.IntN(r.opts.Keys - n + 1)
		return r.scanExact(ctx, lo, lo+n)
	})
}

// scanExact scans rows [lo, hi), which must all be there, and checks it
// got exactly them.
func (r *runner) scanExact(ctx context.Context, lo, hi int) (int64, int64, error) {
	start, end := Key(lo), Key(hi)
	want := lo
	var bytes int64
	var bad error
	err := r.st.Scan(ctx, start, end, func(key string, cells int, n int64) bool {
		if want >= hi || key != Key(want) || cells != 1 {
			bad = fmt.Errorf("%w: scan of [%s, %s): row %q with %d cells, want %q", ErrMismatch, start, end, key, cells, Key(want))
			return false
		}
		want++
		bytes += n
		return true
	})
	if err == nil {
		err = bad
	}
	if err == nil && want != hi {
		err = fmt.Errorf("%w: scan of [%s, %s) ended at row %d, want %d", ErrMismatch, start, end, want, hi)
	}
	return int64(want - lo), bytes, err
}
