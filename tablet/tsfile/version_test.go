package tsfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"bighive/blockstore"
	"bighive/internal/mutation"
	"bighive/memstore"
	"bighive/tablet/blockcache"
)

// v2Fixture is a TSFile of format version 2 written by the version-2
// writer (before pages were compressed; the commit that adds this file
// wrote it): Write(fixtureEntries, PageSize 1024) into a memManager, its
// blocks serialized by encodeFixture. The entries are in two families and
// row tombstones, over several pages of each data block.
const v2Fixture = "testdata/v2.tsfile"

// fixtureEntries is a deterministic set of entries of every kind, sorted.
func fixtureEntries() []memstore.Entry {
	var out []memstore.Entry
	for i := 0; i < 120; i++ {
		row := []byte(fmt.Sprintf("row%04d", i))
		for _, fam := range []string{"cf1", "cf2"} {
			for q := 0; q < 3; q++ {
				e := memstore.Entry{Row: row, Family: fam, Qualifier: []byte(fmt.Sprintf("q%d", q)),
					Timestamp: int64(1000 + i*10 + q), Seq: uint64(i*16 + q + 1), Kind: mutation.SetCell}
				e.Value = []byte(fmt.Sprintf("value of %s/%s:q%d, %s", row, fam, q, bytes.Repeat([]byte{byte('a' + i%26)}, i%40)))
				out = append(out, e)
			}
		}
		switch i % 10 {
		case 3:
			out = append(out, memstore.Entry{Row: row, Kind: mutation.DeleteRow, Timestamp: 900, Seq: uint64(i*16 + 10)})
		case 5:
			out = append(out, memstore.Entry{Row: row, Family: "cf1", Qualifier: []byte("q9"), Kind: mutation.DeleteColumn, Timestamp: 5, End: 50, Seq: uint64(i*16 + 11)})
		case 7:
			out = append(out, memstore.Entry{Row: row, Family: "cf2", Kind: mutation.DeleteFamily, Timestamp: 800, Seq: uint64(i*16 + 12)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return memstore.Compare(&out[i], &out[j]) < 0 })
	return out
}

// encodeFixture serializes a memManager's blocks: footer:u64, then per
// block (ascending ID) id:u64 len:u32 bytes.
func encodeFixture(m *memManager, footer blockstore.BlockID) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(footer))
	ids, _ := m.AllBlockIDs()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, uint64(id))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.blocks[id])))
		b = append(b, m.blocks[id]...)
	}
	return b
}

// decodeFixture is the inverse of encodeFixture.
func decodeFixture(t *testing.T, b []byte) (*memManager, blockstore.BlockID) {
	t.Helper()
	m := newMemManager()
	d := decoder{b: b}
	footer := blockstore.BlockID(d.u64())
	for !d.bad && !d.done() {
		id := blockstore.BlockID(d.u64())
		n := int(d.u32())
		if d.bad || n > len(b)-d.pos {
			t.Fatalf("fixture truncated at %d", d.pos)
		}
		m.blocks[id] = b[d.pos : d.pos+n]
		d.pos += n
		m.next = max(m.next, id)
	}
	if d.bad {
		t.Fatal("malformed fixture")
	}
	return m, footer
}

// TestReadV2Fixture reads the version-2 file written by the old writer:
// every entry by a scan and by seeks, through a cache.
func TestReadV2Fixture(t *testing.T) {
	b, err := os.ReadFile(filepath.FromSlash(v2Fixture))
	if err != nil {
		t.Fatal(err)
	}
	m, footer := decodeFixture(t, b)
	cache := blockcache.New(blockcache.Options{Capacity: 1 << 20})
	r, err := Open(m, blockstore.BlockRef{ID: footer}, ReaderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.footer.version != 2 {
		t.Fatalf("fixture has version %d, want 2", r.footer.version)
	}
	want := fixtureEntries()
	for pass := 0; pass < 2; pass++ { // the second pass is served by the cache
		it := r.NewIterator(nil, true)
		i := 0
		for it.First(); it.Valid(); it.Next() {
			if i >= len(want) || !sameEntry(it.Entry(), &want[i]) || it.Entry().Seq != want[i].Seq || it.Entry().End != want[i].End {
				t.Fatalf("entry %d: got %v want %v", i, it.Entry(), &want[i])
			}
			i++
		}
		if err := it.Err(); err != nil || i != len(want) {
			t.Fatalf("read %d of %d entries: %v", i, len(want), err)
		}
		it.Close()
	}
	it := r.NewIterator([]string{"cf2"}, false)
	defer it.Close()
	for i := range want {
		if want[i].Family != "cf2" {
			continue
		}
		it.SeekGE(&want[i])
		if !it.Valid() || !sameEntry(it.Entry(), &want[i]) {
			t.Fatalf("seek %v: got %v (err %v)", &want[i], it.Entry(), it.Err())
		}
	}
	var maxSeq uint64
	for i := range want {
		maxSeq = max(maxSeq, want[i].Seq)
	}
	if got := r.Info(); got.Entries != int64(len(want)) || got.MaxSeq != maxSeq {
		t.Fatalf("info %+v, want %d entries and max seq %d", got, len(want), maxSeq)
	}
	if st := cache.Stats(); st.Hits == 0 {
		t.Fatalf("second scan missed the cache: %+v", st)
	}
}
