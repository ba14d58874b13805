package master

import (
	"strconv"
	"testing"
)

// TestEventRing: the ring keeps the last eventRingSize events, newest
// first.
func TestEventRing(t *testing.T) {
	for _, n := range []int{0, 1, eventRingSize - 1, eventRingSize, eventRingSize + 1, 3*eventRingSize + 7} {
		var r eventRing
		for i := 0; i < n; i++ {
			r.add("k", "%d", i)
		}
		got := r.recent()
		if want := min(n, eventRingSize); len(got) != want {
			t.Fatalf("%d events added: %d kept, want %d", n, len(got), want)
		}
		for j, e := range got {
			if want := strconv.Itoa(n - 1 - j); e.Text != want || e.Kind != "k" || e.At.IsZero() {
				t.Fatalf("%d events added: recent()[%d] = %+v, want text %s", n, j, e, want)
			}
		}
	}
}
