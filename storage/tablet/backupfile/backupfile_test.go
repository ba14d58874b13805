package backupfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
)

func testEntries(n int) []memstore.Entry {
	var out []memstore.Entry
	for i := range n {
		row := []byte(fmt.Sprintf("row%04d", i))
		if i%7 == 0 {
			out = append(out, memstore.Entry{Row: row, Kind: mutation.DeleteRow, Timestamp: 5, Seq: uint64(1000 + i)})
		}
		out = append(out,
			memstore.Entry{Row: row, Family: "cf", Qualifier: []byte("q"), Timestamp: 20, Seq: uint64(i + 2), Kind: mutation.SetCell, Value: bytes.Repeat([]byte{byte(i)}, i%50)},
			memstore.Entry{Row: row, Family: "cf", Qualifier: []byte("q"), Timestamp: 10, Seq: uint64(i + 1), Kind: mutation.SetCell, Value: []byte("old")},
			memstore.Entry{Row: row, Family: "cf", Qualifier: []byte("r"), Timestamp: 3, End: 9, Seq: uint64(i + 3), Kind: mutation.DeleteColumn},
			memstore.Entry{Row: row, Family: "sum", Qualifier: []byte("n"), Timestamp: -4, Seq: uint64(i + 4), Kind: mutation.MergeCell, Value: []byte{0, 0, 0, 0, 0, 0, 0, 1}})
	}
	return out
}

// writeData encodes entries as a data file in chunks of about chunkBytes.
func writeData(t testing.TB, es []memstore.Entry, chunkBytes int) ([]byte, *spb.BackupManifestFile) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewDataWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var c Chunk
	for i := range es {
		c.Add(&es[i])
		if c.Len() >= chunkBytes {
			if err := w.WriteChunk(c.Bytes()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c.Count() > 0 {
		if err := w.WriteChunk(c.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes(), &spb.BackupManifestFile{Path: DataPath(0, 0), Size: w.Size(), Crc32C: w.CRC(), Entries: w.Entries()}
}

// readData reads a data file back through an EntryIterator, checked
// against f.
func readData(b []byte, f *spb.BackupManifestFile) ([]memstore.Entry, error) {
	r, err := NewDataReader(bytes.NewReader(b), f.Path)
	if err != nil {
		return nil, err
	}
	it := NewEntryIterator(func() ([]byte, error) {
		p, err := r.Next()
		if err == io.EOF {
			if cerr := r.Check(f); cerr != nil {
				return nil, cerr
			}
		}
		return p, err
	})
	var out []memstore.Entry
	for it.First(); it.Valid(); it.Next() {
		out = append(out, it.Entry().Clone())
	}
	return out, it.Err()
}

func sameEntries(a, b []memstore.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if memstore.Compare(&x, &y) != 0 || x.Kind != y.Kind || x.End != y.End || !bytes.Equal(x.Value, y.Value) {
			return false
		}
	}
	return true
}

func TestDataRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n          int
		chunkBytes int
	}{
		{"empty", 0, 100},
		{"one chunk", 20, 1 << 20},
		{"many chunks", 300, 200},
		{"a chunk per entry", 30, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := testEntries(tc.n)
			b, f := writeData(t, es, tc.chunkBytes)
			got, err := readData(b, f)
			if err != nil {
				t.Fatal(err)
			}
			if !sameEntries(got, es) || f.Entries != int64(len(es)) {
				t.Fatalf("read %d entries back, wrote %d (manifest %d)", len(got), len(es), f.Entries)
			}
		})
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := &spb.BackupManifest{Name: "b", SourceTable: "t", CreateTimeMicros: 1, ExpireTimeMicros: 2,
		Schema: &pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf", MaxVersions: 2}}},
		Tablets: []*spb.BackupManifestTablet{
			{EndRow: []byte("m"), Files: []*spb.BackupManifestFile{{Path: DataPath(0, 0), Size: 12, Crc32C: 7, Entries: 3}}},
			{StartRow: []byte("m")},
		}}
	var buf bytes.Buffer
	if err := WriteManifest(&buf, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(bytes.NewReader(buf.Bytes()), ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, m) {
		t.Fatalf("manifest read back as %v, want %v", got, m)
	}
}

// TestVersionRefused: a manifest or data file of another format version
// is refused with ErrVersion, naming the file and both versions.
func TestVersionRefused(t *testing.T) {
	var mb bytes.Buffer
	if err := WriteManifest(&mb, &spb.BackupManifest{Schema: &pb.TableSchema{Name: "t"}, Tablets: []*spb.BackupManifestTablet{{}}}); err != nil {
		t.Fatal(err)
	}
	db, _ := writeData(t, testEntries(3), 100)
	for _, tc := range []struct {
		name string
		b    []byte
		read func([]byte) error
	}{
		{"MANIFEST", mb.Bytes(), func(b []byte) error { _, err := ReadManifest(bytes.NewReader(b), "MANIFEST"); return err }},
		{"t00000/f00000.data", db, func(b []byte) error { _, err := NewDataReader(bytes.NewReader(b), "t00000/f00000.data"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(tc.b)
			binary.LittleEndian.PutUint32(b[8:], FormatVersion+1)
			err := tc.read(b)
			if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), "version 2") {
				t.Fatalf("reading version %d: %v, want ErrVersion naming %s", FormatVersion+1, err, tc.name)
			}
		})
	}
}

// TestCorruptData: every truncation and every flipped byte of a data file
// (and of a manifest) is an error naming the file and an offset at or
// before the damage, never a panic and never a silent success.
func TestCorruptData(t *testing.T) {
	es := testEntries(40)
	b, f := writeData(t, es, 300)
	for cut := 0; cut < len(b); cut++ {
		_, err := readData(b[:cut], f)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != f.Path || ce.Offset > int64(cut) {
			t.Fatalf("data file cut at %d of %d: %v, want a CorruptError naming %s at or before %d", cut, len(b), err, f.Path, cut)
		}
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x41
		_, err := readData(d, f)
		if err == nil {
			t.Fatalf("byte %d flipped: read without an error", i)
		}
		var ce *CorruptError
		if errors.As(err, &ce) && (ce.File != f.Path || ce.Offset > int64(i)) {
			t.Fatalf("byte %d flipped: %v names %s at %d", i, err, ce.File, ce.Offset)
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	var mb bytes.Buffer
	if err := WriteManifest(&mb, &spb.BackupManifest{Schema: &pb.TableSchema{Name: "t"}, Tablets: []*spb.BackupManifestTablet{{Files: []*spb.BackupManifestFile{f}}}}); err != nil {
		t.Fatal(err)
	}
	m := mb.Bytes()
	for cut := 0; cut < len(m); cut++ {
		_, err := ReadManifest(bytes.NewReader(m[:cut]), "MANIFEST")
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != "MANIFEST" || ce.Offset > int64(cut) {
			t.Fatalf("manifest cut at %d: %v", cut, err)
		}
	}
	if _, err := ReadManifest(bytes.NewReader(append(bytes.Clone(m), 0)), "MANIFEST"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("manifest with a byte after it: %v", err)
	}
}

// TestEntryOrder: entries out of order, or repeated, end the iterator with
// an error naming the chunk.
func TestEntryOrder(t *testing.T) {
	es := testEntries(5)
	es[3], es[4] = es[4], es[3]
	var c Chunk
	for i := range es {
		c.Add(&es[i])
	}
	chunks := [][]byte{c.Bytes()}
	it := NewEntryIterator(func() ([]byte, error) {
		if len(chunks) == 0 {
			return nil, io.EOF
		}
		p := chunks[0]
		chunks = chunks[1:]
		return p, nil
	})
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := it.Err(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "chunk 1") || n != 0 {
		t.Fatalf("out of order: %d entries, err %v", n, err)
	}
}

func TestValidPath(t *testing.T) {
	for p, want := range map[string]bool{
		DataPath(3, 4): true, "a/b": true, "": false, "/etc/passwd": false, "../x": false, "a//b": false, "a/./b": false, ManifestName: false, `a\b`: false,
	} {
		if got := ValidPath(p); got != want {
			t.Errorf("ValidPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzRead: any bytes read as a data file or a manifest give entries or an
// error of the format (ErrCorrupt, ErrVersion), never a panic. `go test`
// runs the seeds; `go test -fuzz FuzzRead` explores.
func FuzzRead(f *testing.F) {
	b, mf := writeData(f, testEntries(30), 200)
	f.Add(b)
	var mb bytes.Buffer
	if err := WriteManifest(&mb, &spb.BackupManifest{Schema: &pb.TableSchema{Name: "t"}, Tablets: []*spb.BackupManifestTablet{{Files: []*spb.BackupManifestFile{mf}}}}); err != nil {
		f.Fatal(err)
	}
	f.Add(mb.Bytes())
	f.Add([]byte("BHBKDATA\x01\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := readData(in, mf); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("data file: %v", err)
		}
		if _, err := ReadManifest(bytes.NewReader(in), ManifestName); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("manifest: %v", err)
		}
	})
}
