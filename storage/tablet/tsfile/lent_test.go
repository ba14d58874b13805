package tsfile

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"bighive/storage/memstore"
	"bighive/storage/tablet/blockcache"
)

// TestLentIterator checks a lent iterator (NewLentIterator) against the
// entries written, across far more pages than its fill, for pages stored
// raw (random values) and compressed (repetitive ones): every entry in
// order, seeks forward within and past its reads, and only about its
// fill's worth of each block's pages cached.
func TestLentIterator(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for _, compressible := range []bool{false, true} {
		t.Run(fmt.Sprintf("compressible=%v", compressible), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			entries := randomEntries(rng, 30000, 600)
			if compressible {
				// Half of each value random, half zeros: pages compress
				// to about half.
				for i := range entries {
					if v := entries[i].Value; v != nil {
						clear(v[len(v)/2:])
					}
				}
			}
			mgr := newStore(t)
			info := writeEntries(t, mgr, entries, 2048)
			cache := blockcache.New(blockcache.Options{Capacity: 64 << 20})
			r, err := Open(mgr, info.FooterRef(), ReaderOptions{Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for _, d := range r.footer.data {
				if d.family != "" && d.dataSize < 2*ScanFillBytes {
					t.Fatalf("family %q's block has %d bytes: too few to pass the fill", d.family, d.dataSize)
				}
			}

			it := r.NewLentIterator(nil)
			i := 0
			for it.First(); it.Valid(); it.Next() {
				// Compared before the iterator moves: its bytes are lent.
				if i >= len(entries) || !sameEntry(it.Entry(), &entries[i]) {
					t.Fatalf("entry %d: got %v want %v", i, it.Entry(), &entries[i])
				}
				i++
			}
			if err := it.Err(); err != nil || i != len(entries) {
				t.Fatalf("read %d of %d entries: %v", i, len(entries), err)
			}
			it.Close()
			blocks := int64(len(r.footer.data))
			if got, most := cache.Stats().Charge, blocks*(ScanFillBytes+2*int64(DefaultReadAhead)+64<<10); got > most {
				t.Fatalf("the lent scan cached %d bytes, more than %d (the fill of %d blocks)", got, most, blocks)
			}
			if cache.Stats().Inserts == 0 {
				t.Fatal("the lent scan cached nothing: its fill goes through the cache")
			}

			// Seeks in order, each followed by a few entries, as a scan of
			// a row set moves from range to range.
			it = r.NewLentIterator(nil)
			defer it.Close()
			at := 0
			for at < len(entries) {
				at += 1 + rng.Intn(400)
				if at >= len(entries) {
					break
				}
				key := memstore.RowStart(entries[at].Row)
				j := sort.Search(len(entries), func(j int) bool { return memstore.Compare(&entries[j], key) >= 0 })
				it.SeekGE(key)
				for k := 0; k < 5 && j+k < len(entries); k++ {
					if !it.Valid() || !sameEntry(it.Entry(), &entries[j+k]) {
						t.Fatalf("seek %q, entry %d: got %v want %v (err %v)", key.Row, k, it.Valid(), &entries[j+k], it.Err())
					}
					it.Next()
				}
				at = j + 5
			}
		})
	}
}
