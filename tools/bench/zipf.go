package bench

import (
	"math"
	"sync"
	"sync/atomic"
)

// zipfTheta is YCSB's Zipfian constant: item i (0-based) is drawn with
// probability ∝ 1/(i+1)^θ.
const zipfTheta = 0.99

// zipfian draws item numbers in [0, n) with a Zipfian distribution, item 0
// the most popular, by the algorithm of Gray et al., "Quickly Generating
// Billion-Record Synthetic Databases" (SIGMOD 1994), which YCSB's
// ZipfianGenerator also uses: with ζ(n) = Σ_{i=1..n} 1/i^θ,
// α = 1/(1-θ) and η = (1 - (2/n)^(1-θ)) / (1 - ζ(2)/ζ(n)), a uniform u in
// [0, 1) gives 0 if u·ζ(n) < 1, 1 if u·ζ(n) < 1 + 0.5^θ, and otherwise
// ⌊n·(η·u - η + 1)^α⌋. The first two items are exact; the tail follows the
// distribution closely without a table of n entries.
//
// The item count may grow (grow), as YCSB's does for its "latest"
// distribution: ζ(n) is then extended by the new terms only. A zipfian is
// a value owned by one goroutine; copy it to give another its own.
type zipfian struct {
	n     int64
	theta float64
	alpha float64
	zeta2 float64
	zetan float64
	eta   float64
}

func newZipfian(n int64, theta float64) zipfian {
	z := zipfian{theta: theta, alpha: 1 / (1 - theta), zeta2: zetaRange(0, 2, theta)}
	z.zetan = zetaRange(0, n, theta)
	z.n = n
	z.setEta()
	return z
}

// zetaRange is Σ_{i=from+1..to} 1/i^θ.
func zetaRange(from, to int64, theta float64) float64 {
	var s float64
	for i := from + 1; i <= to; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

func (z *zipfian) setEta() {
	z.eta = (1 - math.Pow(2/float64(z.n), 1-z.theta)) / (1 - z.zeta2/z.zetan)
}

// grow extends the item count to n (a smaller n is ignored).
func (z *zipfian) grow(n int64) {
	if n <= z.n {
		return
	}
	z.zetan += zetaRange(z.n, n, z.theta)
	z.n = n
	z.setEta()
}

// next maps u, uniform in [0, 1), to an item in [0, n).
func (z *zipfian) next(u float64) int64 {
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < 1+math.Pow(0.5, z.theta) {
		return min(1, z.n-1)
	}
	v := int64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(max(v, 0), z.n-1)
}

// scramble spreads a Zipfian rank over [0, n): the rank's FNV-1a 64-bit
// hash modulo n, as YCSB's ScrambledZipfianGenerator does, so the popular
// items are scattered over the keyspace instead of being its first rows.
func scramble(rank, n int64) int64 {
	return int64(fnv64(uint64(rank)) % uint64(n))
}

// fnv64 is FNV-1a over the 8 bytes of v, low byte first.
func fnv64(v uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for range 8 {
		h ^= v & 0xff
		h *= 1099511628211
		v >>= 8
	}
	return h
}

// Distributions of the YCSB workloads' keys (Options.Distribution).
const (
	DistUniform = "uniform"
	DistZipfian = "zipfian"
)

// ackCounter numbers the rows a YCSB workload inserts, from the loaded
// keyspace's end on, and tracks limit: every row below it was inserted
// and acknowledged, so reads and scans choose among rows below limit
// only (YCSB's AcknowledgedCounterGenerator).
type ackCounter struct {
	next  atomic.Int64
	limit atomic.Int64
	mu    sync.Mutex
	done  map[int64]bool // acknowledged rows at or above limit
}

func newAckCounter(start int64) *ackCounter {
	a := &ackCounter{done: map[int64]bool{}}
	a.next.Store(start)
	a.limit.Store(start)
	return a
}

// take returns the next row number to insert.
func (a *ackCounter) take() int64 { return a.next.Add(1) - 1 }

// ack records that row i was inserted.
func (a *ackCounter) ack(i int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.done[i] = true
	l := a.limit.Load()
	for a.done[l] {
		delete(a.done, l)
		l++
	}
	a.limit.Store(l)
}
