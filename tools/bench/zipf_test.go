package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactZipf is the probability of each rank 0 … n-1 under Zipf(θ).
func exactZipf(n int, theta float64) []float64 {
	p := make([]float64, n)
	var s float64
	for i := range p {
		p[i] = 1 / math.Pow(float64(i+1), theta)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// TestZipfianSkew draws from the generator and compares the frequencies
// with the exact Zipf distribution: the first two ranks, and the mass of
// the top 1 %, 10 % and 50 % of ranks.
func TestZipfianSkew(t *testing.T) {
	const n, draws = 1000, 400_000
	seed := uint64(7)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	z := newZipfian(n, zipfTheta)
	counts := make([]int, n)
	for range draws {
		v := z.next(rng.Float64())
		if v < 0 || v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		counts[v]++
	}
	want := exactZipf(n, zipfTheta)
	for _, r := range []int{0, 1} {
		got := float64(counts[r]) / draws
		if math.Abs(got-want[r]) > 0.05*want[r] {
			t.Errorf("rank %d: frequency %.4f, want %.4f ± 5%%", r, got, want[r])
		}
	}
	for _, top := range []int{10, 100, 500} {
		var got, exp float64
		for r := range top {
			got += float64(counts[r]) / draws
			exp += want[r]
		}
		if math.Abs(got-exp) > 0.03 {
			t.Errorf("top %d ranks: mass %.3f, want %.3f ± 0.03", top, got, exp)
		}
	}
	// Skew: the most popular rank is drawn far more often than a uniform
	// choice would (1/n), and the ranks are ordered by popularity.
	if counts[0] < 50*draws/n || counts[0] < counts[1] || counts[1] < counts[10] || counts[10] < counts[500] {
		t.Errorf("not skewed: counts[0,1,10,500] = %d %d %d %d", counts[0], counts[1], counts[10], counts[500])
	}
}

// TestZipfianGrow: growing the item count gives the same generator as
// building it for the larger count.
func TestZipfianGrow(t *testing.T) {
	z := newZipfian(100, zipfTheta)
	z.grow(5000)
	w := newZipfian(5000, zipfTheta)
	if math.Abs(z.zetan-w.zetan) > 1e-9 || math.Abs(z.eta-w.eta) > 1e-9 {
		t.Fatalf("grown ζ %v η %v, built ζ %v η %v", z.zetan, z.eta, w.zetan, w.eta)
	}
	for _, u := range []float64{0, 0.01, 0.3, 0.7, 0.9999} {
		if a, b := z.next(u), w.next(u); a != b {
			t.Errorf("next(%v) = %d grown, %d built", u, a, b)
		}
	}
}

// TestScrambledZipfian: scrambling keeps the skew (the hottest item gets
// about rank 0's share) but spreads the hot items over the keyspace.
func TestScrambledZipfian(t *testing.T) {
	const n, draws = 10_000, 300_000
	seed := uint64(11)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	z := newZipfian(n, zipfTheta)
	counts := make([]int, n)
	for range draws {
		v := scramble(z.next(rng.Float64()), n)
		if v < 0 || v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		counts[v]++
	}
	want0 := exactZipf(n, zipfTheta)[0]
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return counts[b] - counts[a] })
	if got := float64(counts[order[0]]) / draws; got < 0.9*want0 {
		t.Errorf("hottest item's frequency %.4f, want ≥ %.4f", got, 0.9*want0)
	}
	if counts[order[0]] < 100*draws/n {
		t.Errorf("hottest item drawn %d times, no skew (uniform: %d)", counts[order[0]], draws/n)
	}
	// The 20 hottest items are not the first rows: they spread over at
	// least half of the ten tenths of the keyspace.
	tenths := map[int]bool{}
	for _, it := range order[:20] {
		tenths[it*10/n] = true
	}
	if len(tenths) < 5 {
		t.Errorf("the 20 hottest items %v fall in %d tenths of the keyspace", order[:20], len(tenths))
	}
}

func TestAckCounter(t *testing.T) {
	a := newAckCounter(10)
	i, j, k := a.take(), a.take(), a.take()
	if i != 10 || j != 11 || k != 12 {
		t.Fatalf("took %d %d %d, want 10 11 12", i, j, k)
	}
	a.ack(11)
	if l := a.limit.Load(); l != 10 {
		t.Fatalf("limit %d after acking 11 only, want 10", l)
	}
	a.ack(10)
	if l := a.limit.Load(); l != 12 {
		t.Fatalf("limit %d after acking 10 and 11, want 12", l)
	}
	a.ack(12)
	if l := a.limit.Load(); l != 13 || len(a.done) != 0 {
		t.Fatalf("limit %d (pending %v), want 13 and none", l, a.done)
	}
}
