package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The workloads, named as Bighive's bench phases.
const (
	phaseWrite    = "randomWrite"
	phaseBulk     = "bulk"
	phaseReadWarm = "randomReadWarm"
	phaseRead     = "randomRead"
	phaseScan     = "scan"
)

// figure is one peer's result on one workload.
type figure struct {
	RowsPS float64 // rows (= calls for Put and Get) per second
	MBPS   float64 // key + value bytes per second, 10^6
	P50    time.Duration
	P99    time.Duration // of one call: a Put, a Get, a batch, a full scan
	// Floor is Bighive's ping floor before the phase (pings/s); only the
	// Bighive columns have it.
	Floor float64
}

// figures are one run of one peer, by phase.
type figures map[string]figure

// kvStore is a peer driven from this program through its Go client (etcd,
// the emulator): the same calls as Bighive's bench makes.
type kvStore interface {
	// put writes value to key durably (as durable as the peer is).
	put(ctx context.Context, key string, value []byte) error
	// bulk writes value to every key in one call.
	bulk(ctx context.Context, keys []string, value []byte) error
	// get returns the length of key's latest value (-1: no such key).
	get(ctx context.Context, key string) (int, error)
	// scan reads every key in order, calling f with each key and its
	// value's length.
	scan(ctx context.Context, f func(key string, valueLen int) error) error
}

// key is row i's key: 16 decimal digits, as in Bighive's bench.
func key(i int) string { return fmt.Sprintf("%016d", i) }

// permute maps 0 … n-1 onto itself (Bighive's bench's bulk order): i·p
// mod n with p a prime that does not divide n.
func permute(i, n int) int {
	p := 1_000_003
	if n%p == 0 {
		p = 999_983
	}
	return int(uint64(i) * uint64(p) % uint64(n))
}

// hotRows is the warm range: rows whose key and value bytes fill half of
// Bighive's block cache (as tools/bench/pebble computes it).
func hotRows(o options) int {
	return max(1, min(o.keys, int(o.cacheBytes/2)/(o.valueSize+16)))
}

// runKV runs the workloads in the order of Bighive's bench: durable
// random Puts; bulk batches (timed for the phase's time, then untimed
// until every row is written once); one read pass over the hot range;
// random Gets within it; random Gets over the keyspace; full scans.
func runKV(ctx context.Context, o options, st kvStore, seed uint64, logf func(string, ...any)) (figures, error) {
	value := make([]byte, o.valueSize)
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range value {
		value[i] = 'a' + byte(rng.IntN(26))
	}
	rowBytes := int64(16 + o.valueSize)
	out := figures{}

	logf("%s: durable Puts of random rows, %d callers", phaseWrite, o.concurrency)
	f, err := drive(ctx, o.concurrency, o.duration, 0, seed, func(ctx context.Context, rng *rand.Rand, _ int64) (int64, int64, error) {
		k := key(rng.IntN(o.keys))
		if err := st.put(ctx, k, value); err != nil {
			return 0, 0, fmt.Errorf("put %s: %w", k, err)
		}
		return 1, rowBytes, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", phaseWrite, err)
	}
	out[phaseWrite] = f

	batches := int64((o.keys + o.batch - 1) / o.batch)
	var cursor atomic.Int64
	bulkOp := func(ctx context.Context, _ *rand.Rand, _ int64) (int64, int64, error) {
		b := cursor.Add(1) - 1
		lo, hi := int(b)*o.batch, min(int(b+1)*o.batch, o.keys)
		keys := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			keys = append(keys, key(permute(i, o.keys)))
		}
		if err := st.bulk(ctx, keys, value); err != nil {
			return 0, 0, fmt.Errorf("bulk of %d rows from %s: %w", len(keys), keys[0], err)
		}
		return int64(len(keys)), int64(len(keys)) * rowBytes, nil
	}
	logf("%s: batches of %d rows, %d callers", phaseBulk, o.batch, o.concurrency)
	f, err = drive(ctx, o.concurrency, o.duration, batches, seed, bulkOp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", phaseBulk, err)
	}
	out[phaseBulk] = f
	if left := batches - cursor.Load(); left > 0 {
		start := time.Now()
		if _, err := drive(ctx, o.concurrency, 24*time.Hour, left, seed, bulkOp); err != nil {
			return nil, fmt.Errorf("fill: %w", err)
		}
		logf("fill: wrote the rest of the %d rows in %v", o.keys, time.Since(start).Round(time.Millisecond))
	}

	getOp := func(n int) func(context.Context, *rand.Rand, int64) (int64, int64, error) {
		return func(ctx context.Context, rng *rand.Rand, i int64) (int64, int64, error) {
			r := int(i)
			if rng != nil {
				r = rng.IntN(n)
			}
			k := key(r)
			got, err := st.get(ctx, k)
			if err != nil {
				return 0, 0, fmt.Errorf("get %s: %w", k, err)
			}
			if got != o.valueSize {
				return 0, 0, fmt.Errorf("get %s: value of %d bytes, want %d", k, got, o.valueSize)
			}
			return 1, rowBytes, nil
		}
	}
	hot := hotRows(o)
	warm := getOp(hot)
	if _, err := drive(ctx, o.concurrency, 24*time.Hour, int64(hot), seed, func(ctx context.Context, _ *rand.Rand, i int64) (int64, int64, error) {
		return warm(ctx, nil, i)
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	logf("%s: random Gets within the first %d rows, %d callers", phaseReadWarm, hot, o.concurrency)
	if out[phaseReadWarm], err = drive(ctx, o.concurrency, o.duration, 0, seed, warm); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseReadWarm, err)
	}
	logf("%s: random Gets over all %d rows, %d callers", phaseRead, o.keys, o.concurrency)
	if out[phaseRead], err = drive(ctx, o.concurrency, o.duration, 0, seed, getOp(o.keys)); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseRead, err)
	}

	logf("%s: full scans by one caller", phaseScan)
	if out[phaseScan], err = scanPhase(ctx, o, st); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseScan, err)
	}
	return out, nil
}

// drive runs op from conc goroutines until d has passed or maxOps calls
// were started (0: no limit), and stops at the first error.
func drive(ctx context.Context, conc int, d time.Duration, maxOps int64, seed uint64,
	op func(context.Context, *rand.Rand, int64) (rows, bytes int64, err error)) (figure, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next        atomic.Int64
		rows, bytes atomic.Int64
		wg          sync.WaitGroup
		mu          sync.Mutex
		lat         []time.Duration
		first       error
	)
	start := time.Now()
	stop := start.Add(d)
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)+1))
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil && time.Now().Before(stop) {
				i := next.Add(1) - 1
				if maxOps > 0 && i >= maxOps {
					return
				}
				t := time.Now()
				n, b, err := op(ctx, rng, i)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				mine = append(mine, time.Since(t))
				rows.Add(n)
				bytes.Add(b)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return figure{}, first
	}
	if err := ctx.Err(); err != nil {
		return figure{}, err
	}
	return summarize(rows.Load(), bytes.Load(), time.Since(start), lat), nil
}

func summarize(rows, bytes int64, d time.Duration, lat []time.Duration) figure {
	slices.Sort(lat)
	pick := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	s := d.Seconds()
	return figure{RowsPS: float64(rows) / s, MBPS: float64(bytes) / s / 1e6, P50: pick(0.50), P99: pick(0.99)}
}

// scanPhase reads the whole keyspace in order, again until the phase time
// is up (at least once); each pass must see every row once, in order.
func scanPhase(ctx context.Context, o options, st kvStore) (figure, error) {
	var rows, bytes int64
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < o.duration && ctx.Err() == nil {
		t := time.Now()
		n := 0
		err := st.scan(ctx, func(k string, vlen int) error {
			if want := key(n); k != want {
				return fmt.Errorf("row %d is %q, want %q", n, k, want)
			}
			if vlen != o.valueSize {
				return fmt.Errorf("row %s: value of %d bytes, want %d", k, vlen, o.valueSize)
			}
			n++
			bytes += int64(len(k) + vlen)
			return nil
		})
		if err != nil {
			return figure{}, err
		}
		if n != o.keys {
			return figure{}, fmt.Errorf("a pass saw %d rows, want %d", n, o.keys)
		}
		rows += int64(n)
		lat = append(lat, time.Since(t))
	}
	if err := ctx.Err(); err != nil {
		return figure{}, err
	}
	return summarize(rows, bytes, time.Since(start), lat), nil
}
