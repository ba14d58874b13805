package tablet

import (
	"bytes"
	"testing"

	"bighive/storage/memstore"
)

// dumpRow logs the merged entries of row (on a model mismatch).
func dumpRow(t *testing.T, tb *Tablet, row []byte, fams []string) {
	s, _ := tb.snapshot()
	defer s.release()
	o := ReadOptions{Families: fams}
	it, _ := s.iterator(&o, nil, true)
	for it.SeekGE(memstore.RowStart(row)); it.Valid() && bytes.Equal(it.Entry().Row, row); it.Next() {
		t.Logf("  %v", it.Entry())
	}
	t.Logf("files %d standby %v", len(s.files), len(s.bufs))
}

// dumpFiles logs row's entries in every source.
func dumpFiles(t *testing.T, tb *Tablet, row []byte) {
	s, _ := tb.snapshot()
	defer s.release()
	for i, f := range s.files {
		it := f.r.NewIterator(nil, false)
		for it.First(); it.Valid(); it.Next() {
			if bytes.Equal(it.Entry().Row, row) {
				t.Logf(" file %d all: %v", i, it.Entry())
			}
		}
		it.Close()
		it = f.r.NewIterator([]string{"b"}, false)
		for it.SeekGE(memstore.RowStart(row)); it.Valid() && bytes.Equal(it.Entry().Row, row); it.Next() {
			t.Logf(" file %d seek b: %v", i, it.Entry())
		}
		it.Close()
	}
	for i, b := range s.bufs {
		for b.First(); b.Valid(); b.Next() {
			if bytes.Equal(b.Entry().Row, row) {
				t.Logf(" buf %d: %v", i, b.Entry())
			}
		}
	}
}
