package wal

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"bighive/storage/vfs"
)

// corruptLog is a closed log of corruptFiles files, corruptPerFile
// records each (value size 60, a flush window of 4 KiB + header), so that
// the middle of a file is well outside the window of its end.
type corruptLog struct {
	root     string
	paths    []string
	data     [][]byte
	offs     [][]int64 // per file: the records' frame offsets, then the end
	maxFlush int64
}

const (
	corruptFiles   = 3
	corruptPerFile = 300
)

func writeCorruptLog(t *testing.T) *corruptLog {
	t.Helper()
	root := t.TempDir()
	opts := testOptions(root)
	opts.MaxBatchBytes = 4 << 10
	opts.FileSize = 1 << 30
	l := openLog(t, opts)
	c := &corruptLog{root: root, maxFlush: int64(opts.MaxBatchBytes) + l.headerSize}
	var positions []Position
	for f := 0; f < corruptFiles; f++ {
		if f > 0 {
			if _, err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		positions = append(positions, l.Position())
		appendN(t, l, f*corruptPerFile, corruptPerFile, 60)
	}
	closeLog(t, l)
	for _, pos := range positions {
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
		if err != nil || rep.Records != corruptPerFile {
			t.Fatalf("fresh file %s: %+v, %v", path, rep, err)
		}
		c.paths = append(c.paths, path)
		c.data = append(c.data, data)
		c.offs = append(c.offs, append(offs, rep.End))
	}
	if mid := c.offs[0][corruptPerFile/2]; c.offs[0][corruptPerFile]-mid < 3*c.maxFlush {
		t.Fatalf("files too small: %d bytes after the middle, window %d", c.offs[0][corruptPerFile]-mid, c.maxFlush)
	}
	return c
}

// corruptCase damages a copy of the files of a corruptLog (files[i] may
// be replaced, or set to nil to remove the file, and extra files added as
// more names → bytes).
type corruptCase struct {
	name    string
	corrupt func(c *corruptLog, files [][]byte, extra map[string][]byte)
	// Outcome when there is no corruption: the records that survive
	// (in order, from the first), and whether the newest file is torn.
	records int
	torn    bool
	// Otherwise: the file (index) and offset the *CorruptionError names,
	// and the sentinel it wraps.
	corruptFile int // -1: no corruption
	offset      func(c *corruptLog) int64
	is          error
}

// recordAt returns an offset function for record k of file f.
func recordAt(f, k int) func(*corruptLog) int64 {
	return func(c *corruptLog) int64 { return c.offs[f][k] }
}

func headerOf(int) func(*corruptLog) int64 { return func(*corruptLog) int64 { return 0 } }

var corruptCases = []corruptCase{
	{name: "intact", corrupt: func(*corruptLog, [][]byte, map[string][]byte) {},
		records: corruptFiles * corruptPerFile, corruptFile: -1},
	{name: "length in the middle of the newest file runs past the end",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[2][c.offs[2][corruptPerFile/2]+2] ^= 0x10 // +1 MiB
		},
		corruptFile: 2, offset: recordAt(2, corruptPerFile/2), is: ErrBadRecord},
	{name: "length in the middle of the newest file claims a huge record",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[2][c.offs[2][corruptPerFile/2]+3] = 0x07 // 112 MiB
		},
		corruptFile: 2, offset: recordAt(2, corruptPerFile/2), is: ErrBadRecord},
	{name: "length in the middle of a pre-zeroed newest file swallows the data",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[2] = append(f[2], make([]byte, 4<<20)...) // what the rest of a prepared file holds
			f[2][c.offs[2][corruptPerFile/2]+2] ^= 0x10 // +1 MiB: within the file, checksum wrong
		},
		corruptFile: 2, offset: recordAt(2, corruptPerFile/2), is: ErrChecksum},
	{name: "length in the middle of an older file",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[0][c.offs[0][corruptPerFile/2]+2] ^= 0x10
		},
		corruptFile: 0, offset: recordAt(0, corruptPerFile/2), is: ErrBadRecord},
	{name: "checksum in the middle of the newest file",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[2][c.offs[2][corruptPerFile/2]+5] ^= 1
		},
		corruptFile: 2, offset: recordAt(2, corruptPerFile/2), is: ErrChecksum},
	{name: "checksum in the middle of an older file",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[1][c.offs[1][corruptPerFile/2]+5] ^= 1
		},
		corruptFile: 1, offset: recordAt(1, corruptPerFile/2), is: ErrChecksum},
	{name: "truncated last frame of the newest file",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) { f[2] = f[2][:len(f[2])-5] },
		records: corruptFiles*corruptPerFile - 1, torn: true, corruptFile: -1},
	{name: "bit flip in the last record of the newest file",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) { f[2][c.offs[2][corruptPerFile-1]+20] ^= 1 },
		records: corruptFiles*corruptPerFile - 1, torn: true, corruptFile: -1},
	{name: "a huge record cut off at the end of the newest file",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			// What a crash leaves of a lone record larger than a flush.
			f[2][c.offs[2][corruptPerFile-1]+3] = 0x01 // 16 MiB
		},
		records: corruptFiles*corruptPerFile - 1, torn: true, corruptFile: -1},
	{name: "garbage within the window after the newest file's tail",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[2] = append(append(f[2], make([]byte, 1000)...), "garbage"...)
		},
		records: corruptFiles * corruptPerFile, torn: true, corruptFile: -1},
	{name: "garbage beyond the window after the newest file's tail",
		corrupt: func(c *corruptLog, f [][]byte, _ map[string][]byte) {
			f[2] = append(append(f[2], make([]byte, c.maxFlush+100)...), "garbage"...)
		},
		corruptFile: 2, offset: recordAt(2, corruptPerFile), is: ErrBadRecord},
	{name: "truncated frame of an older file",
		corrupt:     func(c *corruptLog, f [][]byte, _ map[string][]byte) { f[0] = f[0][:len(f[0])-5] },
		corruptFile: 0, offset: recordAt(0, corruptPerFile-1), is: ErrBadRecord},
	{name: "older file cut at a record boundary",
		corrupt:     func(c *corruptLog, f [][]byte, _ map[string][]byte) { f[1] = f[1][:c.offs[1][corruptPerFile-3]] },
		corruptFile: 2, offset: headerOf(2), is: ErrBadHeader},
	{name: "gap in seq across files (a middle file lost)",
		corrupt:     func(c *corruptLog, f [][]byte, _ map[string][]byte) { f[1] = nil },
		corruptFile: 2, offset: headerOf(2), is: ErrBadHeader},
	{name: "torn newest file followed by an unused file",
		corrupt: func(c *corruptLog, f [][]byte, extra map[string][]byte) {
			f[2] = f[2][:len(f[2])-5]
			extra[FormatFileName(math.MaxInt64-1)] = make([]byte, 4096)
		},
		records: corruptFiles*corruptPerFile - 1, torn: true, corruptFile: -1},
}

// TestCorruptionTable damages a log of several files in the ways the
// table lists and checks what Replay, SplitLog and Open make of it: a torn
// tail only at the end of the newest file, within the flush window;
// anything else a *CorruptionError naming the file and offset, which Open
// refuses rather than truncates.
func TestCorruptionTable(t *testing.T) {
	c := writeCorruptLog(t)
	keep := map[string]bool{}
	for i := 0; i < 5; i++ {
		keep[tabletOf(i)] = true
	}
	for _, tc := range corruptCases {
		t.Run(tc.name, func(t *testing.T) {
			files := make([][]byte, len(c.data))
			for i := range c.data {
				files[i] = bytes.Clone(c.data[i])
			}
			extra := map[string][]byte{}
			tc.corrupt(c, files, extra)
			restore := func() {
				ents, _ := os.ReadDir(filepath.Dir(c.paths[0]))
				for _, e := range ents {
					os.Remove(filepath.Join(filepath.Dir(c.paths[0]), e.Name()))
				}
				for i, p := range c.paths {
					if err := os.WriteFile(p, c.data[i], 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			defer restore()
			for i, p := range c.paths {
				if files[i] == nil {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(p, files[i], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for name, b := range extra {
				if err := os.WriteFile(filepath.Join(filepath.Dir(c.paths[0]), name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			// Replay.
			var got []uint64
			rep, err := Replay(context.Background(), vfs.Default, c.root, Position{Prefix: testPrefix}, func(r *Record) error {
				got = append(got, r.Seq)
				return nil
			})
			checkOutcome(t, "Replay", c, tc, err, len(got), rep.Torn())
			for i, s := range got {
				if s != uint64(i+1) {
					t.Fatalf("Replay: record %d has seq %d", i, s)
				}
			}

			// Log splitting, of the whole prefix and of a range that ends
			// at the newest file.
			for _, r := range []SplitRange{
				{Prefix: testPrefix, From: 0, Until: Unbounded},
				{Prefix: testPrefix, From: 0, Until: fileTS(t, c.paths[2])},
			} {
				recs, srep, err := SplitLog(context.Background(), vfs.Default, c.root, r, keep)
				n := 0
				for _, rs := range recs {
					n += len(rs)
				}
				torn := false
				for _, f := range srep.Files {
					torn = torn || f.Torn
				}
				if r.Until == Unbounded {
					checkOutcome(t, "SplitLog", c, tc, err, n, torn)
					continue
				}
				// The bounded range stops before the newest file: any
				// error it gives is one of the files before it, or the
				// next file's header not continuing them.
				if tc.corruptFile < 0 || tc.corruptFile == 2 && tc.offset(c) != 0 {
					if err != nil || torn || n != min(tc.records, 2*corruptPerFile) && tc.corruptFile < 0 {
						t.Fatalf("SplitLog of %s: %d records, torn %v, err %v", r, n, torn, err)
					}
					continue
				}
				checkOutcome(t, "SplitLog of "+r.String(), c, tc, err, n, torn)
			}

			// Open repairs only a torn tail of the newest file, and refuses
			// corruption there without changing a byte.
			l, err := Open(context.Background(), testOptions(c.root))
			newestCorrupt := tc.corruptFile == 2 && tc.offset(c) != 0
			var ce *CorruptionError
			switch {
			case newestCorrupt:
				if !errors.As(err, &ce) || ce.File != c.paths[2] || ce.Offset != tc.offset(c) {
					t.Fatalf("Open: %v, want the corruption at %s:%d", err, c.paths[2], tc.offset(c))
				}
				if b, _ := os.ReadFile(c.paths[2]); !bytes.Equal(b, files[2]) {
					t.Fatalf("Open changed the corrupt file")
				}
			case err != nil:
				t.Fatalf("Open: %v", err)
			default:
				closeLog(t, l)
				// Corruption in older files is still there for replay to report.
				_, err := Replay(context.Background(), vfs.Default, c.root, Position{Prefix: testPrefix}, func(*Record) error { return nil })
				if tc.corruptFile >= 0 {
					if !errors.As(err, &ce) || ce.File != c.paths[tc.corruptFile] || ce.Offset != tc.offset(c) {
						t.Fatalf("Replay after Open: %v, want the corruption at %s:%d", err, c.paths[tc.corruptFile], tc.offset(c))
					}
				} else if err != nil {
					t.Fatalf("Replay after Open: %v", err)
				}
			}
		})
	}
}

func checkOutcome(t *testing.T, what string, c *corruptLog, tc corruptCase, err error, n int, torn bool) {
	t.Helper()
	if tc.corruptFile < 0 {
		if err != nil || n != tc.records || torn != tc.torn {
			t.Fatalf("%s: %d records, torn %v, err %v; want %d records, torn %v", what, n, torn, err, tc.records, tc.torn)
		}
		return
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, tc.is) {
		t.Fatalf("%s: %d records, torn %v, err %v; want a *CorruptionError wrapping %v", what, n, torn, err, tc.is)
	}
	if want := c.paths[tc.corruptFile]; ce.File != want || ce.Offset != tc.offset(c) {
		t.Fatalf("%s: corruption at %s:%d, want %s:%d (%v)", what, ce.File, ce.Offset, want, tc.offset(c), err)
	}
}

func fileTS(t *testing.T, path string) int64 {
	t.Helper()
	ts, err := ParseFileName(filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
