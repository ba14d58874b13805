package tsfile

import (
	"encoding/binary"
	"fmt"
	"testing"

	"bighive/storage/memstore"
	"bighive/storage/mutation"
)

// TestOperands checks that MergeCell operands keep their values and each
// its own entry through a TSFile, that such a file is of FormatVersion
// while one without operands stays at plainFormatVersion, and that the
// footer counts a cell's operands as one version.
func TestOperands(t *testing.T) {
	be := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	op := func(q string, ts int64, seq uint64, v int64) memstore.Entry {
		return memstore.Entry{Row: []byte("r"), Family: "agg", Qualifier: []byte(q), Timestamp: ts, Seq: seq, Kind: mutation.MergeCell, Value: be(v)}
	}
	tests := []struct {
		name    string
		entries []memstore.Entry
		version int
		beyond0 int64 // cells not the newest version of their column
	}{
		{"operands", []memstore.Entry{op("a", 10, 3, 1), op("a", 10, 4, 2), op("a", 10, 5, -7), op("a", 9, 6, 4), op("b", 10, 2, 5)}, FormatVersion, 1},
		{"plain", []memstore.Entry{{Row: []byte("r"), Family: "agg", Qualifier: []byte("a"), Timestamp: 10, Seq: 1, Kind: mutation.SetCell, Value: []byte("v")}}, plainFormatVersion, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mgr := newStore(t)
			info := writeEntries(t, mgr, tc.entries, 64)
			r, err := Open(mgr, info.FooterRef(), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Version() != tc.version {
				t.Fatalf("version %d, want %d", r.Version(), tc.version)
			}
			var got []string
			it := r.NewIterator(nil, true)
			for it.First(); it.Valid(); it.Next() {
				e := it.Entry()
				got = append(got, fmt.Sprintf("%s %s@%d/%d=%x", e.Kind, e.Qualifier, e.Timestamp, e.Seq, e.Value))
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.entries) {
				t.Fatalf("read %d entries %v, wrote %d", len(got), got, len(tc.entries))
			}
			ms := memstore.New()
			ms.Apply(tc.entries)
			i := 0
			mi := ms.NewIterator()
			for mi.First(); mi.Valid(); mi.Next() {
				e := mi.Entry()
				if want := fmt.Sprintf("%s %s@%d/%d=%x", e.Kind, e.Qualifier, e.Timestamp, e.Seq, e.Value); got[i] != want {
					t.Errorf("entry %d = %s, want %s", i, got[i], want)
				}
				i++
			}
			var fs FamilyStats
			for _, f := range r.Info().Families {
				if f.Family == "agg" {
					fs = f
				}
			}
			if fs.Cells != int64(len(tc.entries)) || fs.Tombstones != 0 {
				t.Errorf("counts %+v: want %d cells, no tombstones", fs, len(tc.entries))
			}
			if fs.Beyond[0] != tc.beyond0 {
				t.Errorf("beyond[0] = %d, want %d", fs.Beyond[0], tc.beyond0)
			}
		})
	}
}
