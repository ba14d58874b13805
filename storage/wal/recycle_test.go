package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bighive/storage/vfs"
	"bighive/testkit/wait"
)

// recycledLog is a closed log of two files: older (fresh, recycledOlder
// records) and newest, a recycled file that reused a retired file of
// recycledStale records. newest holds recycledLive records, then its end
// frame, then the retired file's frames: data is its bytes as they were
// while the log was open (Close truncates them away).
type recycledLog struct {
	root     string
	older    string
	newest   string
	data     []byte  // the newest file while the log was open
	offs     []int64 // its records' offsets, then the end of its data
	staleOff []int64 // frame offsets of the file it reused (its previous life)
	maxFlush int64
}

const (
	recycledStale = 400
	recycledOlder = 50
	recycledLive  = 150
)

func recycleOptions(root string) Options {
	opts := testOptions(root)
	opts.MaxBatchBytes = 4 << 10
	opts.FileSize = 1 << 30
	return opts
}

// waitRecycledReady waits until the preparer holds a recycled file: the
// pool is empty (the preparer takes a kept file only once the file it
// held before went to the flusher) and a file is ready. The log must be
// idle, and a file must have been kept.
func waitRecycledReady(t *testing.T, l *Log) {
	t.Helper()
	wait.For(t, 10*time.Second, "a recycled file prepared", func() error {
		if len(l.prep.ready) != 1 || l.prep.room() != l.prep.keep {
			return fmt.Errorf("%d files ready, room %d of %d", len(l.prep.ready), l.prep.room(), l.prep.keep)
		}
		return nil
	})
}

func writeRecycledLog(t *testing.T) *recycledLog {
	t.Helper()
	root := t.TempDir()
	l := openLog(t, recycleOptions(root))
	c := &recycledLog{root: root, maxFlush: int64(recycleOptions(root).MaxBatchBytes) + l.headerSize}
	first := l.Position()
	appendN(t, l, 0, recycledStale, 60)
	rep, err := ReplayFile(vfs.Default, FilePath(root, first), func(r *Record) error {
		c.staleOff = append(c.staleOff, r.Offset)
		return nil
	})
	if err != nil || rep.Records != recycledStale {
		t.Fatalf("first file: %+v %v", rep, err)
	}
	olderPos, _ := l.Roll()
	appendN(t, l, recycledStale, recycledOlder, 60)
	if del, err := l.DeleteBefore(olderPos); err != nil || len(del) != 1 {
		t.Fatalf("DeleteBefore: %v %v", del, err)
	}
	waitRecycledReady(t, l)
	newestPos, _ := l.Roll()
	appendN(t, l, recycledStale+recycledOlder, recycledLive, 60)
	if st := l.Stats(); st.Recycled != 1 {
		t.Fatalf("Stats.Recycled = %d, want 1", st.Recycled)
	}
	c.older, c.newest = FilePath(root, olderPos), FilePath(root, newestPos)
	if c.data, err = os.ReadFile(c.newest); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	if err := os.WriteFile(c.newest, c.data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = ReplayFile(vfs.Default, c.newest, func(r *Record) error {
		c.offs = append(c.offs, r.Offset)
		return nil
	})
	if err != nil || rep.Records != recycledLive || rep.Torn {
		t.Fatalf("recycled file: %+v %v", rep, err)
	}
	c.offs = append(c.offs, rep.End)
	end := c.offs[recycledLive]
	if h, _, _, _ := decodeHeader(c.data); h.Flags&flagRecycled == 0 || h.Version != Version {
		t.Fatalf("newest file header %+v, want a recycled version-%d file", h, Version)
	}
	if int64(len(c.data))-end < 2*c.maxFlush || c.offs[recycledLive]-c.offs[20] < 2*c.maxFlush {
		t.Fatalf("files too small: %d stale bytes, %d live bytes after record 20, window %d",
			int64(len(c.data))-end, c.offs[recycledLive]-c.offs[20], c.maxFlush)
	}
	return c
}

// staleFrameAfter returns the bytes of a whole frame of the previous life
// that starts at or after off in the newest file.
func (c *recycledLog) staleFrameAfter(t *testing.T, off int64) []byte {
	t.Helper()
	for i, o := range c.staleOff {
		if o >= off && i+1 < len(c.staleOff) {
			return c.data[o:c.staleOff[i+1]]
		}
	}
	t.Fatal("no stale frame after the data")
	return nil
}

// TestRecycledTail damages a recycled newest file (live records, its end
// frame, then the previous life's frames) and checks what Replay, SplitLog
// and Open make of it: stale frames end the data, a torn last flush is a
// tail, and damage with frames of the file's own log number past the last
// flush window is a *CorruptionError naming the file and the offset.
func TestRecycledTail(t *testing.T) {
	c := writeRecycledLog(t)
	end := c.offs[recycledLive]
	last := c.offs[recycledLive-1]
	type outcome struct {
		records int   // records of the newest file replayed
		torn    bool  // newest file torn
		corrupt int64 // offset of the corruption in the newest file; -1 none
		is      error
	}
	cases := []struct {
		name    string
		corrupt func(b []byte) []byte
		want    outcome
	}{
		{"intact: the data, then what the previous life left", func(b []byte) []byte { return b },
			outcome{recycledLive, false, -1, nil}},
		{"a whole stale frame right after the data", func(b []byte) []byte {
			copy(b[end:], c.staleFrameAfter(t, end))
			return b
		}, outcome{recycledLive, false, -1, nil}},
		{"the inside of a stale frame right after the data", func(b []byte) []byte {
			copy(b[end:], b[end+37:end+37+frameHeaderLen])
			return b
		}, outcome{recycledLive, false, -1, nil}},
		{"zeros right after the data", func(b []byte) []byte {
			clear(b[end : end+frameHeaderLen])
			return b
		}, outcome{recycledLive, false, -1, nil}},
		{"truncated at the end of the data", func(b []byte) []byte { return b[:end] },
			outcome{recycledLive, false, -1, nil}},
		{"torn last frame: checksum", func(b []byte) []byte { b[last+30] ^= 1; return b },
			outcome{recycledLive - 1, true, -1, nil}},
		{"torn last frame: cut by stale bytes", func(b []byte) []byte {
			copy(b[last+40:], c.staleFrameAfter(t, end+200))
			return b
		}, outcome{recycledLive - 1, true, -1, nil}},
		{"torn last flush: a hole of old bytes, its later frames whole", func(b []byte) []byte {
			k := recycledLive - 5
			copy(b[c.offs[k]:c.offs[k+1]], c.staleFrameAfter(t, end+300))
			return b
		}, outcome{recycledLive - 5, true, -1, nil}},
		{"checksum in the middle, live frames after", func(b []byte) []byte { b[c.offs[20]+30] ^= 1; return b },
			outcome{20, false, c.offs[20], ErrChecksum}},
		{"log number in the middle, live frames after", func(b []byte) []byte { b[c.offs[20]+9] ^= 1; return b },
			outcome{20, false, c.offs[20], ErrChecksum}},
		{"length in the middle claims a huge record", func(b []byte) []byte { b[c.offs[20]+3] = 0x07; return b },
			outcome{20, false, c.offs[20], ErrBadRecord}},
		{"length in the middle runs on into stale frames", func(b []byte) []byte { b[c.offs[20]+1] ^= 0x40; return b },
			outcome{20, false, c.offs[20], ErrChecksum}},
		{"a stale frame in the middle (lost write), live frames after", func(b []byte) []byte {
			copy(b[c.offs[20]:], c.staleFrameAfter(t, end+400))
			return b
		}, outcome{20, false, c.offs[20], ErrBadRecord}},
		{"zeros in the middle, live frames after", func(b []byte) []byte {
			clear(b[c.offs[20]:c.offs[21]])
			return b
		}, outcome{20, false, c.offs[20], ErrBadRecord}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.corrupt(bytes.Clone(c.data))
			olderData, err := os.ReadFile(c.older)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.newest, b, 0o644); err != nil {
				t.Fatal(err)
			}
			n := 0
			rep, err := Replay(context.Background(), vfs.Default, c.root, Position{Prefix: testPrefix}, func(r *Record) error {
				if r.File.FileTS == fileTS(t, c.newest) {
					checkRecord(t, r, recycledStale+recycledOlder+n, 60)
					n++
				}
				return nil
			})
			checkRecycled := func(what string, err error, n int, torn bool) {
				t.Helper()
				if tc.want.corrupt < 0 {
					if err != nil || n != tc.want.records || torn != tc.want.torn {
						t.Fatalf("%s: %d records, torn %v, err %v; want %d records, torn %v", what, n, torn, err, tc.want.records, tc.want.torn)
					}
					return
				}
				var ce *CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, tc.want.is) || ce.File != c.newest || ce.Offset != tc.want.corrupt {
					t.Fatalf("%s: err %v; want a *CorruptionError wrapping %v at %s:%d", what, err, tc.want.is, c.newest, tc.want.corrupt)
				}
				if n != tc.want.records {
					t.Fatalf("%s: %d records before the corruption, want %d", what, n, tc.want.records)
				}
			}
			checkRecycled("Replay", err, n, rep.Torn())

			recs, srep, err := SplitLog(context.Background(), vfs.Default, c.root,
				SplitRange{Prefix: testPrefix, From: fileTS(t, c.newest), Until: Unbounded}, map[string]bool{tabletOf(0): true, tabletOf(1): true, tabletOf(2): true, tabletOf(3): true, tabletOf(4): true})
			sn := 0
			for _, rs := range recs {
				sn += len(rs)
			}
			if err != nil {
				sn = tc.want.records // SplitLog returns no records with an error
			}
			checkRecycled("SplitLog", err, sn, len(srep.Files) == 1 && srep.Files[0].Torn)

			// Open repairs a tail (cutting the stale frames off too) and
			// refuses corruption without changing a byte.
			l, err := Open(context.Background(), recycleOptions(c.root))
			if tc.want.corrupt >= 0 {
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.Offset != tc.want.corrupt {
					t.Fatalf("Open: %v, want the corruption at offset %d", err, tc.want.corrupt)
				}
				if got, _ := os.ReadFile(c.newest); !bytes.Equal(got, b) {
					t.Fatal("Open changed the corrupt file")
				}
			} else {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				seqs := appendN(t, l, 0, 1, 60)
				closeLog(t, l)
				if want := uint64(recycledStale + recycledOlder + tc.want.records + 1); seqs[0] != want {
					t.Fatalf("first seq after Open %d, want %d", seqs[0], want)
				}
				if st, _ := os.Stat(c.newest); st.Size() != c.offs[tc.want.records] {
					t.Fatalf("repaired size %d, want %d", st.Size(), c.offs[tc.want.records])
				}
				recs, rep := replayAll(t, vfs.Default, c.root)
				if len(recs) != recycledOlder+tc.want.records+1 || rep.Torn() {
					t.Fatalf("after repair: %d records, torn %v", len(recs), rep.Torn())
				}
			}
			// Restore the two files for the next case; remove what Open made.
			ents, _ := os.ReadDir(filepath.Dir(c.newest))
			for _, e := range ents {
				os.Remove(filepath.Join(filepath.Dir(c.newest), e.Name()))
			}
			os.WriteFile(c.older, olderData, 0o644)
			os.WriteFile(c.newest, c.data, 0o644)
		})
	}
}

// TestRecycledFileNotNewest: a recycled file that is not the newest, left
// untruncated (a crash before retire), ends cleanly at its end frame even
// though stale frames follow; torn, it is corruption.
func TestRecycledFileNotNewest(t *testing.T) {
	c := writeRecycledLog(t)
	// A later file continuing the sequence numbers.
	l := openLog(t, recycleOptions(c.root))
	appendN(t, l, 0, 3, 60)
	closeLog(t, l)
	if err := os.WriteFile(c.newest, c.data, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, rep := replayAll(t, vfs.Default, c.root)
	if len(recs) != recycledOlder+recycledLive+3 || rep.Torn() {
		t.Fatalf("%d records, torn %v", len(recs), rep.Torn())
	}
	b := bytes.Clone(c.data)
	b[c.offs[recycledLive-1]+30] ^= 1
	if err := os.WriteFile(c.newest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Replay(context.Background(), vfs.Default, c.root, Position{Prefix: testPrefix}, func(*Record) error { return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != c.newest || ce.Offset != c.offs[recycledLive-1] {
		t.Fatalf("torn recycled file that is not the newest: %v, want corruption at %s:%d", err, c.newest, c.offs[recycledLive-1])
	}
}

// TestRecycledHeaderNeverDurable: a crash after a recycled file took its
// new name but before its first flush leaves a zeroed header and the old
// frames. It holds no record, and Open empties it.
func TestRecycledHeaderNeverDurable(t *testing.T) {
	c := writeRecycledLog(t)
	b := bytes.Clone(c.data)
	clear(b[:recycleZeroLen])
	if err := os.WriteFile(c.newest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, rep := replayAll(t, vfs.Default, c.root)
	if len(recs) != recycledOlder || !rep.Files[len(rep.Files)-1].Unused {
		t.Fatalf("%d records, report %+v", len(recs), rep.Files)
	}
	l := openLog(t, recycleOptions(c.root))
	appendN(t, l, 0, 1, 60)
	closeLog(t, l)
	if st, _ := os.Stat(c.newest); st.Size() != 0 {
		t.Fatalf("unused recycled file is %d bytes after Open, want 0", st.Size())
	}
	recs, rep = replayAll(t, vfs.Default, c.root)
	if len(recs) != recycledOlder+1 || rep.Torn() || recs[recycledOlder].Seq != recycledStale+recycledOlder+1 {
		t.Fatalf("after Open: %d records, torn %v", len(recs), rep.Torn())
	}
}

// TestRecycling runs a log through rolls and GC: retired files are reused
// (at most RecycleFiles kept at a time), replay sees exactly the records
// of the files not collected, and with recycling off files are removed.
func TestRecycling(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recycle  int
		prealloc Prealloc
	}{{"off", -1, PreallocNone}, {"two, growing files", 2, PreallocNone}, {"default, pre-zeroed", 0, PreallocZero}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			opts := testOptions(root)
			opts.FileSize = 64 << 10
			opts.RecycleFiles, opts.Prealloc = tc.recycle, tc.prealloc
			l := openLog(t, opts)
			var positions []Position
			next := 0
			for round := 0; round < 12; round++ {
				appendN(t, l, next, 40, 100+round*50)
				next += 40
				p, err := l.Roll()
				if err != nil {
					t.Fatal(err)
				}
				positions = append(positions, p)
				if len(positions) > 2 {
					if _, err := l.DeleteBefore(positions[len(positions)-3]); err != nil {
						t.Fatal(err)
					}
				}
				ents, _ := os.ReadDir(PrefixDir(root, testPrefix))
				kept := 0
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), recyclePrefix) {
						kept++
					}
				}
				if keep := max(opts.RecycleFiles, 0) + map[bool]int{true: DefaultRecycleFiles}[opts.RecycleFiles == 0]; kept > keep {
					t.Fatalf("round %d: %d files kept, at most %d", round, kept, keep)
				}
				if opts.Prealloc == PreallocNone && opts.RecycleFiles > 0 && round > 2 {
					waitRecycledReady(t, l)
				}
			}
			st := l.Stats()
			closeLog(t, l)
			if tc.recycle < 0 && st.Recycled != 0 || tc.recycle >= 0 && st.Recycled < 5 {
				t.Fatalf("Stats: %d of %d files recycled", st.Recycled, st.Files)
			}
			ents, _ := os.ReadDir(PrefixDir(root, testPrefix))
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), vfs.TempSuffix) {
					t.Fatalf("Close left %s", e.Name())
				}
			}
			recs, rep := replayAll(t, vfs.Default, root)
			first := positions[len(positions)-3]
			if rep.Torn() || len(rep.Files) == 0 || rep.Files[0].FileTS != first.FileTS {
				t.Fatalf("replay: torn %v, files %+v, want from %v", rep.Torn(), rep.Files, first)
			}
			base := next - len(recs)
			for k := range recs {
				if recs[k].Seq != uint64(base+k+1) {
					t.Fatalf("record %d has seq %d, want %d", k, recs[k].Seq, base+k+1)
				}
				checkRecord(t, &recs[k], base+k, 100+(base+k)/40*50)
			}
			if len(recs) != 2*40 {
				t.Fatalf("%d records replayed, want the last two rounds' %d", len(recs), 2*40)
			}
		})
	}
}

// TestReadVersion1 reads a log written by the version-1 code (testdata/v1:
// two files, 15 records), continues it with version-2 files, and tells a
// torn version-1 tail as before.
func TestReadVersion1(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join("testdata", "v1")
	if err := os.CopyFS(root, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	files, err := Files(vfs.Default, root, testPrefix)
	if err != nil || len(files) != 2 {
		t.Fatalf("fixture: %v %v", files, err)
	}
	for _, p := range files {
		if h, _, _, _ := decodeHeader(mustRead(t, FilePath(root, p))); h.Version != versionV1 {
			t.Fatalf("fixture %s is version %d", p, h.Version)
		}
	}
	recs, rep := replayAll(t, vfs.Default, root)
	if len(recs) != 15 || rep.Torn() {
		t.Fatalf("version 1: %d records, torn %v", len(recs), rep.Torn())
	}
	for k := range recs {
		if recs[k].Seq != uint64(k+1) {
			t.Fatalf("record %d: seq %d", k, recs[k].Seq)
		}
		checkRecord(t, &recs[k], k, 60)
	}
	keep := map[string]bool{}
	for i := 0; i < 5; i++ {
		keep[tabletOf(i)] = true
	}
	split, _, err := SplitLog(context.Background(), vfs.Default, root, SplitRange{Prefix: testPrefix, Until: Unbounded}, keep)
	n := 0
	for _, rs := range split {
		n += len(rs)
	}
	if err != nil || n != 15 {
		t.Fatalf("SplitLog of version 1: %d records, %v", n, err)
	}

	// A torn version-1 tail is cut by Open, and the log goes on in version 2.
	newest := FilePath(root, files[1])
	data := mustRead(t, newest)
	if err := os.WriteFile(newest, data[:len(data)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, rep := replayAll(t, vfs.Default, root); !rep.Torn() {
		t.Fatal("cut version-1 file not torn")
	}
	opts := testOptions(root)
	l := openLog(t, opts)
	seqs := appendN(t, l, 14, 2, 60)
	closeLog(t, l)
	if seqs[0] != 15 {
		t.Fatalf("first seq after the version-1 log: %d, want 15", seqs[0])
	}
	recs, rep = replayAll(t, vfs.Default, root)
	if len(recs) != 16 || rep.Torn() || len(rep.Files) != 3 {
		t.Fatalf("version 1 then 2: %d records, torn %v, %d files", len(recs), rep.Torn(), len(rep.Files))
	}
	for k := range recs {
		checkRecord(t, &recs[k], k, 60)
	}
	if h, _, _, _ := decodeHeader(mustRead(t, rep.Files[2].Path)); h.Version != Version {
		t.Fatalf("new file is version %d", h.Version)
	}

	// A version-1 file recycled: its version-1 frames are stale in the
	// version-2 file that reuses it.
	root = t.TempDir()
	writeV1File(t, root, 1000, 1, 300)
	l = openLog(t, recycleOptions(root))
	cur := l.Position()
	appendN(t, l, 300, 3, 60)
	if _, err := l.DeleteBefore(cur); err != nil {
		t.Fatal(err)
	}
	waitRecycledReady(t, l)
	l.Roll()
	appendN(t, l, 303, 5, 60)
	if l.Stats().Recycled != 1 {
		t.Fatal("version-1 file not recycled")
	}
	newest = FilePath(root, l.Position())
	live := mustRead(t, newest)
	closeLog(t, l)
	if err := os.WriteFile(newest, live, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, err := ReplayFile(vfs.Default, newest, nil); err != nil || rep.Records != 5 || rep.Torn ||
		rep.Size-rep.End < 10<<10 {
		t.Fatalf("recycled version-1 file: %+v, %v (want 5 records and the old frames after them)", rep, err)
	}
	recs, rep = replayAll(t, vfs.Default, root)
	if rep.Torn() || len(recs) != 3+5 || recs[len(recs)-1].Seq != 308 {
		t.Fatalf("after recycling a version-1 file: %d records, torn %v", len(recs), rep.Torn())
	}
	for k := range recs {
		checkRecord(t, &recs[k], 300+k, 60)
	}
}

// writeV1File writes a version-1 log file as the version-1 code did: its
// header, then n records of testMutation(i, 60), i from firstSeq-1.
func writeV1File(t *testing.T, root string, ts int64, firstSeq uint64, n int) {
	t.Helper()
	var b []byte
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint16(b, versionV1)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(testPrefix)))
	b = binary.LittleEndian.AppendUint32(b, 16<<10)
	b = binary.LittleEndian.AppendUint64(b, uint64(ts))
	b = binary.LittleEndian.AppendUint64(b, firstSeq)
	b = append(b, testPrefix...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	for i := 0; i < n; i++ {
		k := int(firstSeq) - 1 + i
		b = appendRecord(b, framesV1, firstSeq+uint64(i), int64(k), tabletOf(k), testMutation(k, 60))
	}
	if err := os.MkdirAll(PrefixDir(root, testPrefix), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(FilePath(root, Position{Prefix: testPrefix, FileTS: ts}), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return b
}

// TestUnknownVersionAndFlags: a header of an unknown version, or with
// flags this version does not know, is corruption at offset 0 (its
// checksum matching), never read with the wrong rules.
func TestUnknownVersionAndFlags(t *testing.T) {
	root := t.TempDir()
	path, data, _ := writeTestFile(t, root, 5, 60)
	_, size, _, _ := decodeHeader(data)
	for _, tc := range []struct {
		name  string
		patch func(b []byte)
	}{
		{"version 3", func(b []byte) { binary.LittleEndian.PutUint16(b[8:], 3) }},
		{"unknown flag", func(b []byte) { binary.LittleEndian.PutUint32(b[32:], 2) }},
	} {
		b := bytes.Clone(data)
		tc.patch(b)
		binary.LittleEndian.PutUint32(b[size-4:], crc32.Checksum(b[:size-4], castagnoli))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReplayFile(vfs.Default, path, nil)
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrBadHeader) || ce.Offset != 0 {
			t.Fatalf("%s: %v, want a bad header at offset 0", tc.name, err)
		}
	}
}
