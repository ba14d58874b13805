package master

import (
	"cmp"
	"container/heap"
	"slices"
)

// planAssign gives each unassigned tablet to the live tserver with the
// fewest tablets (ties broken by uuid), counting what it already has, so
// the result is within one of even whenever the tablets can be spread.
// counts is updated in place. A heap keeps the choice O(log live) per
// tablet (a scan of every live tserver per tablet took seconds, under the
// leader's lock, for a million tablets over a thousand tservers).
func planAssign(unassigned []string, live []string, counts map[string]int) map[string]string {
	if len(live) == 0 {
		return nil
	}
	out := make(map[string]string, len(unassigned))
	h := &loadHeap{counts: counts, uuids: slices.Clone(live)}
	heap.Init(h)
	for _, id := range unassigned {
		best := h.uuids[0]
		out[id] = best
		counts[best]++
		heap.Fix(h, 0)
	}
	return out
}

// loadHeap orders tservers by (count, uuid), least first.
type loadHeap struct {
	counts map[string]int
	uuids  []string
}

func (h *loadHeap) Len() int { return len(h.uuids) }
func (h *loadHeap) Less(i, j int) bool {
	a, b := h.uuids[i], h.uuids[j]
	return h.counts[a] < h.counts[b] || h.counts[a] == h.counts[b] && a < b
}
func (h *loadHeap) Swap(i, j int) { h.uuids[i], h.uuids[j] = h.uuids[j], h.uuids[i] }
func (h *loadHeap) Push(x any)    { h.uuids = append(h.uuids, x.(string)) }
func (h *loadHeap) Pop() any {
	x := h.uuids[len(h.uuids)-1]
	h.uuids = h.uuids[:len(h.uuids)-1]
	return x
}

// plannedMove is one tablet to move from one tserver to another.
type plannedMove struct {
	tablet   string
	from, to string
}

// planMoves picks at most budget moves that bring the most loaded live
// tserver and the least loaded target within one of each other. movable
// lists, per live tserver, the tablets it owns that may move (not already
// moving); targets are the live tservers that may receive (warm ones);
// counts is every live tserver's projected count and is updated in place.
func planMoves(movable map[string][]string, live, targets []string, counts map[string]int, budget int) []plannedMove {
	var out []plannedMove
	byLoad := func(a, b string) int {
		if c := cmp.Compare(counts[a], counts[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	sources, sinks := slices.Clone(live), slices.Clone(targets)
	for len(out) < budget && len(sources) > 0 && len(sinks) > 0 {
		slices.SortFunc(sources, byLoad)
		slices.SortFunc(sinks, byLoad)
		lo, hi := sinks[0], sources[len(sources)-1]
		if counts[hi]-counts[lo] <= 1 || len(movable[hi]) == 0 {
			break
		}
		t := movable[hi][len(movable[hi])-1]
		movable[hi] = movable[hi][:len(movable[hi])-1]
		out = append(out, plannedMove{tablet: t, from: hi, to: lo})
		counts[hi]--
		counts[lo]++
	}
	return out
}
