package tsfile

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
)

// onDisk finds where a block's bytes lie in the store's data files.
func onDisk(t *testing.T, dir string, content []byte) (string, int64) {
	t.Helper()
	var path string
	var off int64 = -1
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.HasSuffix(p, ".metadata") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if i := bytes.Index(b, content); i >= 0 && off < 0 {
			path, off = p, int64(i)
		}
		return nil
	})
	if off < 0 {
		t.Fatalf("block contents not found under %s", dir)
	}
	return path, off
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// readAll scans every entry and does point seeks for some rows.
func readAll(r *Reader, rows [][]byte) ([]memstore.Entry, error) {
	var out []memstore.Entry
	it := r.NewIterator(nil, true)
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		out = append(out, it.Entry().Clone())
	}
	if err := it.Err(); err != nil {
		return out, err
	}
	for _, row := range rows {
		if _, err := r.MayContainRow(row); err != nil {
			return out, err
		}
	}
	return out, nil
}

// TestCorruptionNamesBlockAndOffset flips bytes of every block kind on
// disk: each read fails with a CorruptionError naming the block and the
// start of the damaged page, or, never, returns a different answer.
func TestCorruptionNamesBlockAndOffset(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	mgr, _, err := blockstore.Open(blockstore.Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	entries := randomEntries(rng, 600, 200)
	info := writeEntries(t, mgr, entries, 4096)
	clean, err := Open(mgr, info.FooterRef(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clean.Close()
	rows := [][]byte{info.MinRow, info.MaxRow}

	type target struct {
		id    blockstore.BlockID
		kind  string
		pages []indexEntry // data blocks only
	}
	var targets []target
	for i := range clean.footer.data {
		m := &clean.footer.data[i]
		idx, err := clean.index(m)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target{m.data, "data", idx}, target{m.index, "index", nil})
	}
	targets = append(targets, target{clean.footer.bloom, "bloom", nil}, target{info.Footer, "footer", nil})

	for _, tg := range targets {
		content, err := clean.readBlock(tg.id, -1)
		if err != nil {
			t.Fatal(err)
		}
		path, base := onDisk(t, dir, content)
		for k := 0; k < 6; k++ {
			at := int64(rng.Intn(len(content)))
			flipByte(t, path, base+at)
			r, err := Open(mgr, info.FooterRef(), ReaderOptions{})
			var got []memstore.Entry
			if err == nil {
				got, err = readAll(r, rows)
				r.Close()
			}
			flipByte(t, path, base+at) // restore
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s block %s, byte %d flipped: err = %v, want a CorruptionError", tg.kind, tg.id, at, err)
			}
			if ce.Block != tg.id {
				t.Fatalf("%s block %s, byte %d flipped: error names block %s: %v", tg.kind, tg.id, at, ce.Block, err)
			}
			want := int64(0)
			for _, p := range tg.pages {
				if at >= p.off && at < p.off+p.length {
					want = p.off
				}
			}
			if ce.Offset != want {
				t.Fatalf("%s block %s, byte %d flipped: error names offset %d, want %d: %v", tg.kind, tg.id, at, ce.Offset, want, err)
			}
			// What was returned before the error is a prefix of the truth.
			for i := range got {
				if !sameEntry(&got[i], &entries[i]) {
					t.Fatalf("%s block %s, byte %d flipped: wrong entry %d before the error: %v", tg.kind, tg.id, at, i, &got[i])
				}
			}
		}
	}
}

// FuzzTSFileReader replaces one block of a valid TSFile by arbitrary bytes
// (with fixCRC, the block's trailing checksum is made to match, so the
// decoders behind it are exercised) and reads: no panic, no hang.
func FuzzTSFileReader(f *testing.F) {
	base := newMemManager()
	rng := rand.New(rand.NewSource(7))
	info := writeEntries(f, base, randomEntries(rng, 200, 40), 512)
	ids := info.Blocks
	for i, id := range ids {
		f.Add(base.blocks[id], uint8(i), false)
		f.Add(base.blocks[id][:len(base.blocks[id])/2], uint8(i), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, fixCRC bool) {
		m := newMemManager()
		for id, b := range base.blocks {
			m.blocks[id] = b
		}
		id := ids[int(which)%len(ids)]
		data = bytes.Clone(data)
		if fixCRC && len(data) >= 4 {
			n := len(data) - 4
			c := crc(data[:n])
			data[n], data[n+1], data[n+2], data[n+3] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
		}
		m.blocks[id] = data
		r, err := Open(m, info.FooterRef(), ReaderOptions{})
		if err != nil {
			return
		}
		defer r.Close()
		readAll(r, [][]byte{info.MinRow, []byte("row00010"), nil})
		for _, fam := range []string{"a", "b", "zz"} {
			it := r.NewIterator([]string{fam}, false)
			it.SeekGE(memstore.RowStart([]byte("row00030")))
			for n := 0; it.Valid() && n < 50; n++ {
				it.Next()
			}
			it.Close()
		}
	})
}
