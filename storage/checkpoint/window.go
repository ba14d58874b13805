package checkpoint

import (
	"slices"
	"sync"
	"time"
)

// windowStats keeps the last n lock windows (held and wait times).
type windowStats struct {
	mu    sync.Mutex
	held  []time.Duration
	wait  []time.Duration
	next  int
	count int
}

func newWindowStats(n int) windowStats {
	return windowStats{held: make([]time.Duration, n), wait: make([]time.Duration, n)}
}

func (w *windowStats) add(wait, held time.Duration) {
	w.mu.Lock()
	w.held[w.next] = held
	w.wait[w.next] = wait
	w.next = (w.next + 1) % len(w.held)
	w.count = min(w.count+1, len(w.held))
	w.mu.Unlock()
}

func (w *windowStats) quantiles() (p50, p99, max time.Duration) {
	w.mu.Lock()
	s := slices.Clone(w.held[:w.count])
	w.mu.Unlock()
	return quantiles(s)
}

func (w *windowStats) waitQuantiles() (p50, p99, max time.Duration) {
	w.mu.Lock()
	s := slices.Clone(w.wait[:w.count])
	w.mu.Unlock()
	return quantiles(s)
}

// quantiles sorts s and returns its median, 99th percentile and maximum
// (nearest rank).
func quantiles(s []time.Duration) (p50, p99, max time.Duration) {
	if len(s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(s)
	return Quantile(s, 0.50), Quantile(s, 0.99), s[len(s)-1]
}

// Quantile returns the q-quantile (nearest rank) of the sorted s.
func Quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}
