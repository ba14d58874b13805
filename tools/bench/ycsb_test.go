package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestYCSBMixes: the kinds each workload picks are its proportions (within
// 4 standard deviations of a binomial count), and it picks no other kind.
func TestYCSBMixes(t *testing.T) {
	const n = 100_000
	seed := uint64(3)
	t.Logf("seed %d", seed)
	for _, wl := range ycsbWorkloads {
		t.Run(wl.phase, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			var counts [nKinds]int
			for range n {
				counts[wl.pick(rng.Float64())]++
			}
			want := map[opKind]float64{kindRead: wl.read, kindUpdate: wl.update, kindInsert: wl.insert, kindScan: wl.scan, kindReadModifyWrite: wl.rmw}
			for k := range nKinds {
				p := want[k]
				tol := 4 * math.Sqrt(n*p*(1-p))
				if math.Abs(float64(counts[k])-n*p) > tol || (p == 0 && counts[k] != 0) {
					t.Errorf("%s: %d of %d, want %.0f ± %.0f", kindNames[k], counts[k], n, n*p, tol)
				}
			}
		})
	}
	if got := (ycsbWorkload{read: 0.95, update: 0.05}).pick(0.999999999); got != kindUpdate {
		t.Errorf("pick near 1 = %s, want update", kindNames[got])
	}
}

// TestResolvePhases: phase names and aliases, case-insensitive, the
// earlier versions' names included; ping always runs; unknown names fail.
func TestResolvePhases(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		{[]string{"put"}, []string{PhasePing, PhaseRandomWrite}},
		{[]string{"get", "checkandmutate"}, []string{PhasePing, PhaseRandomReadWarm, PhaseRandomRead, PhaseCheckAndMutate}},
		{[]string{"YCSB", "scanrange"}, []string{PhasePing, PhaseYCSBA, PhaseYCSBB, PhaseYCSBC, PhaseYCSBD, PhaseYCSBE, PhaseYCSBF,
			PhaseScanRange10, PhaseScanRange100, PhaseScanRange1000}},
		{[]string{"sequentialWrite", "ycsbe"}, []string{PhasePing, PhaseSequentialWrite, PhaseYCSBE}},
	} {
		got, err := resolvePhases(tc.names)
		if err != nil {
			t.Fatalf("%v: %v", tc.names, err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%v selects %v, want %v", tc.names, got, tc.want)
		}
		for _, p := range tc.want {
			if !got[p] {
				t.Errorf("%v selects %v, want %v", tc.names, got, tc.want)
			}
		}
	}
	if _, err := resolvePhases([]string{"scanRange7"}); err == nil {
		t.Error("unknown phase scanRange7 accepted")
	}
}
