package master

import "time"

// mergePolicy decides which adjacent tablets the automatic merger merges
// (docs/design.md 'Merge'): both reported below threshold in every pass
// for minAge, both serving with no move in flight, and, when maxCombined
// is positive, their sizes summing below it. maxCombined is half the
// tservers' split threshold: a merged tablet then has to double before it
// splits again, and a split's two children (together about the split
// threshold) never merge back — no merge/split flapping, whatever
// threshold is set.
type mergePolicy struct {
	threshold   int64
	maxCombined int64
	minAge      time.Duration
	maxPairs    int
}

// mergePolicy is the automatic merger's policy under c.
func (c *Config) mergePolicy() mergePolicy {
	p := mergePolicy{threshold: c.MergeThreshold, minAge: c.MergeMinAge, maxPairs: maxMergesPerPass}
	if c.SplitThreshold > 0 {
		p.maxCombined = c.SplitThreshold / 2
	}
	return p
}

// mergeTablet is one tablet as the merger sees it.
type mergeTablet struct {
	id      string
	size    int64 // as last reported; negative: no report
	serving bool  // SERVING in the metadata
	moving  bool  // a move (rebalancing or for a merge) is in flight
}

// plan picks up to maxPairs disjoint adjacent pairs, each within one
// table (tables lists each table's tablets in key order), scanning left to
// right. since holds, by tablet id, the first pass that saw the tablet
// small (reported below threshold, whatever its state, so a move does not
// restart the clock); plan returns the map for the next pass: tablets not
// small now are dropped from it.
func (p mergePolicy) plan(tables [][]mergeTablet, since map[string]time.Time, now time.Time) (pairs [][2]string, next map[string]time.Time) {
	next = map[string]time.Time{}
	for _, ts := range tables {
		ok := make([]bool, len(ts))
		for i, t := range ts {
			if t.size < 0 || t.size >= p.threshold {
				continue
			}
			s, seen := since[t.id]
			if !seen {
				s = now
			}
			next[t.id] = s
			ok[i] = t.serving && !t.moving && now.Sub(s) >= p.minAge
		}
		for i := 0; i+1 < len(ts) && len(pairs) < p.maxPairs; i++ {
			if !ok[i] || !ok[i+1] {
				continue
			}
			if p.maxCombined > 0 && ts[i].size+ts[i+1].size >= p.maxCombined {
				continue // try ts[i+1] with ts[i+2]
			}
			pairs = append(pairs, [2]string{ts[i].id, ts[i+1].id})
			i++ // disjoint pairs
		}
	}
	return pairs, next
}
