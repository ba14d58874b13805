package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"bighive/storage/vfs"
)

// writeTestFile logs n records of value size vsize into one file, closes
// the log and returns the file's path, bytes and the records' offsets
// (plus the end offset).
func writeTestFile(t *testing.T, root string, n, vsize int) (string, []byte, []int64) {
	t.Helper()
	opts := testOptions(root)
	opts.MaxBatchBytes = 4 << 10
	opts.FileSize = 1 << 30
	l := openLog(t, opts)
	appendN(t, l, 0, n, vsize)
	pos := l.Position()
	closeLog(t, l)
	path := FilePath(root, pos)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	rep, err := ReplayFile(vfs.Default, path, func(r *Record) error {
		offs = append(offs, r.Offset)
		return nil
	})
	if err != nil || rep.Records != n || rep.End != int64(len(data)) {
		t.Fatalf("fresh file: %+v, %v", rep, err)
	}
	return path, data, append(offs, rep.End)
}

// TestTornTailEveryOffset cuts the file at every byte of its last records,
// both by truncation and by zeroing the rest of a pre-zeroed file: replay
// returns exactly the whole records before the cut and reports the rest
// as torn.
func TestTornTailEveryOffset(t *testing.T) {
	root := t.TempDir()
	const n, last = 40, 3
	path, data, offs := writeTestFile(t, root, n, 60)
	dir := t.TempDir()
	for cut := offs[n-last]; cut <= offs[n]; cut++ {
		for _, zeroed := range []bool{false, true} {
			// In a pre-zeroed file, cut-off zero bytes are still there.
			eff := cut
			for zeroed && eff < int64(len(data)) && data[eff] == 0 {
				eff++
			}
			whole := 0
			for whole < n && offs[whole+1] <= eff {
				whole++
			}
			b := append([]byte(nil), data[:cut]...)
			if zeroed {
				b = append(b, make([]byte, len(data)-int(cut)+8<<10)...)
			}
			p := filepath.Join(dir, filepath.Base(path))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got := 0
			rep, err := ReplayFile(vfs.Default, p, func(r *Record) error {
				checkRecord(t, r, got, 60)
				got++
				return nil
			})
			if err != nil {
				t.Fatalf("cut %d zeroed %v: %v", cut, zeroed, err)
			}
			wantTorn := eff != offs[whole]
			if got != whole || rep.Records != whole || rep.End != offs[whole] || rep.Torn != wantTorn {
				t.Fatalf("cut %d zeroed %v: %d records end %d torn %v; want %d end %d torn %v",
					cut, zeroed, got, rep.End, rep.Torn, whole, offs[whole], wantTorn)
			}
		}
	}
}

// TestOpenTruncatesTornTail: the owner's next Open cuts the torn tail off,
// and sequence numbers go on from the last whole record.
func TestOpenTruncatesTornTail(t *testing.T) {
	for _, tc := range []struct {
		back   int64
		zeroed bool // cut in a pre-zeroed file, else truncated
	}{{1, false}, {9, true}, {30, true}, {61, false}} {
		back := tc.back
		root := t.TempDir()
		const n = 20
		path, data, offs := writeTestFile(t, root, n, 60)
		cut := offs[n] - back
		b := append([]byte(nil), data[:cut]...)
		if tc.zeroed {
			b = append(b, make([]byte, 4096)...)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, testOptions(root))
		seqs := appendN(t, l, n-1, 1, 60)
		closeLog(t, l)
		if seqs[0] != n {
			t.Fatalf("back %d: first seq after repair %d, want %d", back, seqs[0], n)
		}
		if st, _ := os.Stat(path); st.Size() != offs[n-1] {
			t.Fatalf("back %d: repaired size %d, want %d", back, st.Size(), offs[n-1])
		}
		recs, rep := replayAll(t, vfs.Default, root)
		if len(recs) != n || rep.Torn() {
			t.Fatalf("back %d: %d records, torn %v", back, len(recs), rep.Torn())
		}
		for k := range recs {
			checkRecord(t, &recs[k], k, 60)
		}
	}
}

func TestCorruption(t *testing.T) {
	const n, target = 200, 50
	reseq := func(b []byte, off, end int64) {
		// Rewrite the record at off with a wrong sequence number and a
		// correct checksum.
		var r Record
		if err := decodePayload(b[off+frameHeaderLen:end], &r); err != nil {
			t.Fatal(err)
		}
		h, _, _, _ := decodeHeader(b)
		frame := appendRecord(nil, h.frames(), r.Seq+5, r.Timestamp, r.TabletID, &r.Mutation)
		copy(b[off:], frame)
	}
	tests := []struct {
		name    string
		corrupt func(b []byte, offs []int64)
		offset  func(offs []int64) int64 // -1: no error, a torn tail
		is      error
	}{
		{"payload bit flip", func(b []byte, o []int64) { b[o[target]+20] ^= 0x10 }, at(target), ErrChecksum},
		{"checksum flip", func(b []byte, o []int64) { b[o[target]+5] ^= 1 }, at(target), ErrChecksum},
		{"length grows", func(b []byte, o []int64) { b[o[target]] += 3 }, at(target), ErrChecksum},
		{"length absurd", func(b []byte, o []int64) { b[o[target]+3] = 0xff }, at(target), ErrBadRecord},
		{"zeroed frame header", func(b []byte, o []int64) { clear(b[o[target] : o[target]+frameHeaderLen]) }, at(target), ErrBadRecord},
		{"zeroed record", func(b []byte, o []int64) { clear(b[o[target]:o[target+1]]) }, at(target), ErrBadRecord},
		{"wrong seq", func(b []byte, o []int64) { reseq(b, o[target], o[target+1]) }, at(target), ErrBadRecord},
		{"header flip", func(b []byte, o []int64) { b[20] ^= 1 }, at(-1), ErrBadHeader},
		{"bad magic", func(b []byte, o []int64) { b[0] = 'X' }, at(-1), ErrBadHeader},
		// Within the last flush's window a bad record is a torn tail.
		{"flip in last record", func(b []byte, o []int64) { b[o[n-1]+20] ^= 1 }, func([]int64) int64 { return -1 }, nil},
	}
	root := t.TempDir()
	path, data, offs := writeTestFile(t, root, n, 60)
	if offs[n]-offs[target] < 8<<10 {
		t.Fatalf("test file too small: %d bytes after the target", offs[n]-offs[target])
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), data...)
			tc.corrupt(b, offs)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got := 0
			rep, err := Replay(context.Background(), vfs.Default, root, Position{Prefix: testPrefix}, func(*Record) error {
				got++
				return nil
			})
			want := tc.offset(offs)
			if want == -1 {
				if err != nil || !rep.Torn() || got != n-1 {
					t.Fatalf("err %v, torn %v, %d records; want a torn tail after %d", err, rep.Torn(), got, n-1)
				}
				return
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, tc.is) {
				t.Fatalf("err %v, want a *CorruptionError wrapping %v", err, tc.is)
			}
			if ce.File != path || ce.Offset != max(want, 0) {
				t.Fatalf("corruption at %s:%d, want %s:%d", ce.File, ce.Offset, path, max(want, 0))
			}
			if wantRecs := map[bool]int{true: target, false: 0}[want > 0]; got != wantRecs {
				t.Fatalf("%d records before the corruption, want %d", got, wantRecs)
			}
			// Open of the owner refuses the corrupt log rather than cutting it.
			if _, err := Open(context.Background(), testOptions(root)); !errors.As(err, &ce) {
				t.Fatalf("Open on a corrupt log: %v", err)
			}
		})
	}
}

// at returns the offset of record k, or 0 (the header) for k < 0.
func at(k int) func([]int64) int64 {
	return func(offs []int64) int64 {
		if k < 0 {
			return 0
		}
		return offs[k]
	}
}

func TestHeaderMustMatchFileName(t *testing.T) {
	root := t.TempDir()
	path, data, _ := writeTestFile(t, root, 5, 10)
	ts, _ := ParseFileName(filepath.Base(path))
	other := FilePath(root, Position{Prefix: testPrefix, FileTS: ts + 1000})
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Replay(context.Background(), vfs.Default, root, Position{Prefix: testPrefix, FileTS: ts + 1}, func(*Record) error { return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != 0 || ce.File != other || !errors.Is(err, ErrBadHeader) {
		t.Fatalf("err %v", err)
	}
}

func TestUnusedAndShortFiles(t *testing.T) {
	for _, b := range [][]byte{nil, make([]byte, 10), make([]byte, 4096), []byte(magic[:5]), []byte(magic + "\x01\x00")} {
		rep, err := scanFile("x", b, nil, nil)
		if err != nil || !rep.Unused || rep.Records != 0 {
			t.Fatalf("%q: %+v %v", b, rep, err)
		}
	}
}

func FuzzReplay(f *testing.F) {
	root := f.TempDir()
	opts := testOptions(root)
	opts.MaxBatchBytes = 512
	l, err := Open(context.Background(), opts)
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := l.Append(context.Background(), tabletOf(i), testMutation(i, 20)); err != nil {
			f.Fatal(err)
		}
	}
	pos := l.Position()
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(FilePath(root, pos))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)-3])
	f.Add(append(append([]byte(nil), data...), make([]byte, 1000)...))
	f.Add(make([]byte, 100))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		var last uint64
		n := 0
		rep, err := scanFile("fuzz", b, nil, func(r *Record) error {
			if n > 0 && r.Seq != last+1 {
				t.Fatalf("seq %d after %d", r.Seq, last)
			}
			last = r.Seq
			n++
			return nil
		})
		if rep.Records != n {
			t.Fatalf("report says %d records, callback saw %d", rep.Records, n)
		}
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *CorruptionError: %v", err)
			}
			return
		}
		if rep.End > int64(len(b)) || (!rep.Unused && rep.End < 1) {
			t.Fatalf("end %d of %d bytes", rep.End, len(b))
		}
	})
}
