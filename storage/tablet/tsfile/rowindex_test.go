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
	if rows := rowIndex(ordered, 2, false); len(rows) != 1+2*rowStride || rows[1] != 0 || rows[2] != 0 || rows[2+rowStride] != 1 {
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

// TestSearchRows checks the row index's search against a linear search of
// the rows, for pages whose rows share prefixes of every length, differ
// only past the 8 bytes the index keeps, or only in length and zero
// bytes, and keys shorter than, equal to, between and past them.
func TestSearchRows(t *testing.T) {
	pages := map[string][]string{
		"one row":             {"row1"},
		"no shared prefix":    {"a", "b", "c"},
		"short shared prefix": {"row001", "row002", "row010", "row100"},
		"long shared prefix":  {"user000000000001", "user000000000002", "user000000000017"},
		"past the word":       {"pfx-12345678-a", "pfx-12345678-b", "pfx-12345678-c", "pfx-12345679"},
		"zero bytes":          {"a", "a\x00", "a\x00\x00", "a\x00\x01", "a\x01"},
		"prefixes of others":  {"ab", "abc", "abcd", "abcdefghijkl", "abcdefghijklm"},
	}
	keys := []string{"", "\x00", "a", "a\x00", "a\x00\x00\x00", "ab", "abcdefghijk", "abcdefghijkl\x00", "b", "bb",
		"pfx", "pfx-12345678-", "pfx-12345678-b", "pfx-12345678-bb", "pfx-123456780", "pfx-2", "row", "row0", "row001",
		"row0010", "row011", "row2", "user0000000000", "user000000000001", "user000000000003", "user00000000001", "z"}
	for name, rows := range pages {
		var body []byte
		for _, r := range rows {
			for q := range 2 { // two entries per row: a row starts at its first
				e := memstore.Entry{Row: []byte(r), Family: "f", Qualifier: []byte{byte('a' + q)}, Timestamp: 1, Kind: mutation.SetCell, Value: []byte("v")}
				body = appendEntry(body, &e, true)
			}
		}
		index := rowIndex(body, 2*len(rows), false)
		if index == nil {
			t.Fatalf("%s: no index", name)
		}
		for _, k := range append(keys, rows...) {
			want := sort.Search(len(rows), func(j int) bool { return rows[j] >= k })
			if got := searchRows(body, index, []byte(k)); got != want {
				t.Errorf("%s: search %q = row %d, want %d", name, k, got, want)
			}
		}
	}
}
