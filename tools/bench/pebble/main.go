// Command pebble measures embedded Pebble on the workloads of `bighive bench`
// (1 000-byte values, 16-digit row keys, 64 callers), so that README can put
// a well-known storage engine's figures from the same machine beside
// Bighive's. It is its own Go module: Bighive does not depend on Pebble, and
// `go test ./...` in the repository root does not build this.
//
// As in `bighive bench`, row i's value is its own: a --value-size slice of a
// 4 MiB random pool generated once from the seed, at an offset given by a
// hash of i, so neighbouring rows' values are unrelated and Pebble's
// compressed blocks are as large as the data (with the defaults, about
// 0.5 GB of sstables, several times the block cache), while a write costs no
// allocation or random generation. Every Get checks the value is the row's:
// its size and its bytes. After the flush each run prints its sstables'
// size.
//
//	cd tools/bench/pebble && go run . --runs 3
//
// Phases (each with the same meaning as the bench phase it is compared with):
//   - randomWrite: 64 goroutines, each one synced Set of a random row per
//     call (pebble.Sync; Pebble group-commits concurrent syncs). Compare with
//     Bighive's durable randomWrite.
//   - bulk: batches of 100 rows from a permutation of the keyspace, one synced
//     commit per batch, until every row is written. Compare with bulk.
//   - randomReadWarm: random Gets within a hot range that fits in half the
//     block cache, after one read pass over it.
//   - randomRead: random Gets over the whole keyspace after the memtable is
//     flushed, with the same 64 MiB block cache as the Bighive tserver: mostly
//     block-cache misses served from the OS page cache.
//   - scan: one iterator over the whole keyspace, MB/s of key + value bytes.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

type options struct {
	dir         string
	duration    time.Duration
	concurrency int
	valueSize   int
	keys        int
	batch       int
	cacheBytes  int64
	runs        int
	seed        uint64
	jsonOut     bool
}

// result is one phase's figures.
type result struct {
	Phase   string  `json:"phase"`
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
	RowsPS  float64 `json:"rows_per_s"`
	MBPS    float64 `json:"mb_per_s"`
	P50ns   int64   `json:"p50_ns"`
	P99ns   int64   `json:"p99_ns"`
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "", "directory of the database (default: a temporary one, removed)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each timed phase")
	flag.IntVar(&o.concurrency, "concurrency", 64, "goroutines")
	flag.IntVar(&o.valueSize, "value-size", 1000, "value `bytes`")
	flag.IntVar(&o.keys, "keys", 500_000, "rows in the keyspace")
	flag.IntVar(&o.batch, "batch", 100, "rows per bulk batch")
	flag.Int64Var(&o.cacheBytes, "cache-bytes", 64<<20, "block cache `bytes`")
	flag.IntVar(&o.runs, "runs", 1, "runs, each on a fresh database; more than one prints the medians too")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed")
	flag.BoolVar(&o.jsonOut, "json", false, "print every run and the medians as JSON")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "pebble bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	var all [][]result
	for i := 0; i < o.runs; i++ {
		dir := o.dir
		if dir == "" {
			d, err := os.MkdirTemp("", "pebble-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		} else if o.runs > 1 {
			dir = fmt.Sprintf("%s/run%d", o.dir, i)
		}
		rs, size, err := oneRun(ctx, o, dir, o.seed+uint64(i))
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		if !o.jsonOut {
			fmt.Printf("run %d (%s): after the flush %.0f MB in %d sstables, block cache %.0f MB\n",
				i, dir, float64(size.TablesSize)/1e6, size.TablesCount, float64(o.cacheBytes)/1e6)
			printTable(rs)
		}
		all = append(all, rs)
		if o.dir == "" {
			os.RemoveAll(dir)
		}
	}
	med := medians(all)
	if o.jsonOut {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"runs": all, "medians": med})
	}
	if o.runs > 1 {
		fmt.Printf("medians of %d runs\n", o.runs)
		printTable(med)
	}
	return nil
}

func printTable(rs []result) {
	fmt.Printf("%-16s %12s %10s %10s %10s\n", "phase", "rows/s", "MB/s", "p50", "p99")
	for _, r := range rs {
		fmt.Printf("%-16s %12.0f %10.1f %10s %10s\n", r.Phase, r.RowsPS, r.MBPS,
			time.Duration(r.P50ns).Round(time.Microsecond), time.Duration(r.P99ns).Round(time.Microsecond))
	}
}

func medians(all [][]result) []result {
	if len(all) == 0 {
		return nil
	}
	var out []result
	for p := range all[0] {
		var rps, mbps, p50, p99 []float64
		for _, rs := range all {
			rps = append(rps, rs[p].RowsPS)
			mbps = append(mbps, rs[p].MBPS)
			p50 = append(p50, float64(rs[p].P50ns))
			p99 = append(p99, float64(rs[p].P99ns))
		}
		out = append(out, result{Phase: all[0][p].Phase, RowsPS: median(rps), MBPS: median(mbps),
			P50ns: int64(median(p50)), P99ns: int64(median(p99))})
	}
	return out
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// quiet drops Pebble's informational lines and keeps its errors.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) }
func (quiet) Fatalf(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...); os.Exit(1) }

func key(i int) []byte { return fmt.Appendf(nil, "%016d", i) }

// valuePool is the size of the random pool the rows' values are cut from.
const valuePool = 4 << 20

// values are the rows' values, those of `bighive bench` for the same seed
// and size: row i's is a size-byte slice of a random pool, at an offset given
// by a hash of i. A copy of tools/bench/values.go, which this module
// cannot import without depending on all of Bighive.
type values struct {
	pool []byte
	size int
}

func newValues(seed uint64, size int) values {
	pool := make([]byte, valuePool+size)
	rng := rand.New(rand.NewPCG(seed, 0))
	var w [8]byte
	for i := 0; i < len(pool); i += len(w) {
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(pool[i:], w[:])
	}
	return values{pool: pool, size: size}
}

// of is row i's value; it is shared, not to be modified.
func (v values) of(i int) []byte {
	h, x := uint64(0xcbf29ce484222325), uint64(i) // FNV-1a over i's 8 bytes, low byte first
	for range 8 {
		h ^= x & 0xff
		h *= 1099511628211
		x >>= 8
	}
	off := h % (valuePool + 1)
	return v.pool[off : off+uint64(v.size) : off+uint64(v.size)]
}

func oneRun(ctx context.Context, o options, dir string, seed uint64) ([]result, pebble.LevelMetrics, error) {
	var size pebble.LevelMetrics
	cache := pebble.NewCache(o.cacheBytes)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, Logger: quiet{}})
	if err != nil {
		return nil, size, fmt.Errorf("open %s: %w", dir, err)
	}
	defer db.Close()
	vals := newValues(seed, o.valueSize)
	var rs []result

	r, err := timed(ctx, "randomWrite", o, seed, func(rng *rand.Rand) (int, error) {
		i := rng.IntN(o.keys)
		return o.valueSize + 16, db.Set(key(i), vals.of(i), pebble.Sync)
	})
	if err != nil {
		return nil, size, err
	}
	rs = append(rs, r)

	r, err = bulk(ctx, db, o, vals, seed)
	if err != nil {
		return nil, size, err
	}
	rs = append(rs, r)
	if err := db.Flush(); err != nil {
		return nil, size, fmt.Errorf("flush: %w", err)
	}
	size = db.Metrics().Total()

	hot := int(o.cacheBytes/2) / (o.valueSize + 16)
	hot = min(hot, o.keys)
	for i := 0; i < hot; i++ {
		if err := get(db, vals, i); err != nil {
			return nil, size, err
		}
	}
	r, err = timed(ctx, "randomReadWarm", o, seed, func(rng *rand.Rand) (int, error) {
		return o.valueSize + 16, get(db, vals, rng.IntN(hot))
	})
	if err != nil {
		return nil, size, err
	}
	rs = append(rs, r)

	r, err = timed(ctx, "randomRead", o, seed, func(rng *rand.Rand) (int, error) {
		return o.valueSize + 16, get(db, vals, rng.IntN(o.keys))
	})
	if err != nil {
		return nil, size, err
	}
	rs = append(rs, r)

	r, err = scan(ctx, db, o)
	if err != nil {
		return nil, size, err
	}
	rs = append(rs, r)
	return rs, size, nil
}

// get reads row i, which must hold row i's value.
func get(db *pebble.DB, vals values, i int) error {
	k := key(i)
	v, closer, err := db.Get(k)
	if err != nil {
		return fmt.Errorf("get %s: %w", k, err)
	}
	defer closer.Close()
	if len(v) != vals.size {
		return fmt.Errorf("get %s: %d bytes, want %d", k, len(v), vals.size)
	}
	if !bytes.Equal(v, vals.of(i)) {
		return fmt.Errorf("get %s: not the row's value", k)
	}
	return nil
}

// timed runs op from o.concurrency goroutines for o.duration.
func timed(ctx context.Context, name string, o options, seed uint64, op func(*rand.Rand) (int, error)) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var (
		wg    sync.WaitGroup
		rows  atomic.Int64
		bytes atomic.Int64
		mu    sync.Mutex
		lat   []time.Duration
		first error
	)
	start := time.Now()
	for g := 0; g < o.concurrency; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)+1))
			var mine []time.Duration
			for ctx.Err() == nil {
				t := time.Now()
				n, err := op(rng)
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					cancel()
					return
				}
				mine = append(mine, time.Since(t))
				rows.Add(1)
				bytes.Add(int64(n))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	if first != nil {
		return result{}, fmt.Errorf("%s: %w", name, first)
	}
	return summarize(name, rows.Load(), bytes.Load(), time.Since(start), lat), nil
}

func summarize(name string, rows, bytes int64, d time.Duration, lat []time.Duration) result {
	slices.Sort(lat)
	pick := func(q float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		return int64(lat[min(len(lat)-1, int(q*float64(len(lat))))])
	}
	s := d.Seconds()
	return result{Phase: name, Rows: rows, Seconds: s, RowsPS: float64(rows) / s,
		MBPS: float64(bytes) / s / 1e6, P50ns: pick(0.50), P99ns: pick(0.99)}
}

// bulk writes every row once, in batches from a permutation of the keyspace,
// o.concurrency batches in flight, each committed with a sync.
func bulk(ctx context.Context, db *pebble.DB, o options, vals values, seed uint64) (result, error) {
	perm := rand.New(rand.NewPCG(seed, 99)).Perm(o.keys)
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		lat   []time.Duration
		first error
	)
	start := time.Now()
	for g := 0; g < o.concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lo := int(next.Add(int64(o.batch))) - o.batch
				if lo >= len(perm) {
					return
				}
				t := time.Now()
				b := db.NewBatch()
				for _, i := range perm[lo:min(lo+o.batch, len(perm))] {
					b.Set(key(i), vals.of(i), nil)
				}
				err := b.Commit(pebble.Sync)
				b.Close()
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				lat = append(lat, time.Since(t))
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return result{}, fmt.Errorf("bulk: %w", first)
	}
	return summarize("bulk", int64(o.keys), int64(o.keys)*int64(o.valueSize+16), time.Since(start), lat), nil
}

// scan reads the whole keyspace with one iterator, repeated until
// o.duration is up (at least once); every pass must see every row.
func scan(ctx context.Context, db *pebble.DB, o options) (result, error) {
	var rows, bytes int64
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < o.duration && ctx.Err() == nil {
		t := time.Now()
		it, err := db.NewIter(nil)
		if err != nil {
			return result{}, fmt.Errorf("scan: %w", err)
		}
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			bytes += int64(len(it.Key()) + len(it.Value()))
			n++
		}
		err = it.Close()
		if err != nil {
			return result{}, fmt.Errorf("scan: %w", err)
		}
		if n != o.keys {
			return result{}, fmt.Errorf("scan: %d rows, want %d", n, o.keys)
		}
		rows += int64(n)
		lat = append(lat, time.Since(t))
	}
	return summarize("scan", rows, bytes, time.Since(start), lat), nil
}
