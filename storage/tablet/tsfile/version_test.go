package tsfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

// fixtures are TSFiles of older format versions written by the writer of
// that version (v2: before pages were compressed; v3: before the footer
// counted cells and tombstones): Write(fixtureEntries, PageSize 1024)
// into a memManager, its blocks serialized by encodeFixture. The entries
// are in two families and row tombstones, over several pages of each data
// block.
var fixtures = []struct {
	path    string
	version uint32
}{{"testdata/v2.tsfile", 2}, {"testdata/v3.tsfile", 3}}

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

// TestReadFixtures reads the files of older versions written by the old
// writers: every entry by a scan and by seeks, through a cache.
func TestReadFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fmt.Sprintf("v%d", fx.version), func(t *testing.T) { readFixture(t, fx.path, fx.version) })
	}
}

func readFixture(t *testing.T, path string, version uint32) {
	b, err := os.ReadFile(filepath.FromSlash(path))
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
	if r.footer.version != version {
		t.Fatalf("fixture has version %d, want %d", r.footer.version, version)
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
	if got := r.Info(); got.Entries != int64(len(want)) || got.MaxSeq != maxSeq || got.Counted || got.Tombstones != 0 {
		t.Fatalf("info %+v, want %d entries, max seq %d and no counts", got, len(want), maxSeq)
	}
	if st := cache.Stats(); st.Hits == 0 {
		t.Fatalf("second scan missed the cache: %+v", st)
	}
}

// TestFooterCounts checks the version-4 counts against a count of the
// entries written, and that Write's Info equals the one Open reads.
func TestFooterCounts(t *testing.T) {
	want := fixtureEntries()
	// Add older versions of some cells: row i gets i%4 extra versions of
	// cf1:q0, so ranks up to 4 occur.
	for i := 0; i < 120; i++ {
		for v := 1; v <= i%4; v++ {
			e := memstore.Entry{Row: []byte(fmt.Sprintf("row%04d", i)), Family: "cf1", Qualifier: []byte("q0"),
				Timestamp: int64(1000 + i*10 - v), Seq: uint64(i*16 + 12 + v), Kind: mutation.SetCell, Value: []byte("old")}
			want = append(want, e)
		}
	}
	sort.Slice(want, func(i, j int) bool { return memstore.Compare(&want[i], &want[j]) < 0 })
	m := newMemManager()
	info := writeEntries(t, m, want, 512)
	r, err := Open(m, info.FooterRef(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Info(); fmt.Sprint(got) != fmt.Sprint(info) {
		t.Fatalf("Open's info\n%+v\nWrite's\n%+v", got, info)
	}
	exp := map[string]*FamilyStats{}
	ranks := map[string]int{}
	var tomb int64
	for i := range want {
		e := &want[i]
		fam := e.Family
		if e.Kind == mutation.DeleteRow {
			fam = ""
		}
		fs := exp[fam]
		if fs == nil {
			fs = &FamilyStats{Family: fam}
			exp[fam] = fs
		}
		fs.Entries++
		if e.Kind != mutation.SetCell {
			fs.Tombstones++
			fs.TombstoneBytes += int64(len(appendEntry(nil, e, true)))
			tomb++
			continue
		}
		if fs.Cells == 0 || e.Timestamp < fs.MinCellTimestamp {
			fs.MinCellTimestamp = e.Timestamp
		}
		fs.MaxCellTimestamp = max(fs.MaxCellTimestamp, e.Timestamp)
		fs.Cells++
		col := fam + "/" + string(e.Row) + "/" + string(e.Qualifier)
		ranks[col]++
		for k := 0; k < MaxRanks && k+1 < ranks[col]; k++ {
			fs.Beyond[k]++
		}
	}
	if !info.Counted || info.Tombstones != tomb || len(info.Families) != len(exp) {
		t.Fatalf("info counts %d tombstones over %d families (counted %v), want %d over %d", info.Tombstones, len(info.Families), info.Counted, tomb, len(exp))
	}
	for _, got := range info.Families {
		w := exp[got.Family]
		got.StoredBytes, got.RawBytes = 0, 0
		if w == nil || got != *w {
			t.Fatalf("family %q: got %+v want %+v", got.Family, got, w)
		}
	}
	if exp["cf1"].Beyond[0] == 0 || exp["cf1"].Beyond[2] == 0 || exp["cf1"].Beyond[3] != 0 {
		t.Fatalf("fixture does not exercise the ranks: %v", exp["cf1"].Beyond)
	}
}
