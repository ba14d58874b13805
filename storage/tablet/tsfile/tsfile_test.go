package tsfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

func newStore(t testing.TB) blockstore.Manager {
	t.Helper()
	m, _, err := blockstore.Open(blockstore.Options{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomEntries returns sorted, distinct entries over a few families.
func randomEntries(rng *rand.Rand, n, valueLen int) []memstore.Entry {
	seen := map[string]bool{}
	var out []memstore.Entry
	for len(out) < n {
		e := memstore.Entry{
			Row:       []byte(fmt.Sprintf("row%05d", rng.Intn(n/3+1))),
			Family:    []string{"a", "b", "c"}[rng.Intn(3)],
			Qualifier: []byte(fmt.Sprintf("q%d", rng.Intn(4))),
			Timestamp: int64(rng.Intn(100)),
			Kind:      mutation.SetCell,
		}
		switch rng.Intn(20) {
		case 0:
			e.Kind, e.End = mutation.DeleteColumn, e.Timestamp+int64(rng.Intn(5))
		case 1:
			e.Kind, e.Qualifier = mutation.DeleteFamily, nil
		case 2:
			e.Kind, e.Family, e.Qualifier = mutation.DeleteRow, "", nil
		default:
			e.Value = make([]byte, rng.Intn(valueLen+1))
			rng.Read(e.Value)
			if len(e.Value) == 0 {
				e.Value = nil
			}
		}
		k := fmt.Sprintf("%s|%s|%s|%s|%d|%d", e.Kind, e.Row, e.Family, e.Qualifier, e.Timestamp, e.End)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return memstore.Compare(&out[i], &out[j]) < 0 })
	return out
}

func writeEntries(t testing.TB, mgr blockstore.Manager, entries []memstore.Entry, pageSize int) Info {
	t.Helper()
	ms := memstore.New()
	ms.Apply(entries)
	info, err := Write(context.Background(), mgr, ms.NewIterator(), WriterOptions{TabletID: "t1", PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func sameEntry(a, b *memstore.Entry) bool {
	return memstore.Compare(a, b) == 0 && a.Family == b.Family && bytes.Equal(a.Value, b.Value) && a.Kind == b.Kind
}

func TestRoundTripAndSeek(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	mgr := newStore(t)
	entries := randomEntries(rng, 3000, 300)
	info := writeEntries(t, mgr, entries, 2048)
	if info.Entries != int64(len(entries)) || len(info.Blocks) != 2*4+2 {
		t.Fatalf("info: %d entries, %d blocks", info.Entries, len(info.Blocks))
	}
	cache := blockcache.New(blockcache.Options{Capacity: 1 << 20})
	r, err := Open(mgr, info.FooterRef(), ReaderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Info(); got.Size != info.Size || !bytes.Equal(got.MinRow, entries[0].Row) || !bytes.Equal(got.MaxRow, entries[len(entries)-1].Row) {
		t.Fatalf("reopened info %+v vs written %+v", got, info)
	}
	it := r.NewIterator(nil, true)
	i := 0
	for it.First(); it.Valid(); it.Next() {
		if i >= len(entries) || !sameEntry(it.Entry(), &entries[i]) {
			t.Fatalf("entry %d: got %v want %v", i, it.Entry(), &entries[i])
		}
		i++
	}
	if it.Err() != nil || i != len(entries) {
		t.Fatalf("read %d of %d entries: %v", i, len(entries), it.Err())
	}
	it.Close()
	if st := r.Stats(); st.ReadAheadPages == 0 {
		t.Fatalf("scan did no read-ahead: %+v", st)
	}
	// A second scan is served by the cache.
	before := r.Stats().PagesRead
	it = r.NewIterator(nil, true)
	for it.First(); it.Valid(); it.Next() {
	}
	it.Close()
	if after := r.Stats().PagesRead; after != before {
		t.Fatalf("warm scan read %d pages", after-before)
	}

	// Seeks against the sorted slice, with a family subset.
	fams := []string{"b"}
	var sub []memstore.Entry
	for _, e := range entries {
		if e.Family == "" || e.Family == "b" {
			sub = append(sub, e)
		}
	}
	it = r.NewIterator(fams, false)
	defer it.Close()
	for k := 0; k < 300; k++ {
		key := memstore.RowStart([]byte(fmt.Sprintf("row%05d", rng.Intn(1100))))
		if k%2 == 0 {
			key = &entries[rng.Intn(len(entries))]
		}
		j := sort.Search(len(sub), func(j int) bool { return memstore.Compare(&sub[j], key) >= 0 })
		it.SeekGE(key)
		if j == len(sub) {
			if it.Valid() {
				t.Fatalf("seek %v: got %v, want end", key, it.Entry())
			}
			continue
		}
		if !it.Valid() || !sameEntry(it.Entry(), &sub[j]) {
			t.Fatalf("seek %v: got %v want %v (err %v)", key, it.Valid(), &sub[j], it.Err())
		}
	}
}

func TestWriteEmpty(t *testing.T) {
	mgr := newStore(t)
	_, err := Write(context.Background(), mgr, memstore.New().NewIterator(), WriterOptions{})
	if !errors.Is(err, ErrEmpty) {
		t.Fatalf("err = %v", err)
	}
	if ids, _ := mgr.AllBlockIDs(); len(ids) != 0 {
		t.Fatalf("empty write left blocks %v", ids)
	}
}

// TestBloomFalsePositives measures the rate at the planned size: a TSFile
// from a 64 MiB buffer of 1000-byte values holds about 64k rows.
func TestBloomFalsePositives(t *testing.T) {
	const n = 65536
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = hashRow([]byte(fmt.Sprintf("user%08d", i)))
	}
	f, err := parseBloom(buildBloom(hashes))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if !f.mayContain([]byte(fmt.Sprintf("user%08d", i))) {
			t.Fatalf("false negative for row %d", i)
		}
	}
	fp := 0
	const probes = 200000
	for i := 0; i < probes; i++ {
		if f.mayContain([]byte(fmt.Sprintf("absent%08d", i))) {
			fp++
		}
	}
	rate := float64(fp) / probes
	t.Logf("bloom: %d rows, %d bytes, false positives %.3f%%", n, len(f.bits), 100*rate)
	if rate > 0.01 {
		t.Fatalf("false-positive rate %.3f%% > 1%%", 100*rate)
	}
}

func TestBloomOnPointReads(t *testing.T) {
	mgr := newStore(t)
	rng := rand.New(rand.NewSource(1))
	info := writeEntries(t, mgr, randomEntries(rng, 2000, 10), 0)
	r, err := Open(mgr, info.FooterRef(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 1000; i++ {
		ok, err := r.MayContainRow([]byte(fmt.Sprintf("nope%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		_ = ok
	}
	ok, err := r.MayContainRow(info.MinRow)
	if err != nil || !ok {
		t.Fatalf("present row: %v %v", ok, err)
	}
	if st := r.Stats(); st.BloomNegatives < 950 {
		t.Fatalf("bloom answered only %d of 1000 absent rows", st.BloomNegatives)
	}
}
