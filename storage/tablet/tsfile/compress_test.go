package tsfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

const repeatedText = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. "

// MixedValue returns an n-byte value whose first half is repeated text and
// whose second half is random bytes: the data of the compression target.
func mixedValue(rng *rand.Rand, n int) []byte {
	v := make([]byte, n)
	half := n / 2
	for i := 0; i < half; i++ {
		v[i] = repeatedText[i%len(repeatedText)]
	}
	rng.Read(v[half:])
	return v
}

// mixedEntries is n rows of one family each holding one cell of a
// valueLen-byte mixed value, plus a few tombstones of each kind.
func mixedEntries(rng *rand.Rand, n, valueLen int, families ...string) []memstore.Entry {
	var out []memstore.Entry
	for i := 0; i < n; i++ {
		row := []byte(fmt.Sprintf("user%08d", i))
		fam := families[i%len(families)]
		out = append(out, memstore.Entry{Row: row, Family: fam, Qualifier: []byte("field0"), Timestamp: int64(i + 1), Seq: uint64(i + 1),
			Kind: mutation.SetCell, Value: mixedValue(rng, valueLen)})
		if i%97 == 5 {
			out = append(out, memstore.Entry{Row: row, Kind: mutation.DeleteRow, Timestamp: 1, Seq: uint64(n + i)})
		}
		if i%89 == 7 {
			out = append(out, memstore.Entry{Row: row, Family: fam, Kind: mutation.DeleteFamily, Timestamp: 0, Seq: uint64(2*n + i)})
		}
	}
	return out
}

func writeWith(t testing.TB, mgr blockstore.Manager, entries []memstore.Entry, pageSize int, codec func(string) Compression) Info {
	t.Helper()
	ms := memstore.New()
	ms.Apply(entries)
	info, err := Write(t.Context(), mgr, ms.NewIterator(), WriterOptions{TabletID: "t1", PageSize: pageSize, Compression: codec})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// pageCodecs counts a family's stored pages by their codec byte.
func pageCodecs(t *testing.T, r *Reader, family string) map[byte]int {
	t.Helper()
	m := r.meta(family)
	idx, err := r.index(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.readBlock(m.data, m.dataSize)
	if err != nil {
		t.Fatal(err)
	}
	out := map[byte]int{}
	for _, p := range idx {
		out[b[p.off]]++
	}
	return out
}

// TestCompressionPerFamily writes one file whose families use each codec
// and reads it back whole, by seeks and from the cache; each family's
// pages carry its codec, and an incompressible family's pages stay raw.
func TestCompressionPerFamily(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	entries := mixedEntries(rng, 1200, 1000, "n", "s", "z", "r")
	for i := range entries { // family r: random values only
		if entries[i].Family == "r" && entries[i].Kind == mutation.SetCell {
			rng.Read(entries[i].Value)
		}
	}
	codec := func(f string) Compression {
		return map[string]Compression{"n": CompressionNone, "s": CompressionSnappy, "z": CompressionZstd, "r": CompressionZstd}[f]
	}
	mgr := newStore(t)
	info := writeWith(t, mgr, entries, 0, codec)
	cache := blockcache.New(blockcache.Options{Capacity: 8 << 20})
	r, err := Open(mgr, info.FooterRef(), ReaderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Version() != plainFormatVersion {
		t.Fatalf("version %d, want %d (no operands)", r.Version(), plainFormatVersion)
	}
	for _, tc := range []struct {
		family string
		want   byte
	}{{"n", codecRaw}, {"s", codecSnappy}, {"z", codecZstd}, {"r", codecRaw}} {
		got := pageCodecs(t, r, tc.family)
		if len(got) != 1 || got[tc.want] == 0 {
			t.Errorf("family %q: pages by codec %v, want all %v", tc.family, got, tc.want)
		}
		m := r.meta(tc.family)
		t.Logf("family %q: %d pages, %d bytes stored, %d raw (%.2f)", tc.family, m.pages, m.dataSize, m.rawSize, float64(m.dataSize)/float64(m.rawSize))
	}
	ms := memstore.New()
	ms.Apply(entries)
	var want []memstore.Entry
	src := ms.NewIterator()
	for src.First(); src.Valid(); src.Next() {
		want = append(want, src.Entry().Clone())
	}
	for pass := 0; pass < 2; pass++ {
		it := r.NewIterator(nil, true)
		i := 0
		for it.First(); it.Valid(); it.Next() {
			if i >= len(want) || !sameEntry(it.Entry(), &want[i]) {
				t.Fatalf("pass %d entry %d: got %v want %v", pass, i, it.Entry(), &want[i])
			}
			i++
		}
		if err := it.Err(); err != nil || i != len(want) {
			t.Fatalf("pass %d: read %d of %d: %v", pass, i, len(want), err)
		}
		it.Close()
	}
	if st := cache.Stats(); st.Hits == 0 {
		t.Fatalf("no cache hits on the second scan: %+v", st)
	}
	for _, k := range rng.Perm(len(want))[:200] {
		it := r.NewIterator([]string{want[k].Family}, false)
		it.SeekGE(&want[k])
		if !it.Valid() || !sameEntry(it.Entry(), &want[k]) {
			t.Fatalf("seek %v: got %v (%v)", &want[k], it.Entry(), it.Err())
		}
		it.Close()
	}
	stored, raw := r.DataBytes()
	if stored >= raw {
		t.Fatalf("data blocks %d bytes stored for %d raw", stored, raw)
	}
}

// compressedPage returns the data block and one compressed page of a file
// written with codec c.
func compressedPage(t *testing.T, r *Reader, family string, c byte) (blockstore.BlockID, indexEntry) {
	t.Helper()
	m := r.meta(family)
	idx, err := r.index(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.readBlock(m.data, m.dataSize)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range idx[1:] {
		if b[p.off] == c {
			return m.data, p
		}
	}
	t.Fatalf("no %v page in family %q", c, family)
	return 0, indexEntry{}
}

// TestCorruptCompressedPage flips a byte of a compressed page on disk
// (real block store): the read fails with a CorruptionError naming the
// data block, the TSFile and the page's offset, found by the checksum
// before any decompression. With the checksum made to match again, the
// decompressor's failure is a CorruptionError as well.
func TestCorruptCompressedPage(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for _, c := range []Compression{CompressionSnappy, CompressionZstd} {
		codec := map[Compression]byte{CompressionSnappy: codecSnappy, CompressionZstd: codecZstd}[c]
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			dir := t.TempDir()
			mgr, _, err := blockstore.Open(blockstore.Options{Dirs: []string{dir}})
			if err != nil {
				t.Fatal(err)
			}
			defer mgr.Close()
			info := writeWith(t, mgr, mixedEntries(rng, 300, 1000, "cf"), 8192, func(string) Compression { return c })
			clean, err := Open(mgr, info.FooterRef(), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer clean.Close()
			block, p := compressedPage(t, clean, "cf", codec)
			content, err := clean.readBlock(block, -1)
			if err != nil {
				t.Fatal(err)
			}
			path, base := onDisk(t, dir, content)
			at := p.off + 4 + rng.Int63n(p.length-8) // inside the payload
			flipByte(t, path, base+at)
			r, err := Open(mgr, info.FooterRef(), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = readAll(r, nil)
			r.Close()
			flipByte(t, path, base+at)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Block != block || ce.Offset != p.off || ce.File != info.FooterRef() {
				t.Fatalf("byte %d of page at %d flipped: err = %v, want a CorruptionError of block %s at %d", at, p.off, err, block, p.off)
			}
			t.Logf("flipped byte %d: %v", at, err)

			// A payload the decompressor refuses, under a matching checksum.
			page := bytes.Clone(content[p.off : p.off+p.length])
			for i := 4; i < len(page)-4; i++ {
				page[i] ^= 0xff
			}
			n := len(page) - 4
			binary.LittleEndian.PutUint32(page[n:], crc(page[:n]))
			if _, err := checkPage(FormatVersion, block, p.off, page, p.count); !errors.As(err, &ce) || ce.Offset < p.off || ce.Offset >= p.off+p.length {
				t.Fatalf("garbled %v payload: err = %v, want a CorruptionError inside the page", c, err)
			}
		})
	}
}

// TestPageHeaderBounds: a page header stating an absurd or wrong raw
// length is corruption, refused before allocating.
func TestPageHeaderBounds(t *testing.T) {
	body := append(bytes.Repeat([]byte(repeatedText), 20), 1, 0, 0, 0)
	for c, codec := range map[Compression]byte{CompressionDefault: codecSnappy, CompressionNone: codecRaw, CompressionSnappy: codecSnappy, CompressionZstd: codecZstd} {
		page, _, err := encodePage(nil, nil, body, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePage(1, 0, page)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%v: round trip: %v", c, err)
		}
		if page[0] != codec {
			t.Fatalf("%v: page stored with codec byte %d, want %d", c, page[0], codec)
		}
		for _, raw := range []uint64{0, 3, uint64(len(body)) - 1, uint64(len(body)) + 1, MaxPageBytes + 1, 1 << 62} {
			hdr := binary.AppendUvarint([]byte{codec}, raw)
			_, k := binary.Uvarint(page[1:])
			bad := append(hdr, page[1+k:len(page)-4]...)
			bad = binary.LittleEndian.AppendUint32(bad, crc(bad))
			var ce *CorruptionError
			if _, err := decodePage(1, 0, bad); !errors.As(err, &ce) {
				t.Fatalf("%v: raw length %d stated for %d: err = %v, want corruption", c, raw, len(body), err)
			}
		}
	}
	// An incompressible body is stored raw under any codec.
	rnd := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(rnd)
	for _, c := range []Compression{CompressionSnappy, CompressionZstd} {
		page, _, _ := encodePage(nil, nil, rnd, c)
		if page[0] != codecRaw {
			t.Fatalf("%v: random page stored with codec byte %d", c, page[0])
		}
	}
	if _, _, err := encodePage(nil, nil, rnd, Compression(9)); err == nil {
		t.Fatal("unknown codec accepted")
	}
}

// FuzzDecodePage feeds arbitrary stored pages (checksum fixed up, so the
// decompressors see the bytes): no panic, and any body returned has the
// length the header states.
func FuzzDecodePage(f *testing.F) {
	body := append(bytes.Repeat([]byte(repeatedText), 10), 3, 0, 0, 0)
	for _, c := range []Compression{CompressionNone, CompressionSnappy, CompressionZstd} {
		page, _, _ := encodePage(nil, nil, body, c)
		f.Add(page[:len(page)-4])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		page := binary.LittleEndian.AppendUint32(bytes.Clone(b), crc(b))
		got, err := decodePage(1, 0, page)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		raw, _ := binary.Uvarint(page[1:])
		if uint64(len(got)) != raw {
			t.Fatalf("body of %d bytes, header says %d", len(got), raw)
		}
	})
}

// TestCompressionRatioTarget: on 1000-byte values half repeated text and
// half random, a snappy TSFile is at most 0.65 times the size of the same
// data uncompressed (zstd too). The scan figures are the benchmark's.
func TestCompressionRatioTarget(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	entries := mixedEntries(rand.New(rand.NewSource(seed)), 4000, 1000, "cf")
	mgr := newMemManager()
	size := map[Compression]int64{}
	for _, c := range []Compression{CompressionNone, CompressionSnappy, CompressionZstd} {
		size[c] = writeWith(t, mgr, entries, 0, func(string) Compression { return c }).Size
	}
	for _, c := range []Compression{CompressionSnappy, CompressionZstd} {
		ratio := float64(size[c]) / float64(size[CompressionNone])
		t.Logf("%v: %d bytes, %.3f of none's %d", c, size[c], ratio, size[CompressionNone])
		if ratio > 0.65 {
			t.Errorf("%v stores %.3f of the raw bytes, want at most 0.65", c, ratio)
		}
	}
}

// TestShortReadOfReusedBuffer: a page read that comes back short (the
// block is shorter than the index says) is corruption, also when the read
// buffer is a reused one that held the very same page before.
func TestShortReadOfReusedBuffer(t *testing.T) {
	for len(readBufs) > 0 {
		<-readBufs
	}
	mgr := newMemManager()
	var entries []memstore.Entry
	for _, e := range mixedEntries(rand.New(rand.NewSource(1)), 200, 1000, "cf") {
		if e.Family == "cf" { // no row tombstones: one data block
			entries = append(entries, e)
		}
	}
	info := writeWith(t, mgr, entries, 0, nil)
	first := func() error {
		r, err := Open(mgr, info.FooterRef(), ReaderOptions{})
		if err != nil {
			return err
		}
		defer r.Close()
		it := r.NewIterator([]string{"cf"}, false)
		defer it.Close()
		it.First()
		return it.Err()
	}
	if err := first(); err != nil { // page 0's buffer goes to the free list
		t.Fatal(err)
	}
	r, err := Open(mgr, info.FooterRef(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := r.meta("cf").data
	r.Close()
	if len(readBufs) == 0 {
		t.Fatal("page 0 was not read into a reusable buffer (not compressed?)")
	}
	mgr.blocks[data] = mgr.blocks[data][:10]
	var ce *CorruptionError
	if err := first(); !errors.As(err, &ce) || ce.Block != data || ce.Offset != 0 {
		t.Fatalf("reading page 0 of a block cut to 10 bytes: %v, want a CorruptionError at offset 0 of block %s", err, data)
	}
}
