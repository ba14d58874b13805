package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
)

const (
	counterQualifier = "n"
	lockQualifier    = "owner"
	lockFree         = "free"
)

// counterKey is atomic row j of the increment and checkAndMutate phases:
// next to data row permute(j), so the rows spread over the tablets.
func (r *runner) counterKey(j int) string { return Key(permute(j, r.opts.Keys)) + "#c" }

// counters is the number of rows the atomic phases work on.
func (r *runner) counters() int { return min(r.opts.Counters, r.opts.Keys) }

// increment: ReadModifyWrite increments of random counters by 1. After
// the phase every counter is read back: their sum must be the number of
// acknowledged increments.
func (r *runner) increment(ctx context.Context) (Result, error) {
	n := r.counters()
	r.logf("increment: ReadModifyWrite +1 of %d counters, %d goroutines", n, r.opts.Concurrency)
	res, err := r.timed(PhaseIncrement, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		k := r.counterKey(w.rng.IntN(n))
		if err := r.st.Increment(ctx, k); err != nil {
			return 0, 0, fmt.Errorf("increment %s: %w", k, err)
		}
		return 1, int64(len(k) + len(counterQualifier) + 8), nil
	})
	if err != nil {
		return res, err
	}
	var sum int64
	for j := range n {
		k := r.counterKey(j)
		v, ok, err := r.st.Counter(ctx, k)
		if err != nil {
			return res, fmt.Errorf("get counter %s: %w", k, err)
		}
		if ok {
			if len(v) != 8 {
				return res, fmt.Errorf("%w: counter %s holds %d bytes", ErrMismatch, k, len(v))
			}
			sum += int64(binary.BigEndian.Uint64(v))
		}
	}
	if sum != res.Calls {
		return res, fmt.Errorf("%w: the counters sum to %d after %d acknowledged increments", ErrMismatch, sum, res.Calls)
	}
	return res, nil
}

// checkAndMutate: each call is one conditional mutation of a lock row,
// compare-and-set style. A goroutine holds at most one lock: if it holds
// one it releases it (if the owner is me, set it free; this must match,
// or another goroutine took a held lock), otherwise it tries to take a
// random one (if the owner is a goroutine, nothing; else set the owner to
// me). Most calls write; a refused take writes nothing.
func (r *runner) checkAndMutate(ctx context.Context) (Result, error) {
	n := r.counters()
	r.logf("%s: compare-and-set lock/unlock of %d rows, %d goroutines", PhaseCheckAndMutate, n, r.opts.Concurrency)
	held := make([]int, r.opts.Concurrency) // the lock row goroutine i holds, or -1
	for i := range held {
		held[i] = -1
	}
	var taken, refused atomic.Int64
	res, err := r.timed(PhaseCheckAndMutate, ctx, func(ctx context.Context, w *worker, _ int64) (int64, int64, error) {
		me := "w" + strconv.Itoa(w.id)
		release := held[w.id] >= 0
		j := held[w.id]
		// Release: if the owner is me, set it free. Take: unless the
		// owner is a goroutine, set it to me.
		owner, value := me, lockFree
		if !release {
			j, owner, value = w.rng.IntN(n), "w[0-9]+", me
		}
		k := r.counterKey(j)
		matched, err := r.st.CheckAndSet(ctx, k, owner, release, value)
		if err != nil {
			return 0, 0, fmt.Errorf("check and mutate %s: %w", k, err)
		}
		switch {
		case release && !matched:
			return 0, 0, fmt.Errorf("%w: %s held the lock of %s, yet its release did not match", ErrMismatch, me, k)
		case release:
			held[w.id] = -1
		case !matched:
			held[w.id] = j
			taken.Add(1)
		default:
			refused.Add(1)
		}
		return 1, int64(len(k) + len(lockQualifier) + len(value)), nil
	})
	r.logf("%s: %d locks taken, %d refused (held by another goroutine)", PhaseCheckAndMutate, taken.Load(), refused.Load())
	return res, err
}
