package master

import (
	"cmp"
	"slices"
)

// planAssign gives each unassigned tablet to the live tserver with the
// fewest tablets (ties broken by uuid), counting what it already has, so
// the result is within one of even whenever the tablets can be spread.
// counts is updated in place.
func planAssign(unassigned []string, live []string, counts map[string]int) map[string]string {
	if len(live) == 0 {
		return nil
	}
	out := make(map[string]string, len(unassigned))
	for _, id := range unassigned {
		best := live[0]
		for _, u := range live[1:] {
			if counts[u] < counts[best] || counts[u] == counts[best] && u < best {
				best = u
			}
		}
		out[id] = best
		counts[best]++
	}
	return out
}

// plannedMove is one tablet to move from one tserver to another.
type plannedMove struct {
	tablet   string
	from, to string
}

// planMoves picks at most budget moves that bring the most and least
// loaded live tservers within one of each other. movable lists, per live
// tserver, the tablets it owns that may move (not already moving); counts
// is every live tserver's projected count and is updated in place.
func planMoves(movable map[string][]string, live []string, counts map[string]int, budget int) []plannedMove {
	var out []plannedMove
	sorted := slices.Clone(live)
	for len(out) < budget && len(sorted) > 1 {
		slices.SortFunc(sorted, func(a, b string) int {
			if c := cmp.Compare(counts[a], counts[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		lo, hi := sorted[0], sorted[len(sorted)-1]
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
