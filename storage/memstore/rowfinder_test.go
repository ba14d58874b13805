package memstore

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
)

// TestLastRowBefore: the greatest row below a bound, for every bound, in
// a memstore and in a merge; rows only a later batch or a higher sequence
// wrote are invisible and skipped.
func TestLastRowBefore(t *testing.T) {
	m := New()
	rows := []string{"a", "a\x00", "ab", "b", "b\x00\x00", "ba", "c", "cccccccccccccccccc1", "cccccccccccccccccc2", "d"}
	for i, r := range rows {
		e := set(r, "f", "q", 1, "v")
		e.Seq = uint64(10 + i)
		m.Apply([]Entry{e, set(r, "g", "q", 2, "w")})
	}
	old := m.NewIteratorAt(1 << 62).(RowFinder)
	// Written after old was made: old must skip them.
	m.Apply([]Entry{set("bb", "f", "q", 1, "late"), set("z", "f", "q", 1, "late")})
	// Above the iterator's sequence bound.
	high := set("ca", "f", "q", 1, "high")
	high.Seq = 1 << 63
	m.Apply([]Entry{high})

	other := New()
	other.Apply([]Entry{set("aa", "f", "q", 1, "v"), set("c", "f", "q", 1, "v")})
	merged := Merge(m.NewIteratorAt(1<<62), other.NewIterator()).(RowFinder)

	check := func(name string, f RowFinder, visible []string) {
		sort.Strings(visible)
		bounds := append([]string{"", "0", "zz", "\xff"}, visible...)
		for _, r := range visible {
			bounds = append(bounds, r+"\x00", r+"a")
		}
		for _, b := range bounds {
			var bound []byte
			if b != "" {
				bound = []byte(b)
			}
			want, wantOK := "", false
			for _, r := range visible {
				if bound == nil || r < b {
					want, wantOK = r, true
				}
			}
			got, ok, err := f.LastRowBefore(bound)
			if err != nil || ok != wantOK || string(got) != want {
				t.Errorf("%s: LastRowBefore(%q) = %q %v %v, want %q %v", name, b, got, ok, err, want, wantOK)
			}
		}
	}
	check("snapshot", old, rows)
	check("merge", merged, append([]string{"bb", "z", "aa"}, rows...))

	// Random rows against a sorted list.
	rng := rand.New(rand.NewSource(1))
	big := New()
	var keys []string
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("k%05d", rng.Intn(100000))
		big.Apply([]Entry{set(k, "f", "q", 1, "v")})
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	check("random", big.NewIterator().(RowFinder), keys)
}
