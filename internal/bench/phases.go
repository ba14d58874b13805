package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// worker is one client goroutine's state.
type worker struct {
	id  int
	rng *rand.Rand
	lat []time.Duration
}

// opFunc runs call number i of a phase and returns how many rows it
// handled and how many bytes it moved.
type opFunc func(ctx context.Context, w *worker, i int64) (rows, bytes int64, err error)

// drive runs op on conc goroutines until d has passed or maxOps calls
// were started (maxOps <= 0: no limit), then waits for the calls in
// flight. It stops at the first error.
func (r *runner) drive(ctx context.Context, phase string, conc int, d time.Duration, maxOps int64, op opFunc) (Result, error) {
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
	start := time.Now()
	stop := start.Add(d)
	for w := range workers {
		workers[w] = &worker{id: w, rng: rand.New(rand.NewPCG(r.opts.Seed, uint64(w)+1))}
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(stop) {
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
				w.lat = append(w.lat, time.Since(t0))
				rows.Add(n)
				bytes.Add(b)
			}
		}(workers[w])
	}
	wg.Wait()
	res := Result{Phase: phase, Elapsed: time.Since(start), Rows: rows.Load(), Bytes: bytes.Load()}
	var lat []time.Duration
	for _, w := range workers {
		lat = append(lat, w.lat...)
	}
	res.Calls = int64(len(lat))
	res.setLatencies(lat)
	return res, firstErr
}

func (r *runner) timed(phase string, ctx context.Context, op opFunc) (Result, error) {
	return r.drive(ctx, phase, r.opts.Concurrency, r.opts.Duration, r.opts.Ops, op)
}

// put: durable Puts of random rows.
func (r *runner) put(ctx context.Context) (Result, error) {
	r.logf("put: random rows, %d goroutines", r.opts.Concurrency)
	return r.timed(PhasePut, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		k := Key(w.rng.IntN(r.opts.Keys))
		if err := r.st.Put(ctx, k, r.value); err != nil {
			return 0, 0, fmt.Errorf("put %s: %w", k, err)
		}
		return 1, int64(len(k) + len(qualifier) + len(r.value)), nil
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
		rows := make([]string, o.BatchSize)
		var n int64
		for j := range rows {
			rows[j] = Key(permute(int((b*int64(o.BatchSize)+int64(j))%int64(o.Keys)), o.Keys))
			n += int64(len(rows[j]) + len(qualifier) + len(r.value))
		}
		if err := r.st.Bulk(ctx, rows, time.Now().UnixMicro(), r.value); err != nil {
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

func (r *runner) getOne(ctx context.Context, k string) (int64, error) {
	cells, vlen, n, err := r.st.Get(ctx, k)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", k, err)
	}
	if cells != 1 || vlen != len(r.value) {
		return 0, fmt.Errorf("%w: get %s: %d cells, want 1 of %d bytes", ErrMismatch, k, cells, len(r.value))
	}
	return n, nil
}

// hotRows is the size of get-warm's hot range: rows whose TSFile bytes
// take at most half the block cache (and at most the keyspace).
func (r *runner) hotRows() int {
	perRow := int64(len(r.value) + 64) // value, key, qualifier, timestamp, index entry
	if r.rep.TSFileBytes > 0 {
		perRow = max(perRow, r.rep.TSFileBytes/int64(r.opts.Keys))
	}
	return int(min(int64(r.opts.Keys), r.opts.CacheBytes/2/perRow))
}

// getWarm: one pass over the hot range fills the block cache, then random
// Gets within it.
func (r *runner) getWarm(ctx context.Context) (Result, error) {
	hot := r.hotRows()
	r.rep.HotRows = hot
	start := time.Now()
	if _, err := r.drive(ctx, "warm-up", r.opts.Concurrency, 24*time.Hour, int64(hot), func(ctx context.Context, _ *worker, i int64) (int64, int64, error) {
		b, err := r.getOne(ctx, Key(int(i)))
		return 1, b, err
	}); err != nil {
		return Result{Phase: PhaseGetWarm}, fmt.Errorf("warm-up: %w", err)
	}
	r.logf("get-warm: read the hot range of %d rows (%.0f MB of a %.0f MB cache) in %v", hot,
		mb(int64(hot)*int64(len(r.value)+keyLen)), mb(r.opts.CacheBytes), time.Since(start).Round(time.Millisecond))
	return r.timed(PhaseGetWarm, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		b, err := r.getOne(ctx, Key(w.rng.IntN(hot)))
		return 1, b, err
	})
}

// getCold: random Gets over the whole keyspace.
func (r *runner) getCold(ctx context.Context) (Result, error) {
	if r.rep.TSFileBytes > 0 {
		r.logf("get-cold: %.0f MB of TSFiles, %.0f MB cache: at most %.0f%% of Gets can hit the block cache",
			mb(r.rep.TSFileBytes), mb(r.opts.CacheBytes), min(100, 100*float64(r.opts.CacheBytes)/float64(r.rep.TSFileBytes)))
	}
	return r.timed(PhaseGetCold, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		b, err := r.getOne(ctx, Key(w.rng.IntN(r.opts.Keys)))
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
