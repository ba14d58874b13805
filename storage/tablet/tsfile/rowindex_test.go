package tsfile

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

// TestSeekRowIndex checks seeks into cached pages, which go through the
// pages' row indexes, against the sorted entries: to row starts, to
// entries inside a row, to rows between and past the pages' rows, forward
// and backward, first as the index is made (the second seek into a page)
// and then with every index attached.
func TestSeekRowIndex(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	mgr := newStore(t)
	entries := randomEntries(rng, 4000, 200)
	info := writeEntries(t, mgr, entries, 1024)
	cache := blockcache.New(blockcache.Options{Capacity: 64 << 20})
	r, err := Open(mgr, info.FooterRef(), ReaderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	warm := r.NewIterator(nil, true)
	for warm.First(); warm.Valid(); warm.Next() {
	}
	warm.Close()
	charged := cache.Stats().Charge

	it := r.NewIterator(nil, true)
	defer it.Close()
	seek := func(key *memstore.Entry) {
		t.Helper()
		j := sort.Search(len(entries), func(j int) bool { return memstore.Compare(&entries[j], key) >= 0 })
		it.SeekGE(key)
		if j == len(entries) {
			if it.Valid() {
				t.Fatalf("seek %v: got %v, want the end", key, it.Entry())
			}
			return
		}
		if !it.Valid() || !sameEntry(it.Entry(), &entries[j]) {
			t.Fatalf("seek %v: got %v (valid %v, err %v), want %v", key, it.Entry(), it.Valid(), it.Err(), &entries[j])
		}
		// Reading on from a seek gives the entries that follow.
		for k := j + 1; k < min(j+4, len(entries)); k++ {
			it.Next()
			if !it.Valid() || !sameEntry(it.Entry(), &entries[k]) {
				t.Fatalf("after seek %v, entry %d: got %v, want %v", key, k-j, it.Entry(), &entries[k])
			}
		}
	}
	keys := func() []*memstore.Entry {
		var ks []*memstore.Entry
		for k := 0; k < 2000; k++ {
			switch k % 3 {
			case 0:
				ks = append(ks, &entries[rng.Intn(len(entries))])
			case 1:
				ks = append(ks, memstore.RowStart([]byte(fmt.Sprintf("row%05d", rng.Intn(1100)))))
			default:
				ks = append(ks, memstore.RowStart(append([]byte(nil), entries[rng.Intn(len(entries))].Row...)))
			}
		}
		return ks
	}
	for pass := 0; pass < 2; pass++ {
		for _, k := range keys() {
			seek(k)
		}
	}
	if cache.Stats().Charge <= charged {
		t.Fatalf("cache charge %d after seeks, %d before: no row index was attached", cache.Stats().Charge, charged)
	}
}

// TestRowIndexRefusesMalformed checks that a body that does not decode as
// its entries, in row order, gets no index (the seek then decodes it from
// the start, which reports the corruption with its offset).
func TestRowIndexRefusesMalformed(t *testing.T) {
	e1 := memstore.Entry{Row: []byte("b"), Family: "f", Qualifier: []byte("q"), Timestamp: 1, Kind: mutation.SetCell, Value: []byte("v")}
	e2 := memstore.Entry{Row: []byte("a"), Family: "f", Qualifier: []byte("q"), Timestamp: 1, Kind: mutation.SetCell, Value: []byte("v")}
	ordered := appendEntry(appendEntry(nil, &e2, true), &e1, true)
	if rows := rowIndex(ordered, 2, false); len(rows) != 4 || rows[0] != 0 || rows[3] != 1 {
		t.Fatalf("rowIndex of two rows = %v", rows)
	}
	for name, tc := range map[string]struct {
		body  []byte
		count int
	}{
		"rows out of order": {appendEntry(appendEntry(nil, &e1, true), &e2, true), 2},
		"fewer entries":     {ordered, 3},
		"trailing bytes":    {ordered, 1},
		"truncated":         {ordered[:len(ordered)-2], 2},
	} {
		if rows := rowIndex(tc.body, tc.count, false); rows != nil {
			t.Errorf("%s: rowIndex = %v, want none", name, rows)
		}
	}
}
