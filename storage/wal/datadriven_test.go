package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// TestReplayDataDriven runs the cases of testdata/replay: records appended,
// files rolled, the log closed or crashed, bytes of its files cut off,
// flipped or written, then Replay (and Open, which repairs a torn tail and
// refuses corruption). It prints the records each file replays, each
// file's report (end of data, torn tail) and the error: a torn tail is
// accepted only at the end of the newest file, within one flush window;
// anything else is a *CorruptionError naming the file and the offset, and
// replay never skips it; a recycled file never replays a frame of its
// earlier life (doc.go, "Torn tails and corruption"). The clock is fixed,
// so file names and records are the same every run. Commands:
//
//	open [max-batch=N] [file-size=N] [recycle=N] [prealloc=none|zero]
//	     (defaults 256, 64 KiB, -1: off, none; prints Open's repairs)
//	append                  one record a line: "TABLET ROW VALUE", a VALUE
//	                        of "c*N" is N bytes c
//	roll                    Roll, and wait for the flusher to start the file
//	delete-before file=F    Log.DeleteBefore the position of file F
//	wait-recycled           wait until the preparer holds a recycled file
//	close                   Close (truncates the newest file to its data)
//	crash                   the files as they are on disk, then Close, then
//	                        the files put back as they were
//	files                   the log files and their sizes
//	save, restore           keep the log files' bytes, put them back
//	replay [file=F]         Replay from the first file (or from file F)
//	truncate file=F at=OFF  cut file F at OFF
//	corrupt file=F at=OFF [xor=N]   flip the bits of N (default 0xff)
//	write file=F at=OFF     write the input (text) at OFF
//	zero file=F at=OFF len=N        zero N bytes at OFF
//	copy file=F from=OFF at=OFF len=N   copy N bytes from OFF to OFF
//	remove file=F           remove file F
//
// F is a file's 1-based index among the log files, or "last". OFF is a
// number, "end" (the file's size), "data" (the end of its whole records) or
// "seqN" (the offset of record N's frame), each optionally +K or -K.
//
// Regenerate the expected output with
//
//	go test ./storage/wal -run DataDriven -rewrite
//
// and read every changed line before committing it.
func TestReplayDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/replay", func(t *testing.T, path string) {
		w := &ddWAL{root: t.TempDir(), logs: &ddLogLines{}, offs: map[string]map[uint64]int64{}}
		defer func() {
			if w.l != nil {
				_ = w.l.Close()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := w.run(t, d)
			return out + w.logs.take(w.root)
		})
	})
}

// ddClock is the fixed time of every record and the first file timestamp.
var ddClock = time.UnixMicro(1_000_000)

type ddWAL struct {
	root  string
	l     *Log
	logs  *ddLogLines
	offs  map[string]map[uint64]int64 // record offsets by file path and seq
	saved map[string][]byte           // the log files at the last save
}

func (w *ddWAL) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "open":
		w.mustBeClosed(t, d)
		opts := Options{Root: w.root, Prefix: testPrefix, MaxBatchBytes: 256, FileSize: 64 << 10,
			Prealloc: PreallocNone, RecycleFiles: -1, Clock: func() time.Time { return ddClock },
			Logger: slog.New(w.logs)}
		d.MaybeScanArgs(t, "max-batch", &opts.MaxBatchBytes)
		d.MaybeScanArgs(t, "file-size", &opts.FileSize)
		d.MaybeScanArgs(t, "recycle", &opts.RecycleFiles)
		if d.HasArg("prealloc") {
			var mode string
			d.ScanArgs(t, "prealloc", &mode)
			switch mode {
			case "none":
			case "zero":
				opts.Prealloc = PreallocZero
			default:
				d.Fatalf(t, "prealloc=%s: want none or zero", mode)
			}
		}
		l, err := Open(ctx, opts)
		if err != nil {
			return ddError(w.root, err)
		}
		w.l = l
		return fmt.Sprintf("writing %s from seq %d\n", FormatFileName(l.Position().FileTS), l.nextSeq)
	case "append":
		w.mustBeOpen(t, d)
		var seqs []uint64
		for _, line := range strings.Split(d.Input, "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				d.Fatalf(t, "record %q: want TABLET ROW VALUE", line)
			}
			m := &mutation.RowMutation{Row: []byte(f[1]), Ops: []mutation.Op{{Kind: mutation.SetCell,
				Family: "f", Qualifier: []byte("q"), Timestamp: 1, Value: ddValue(t, d, f[2])}}}
			seq, err := w.l.Append(ctx, f[0], m)
			if err != nil {
				return ddError(w.root, err)
			}
			seqs = append(seqs, seq)
		}
		if len(seqs) == 1 {
			return fmt.Sprintf("seq %d\n", seqs[0])
		}
		return fmt.Sprintf("seq %d-%d\n", seqs[0], seqs[len(seqs)-1])
	case "roll":
		w.mustBeOpen(t, d)
		pos, err := w.l.Roll()
		if err != nil {
			return ddError(w.root, err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			w.l.mu.Lock()
			active := w.l.activeTS
			w.l.mu.Unlock()
			if active == pos.FileTS {
				break
			}
			if time.Now().After(deadline) {
				d.Fatalf(t, "the flusher did not start %s", pos)
			}
		}
		return fmt.Sprintf("writing %s\n", FormatFileName(pos.FileTS))
	case "delete-before":
		w.mustBeOpen(t, d)
		del, err := w.l.DeleteBefore(w.file(t, d))
		if err != nil {
			return ddError(w.root, err)
		}
		var b strings.Builder
		for _, p := range del {
			fmt.Fprintf(&b, "deleted %s\n", FormatFileName(p.FileTS))
		}
		return b.String()
	case "wait-recycled":
		w.mustBeOpen(t, d)
		waitRecycledReady(t, w.l)
		return ""
	case "close":
		w.mustBeOpen(t, d)
		err := w.l.Close()
		w.l = nil
		if err != nil {
			return ddError(w.root, err)
		}
		return ""
	case "crash":
		w.mustBeOpen(t, d)
		files := map[string][]byte{}
		for _, p := range w.files(t) {
			data, err := os.ReadFile(FilePath(w.root, p))
			if err != nil {
				t.Fatal(err)
			}
			files[FilePath(w.root, p)] = data
		}
		_ = w.l.Close()
		w.l = nil
		for path, data := range files {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return ""
	case "files":
		var b strings.Builder
		for _, p := range w.files(t) {
			st, err := os.Stat(FilePath(w.root, p))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s size=%d\n", FormatFileName(p.FileTS), st.Size())
		}
		return b.String()
	case "replay":
		from := Position{Prefix: testPrefix}
		if d.HasArg("file") {
			from = w.file(t, d)
		}
		var recs []Record
		rep, err := Replay(ctx, vfs.Default, w.root, from, func(r *Record) error {
			recs = append(recs, *r)
			return nil
		})
		var b strings.Builder
		for _, fr := range rep.Files {
			fmt.Fprintf(&b, "%s", filepath.Base(fr.Path))
			switch {
			case fr.Unused:
				b.WriteString(" unused")
			case fr.FirstSeq != 0:
				fmt.Fprintf(&b, " first_seq=%d", fr.FirstSeq)
			default:
				b.WriteString(" (header not read)")
			}
			b.WriteString("\n")
			for _, r := range recs {
				if r.File.FileTS == fr.FileTS {
					fmt.Fprintf(&b, "  @%d seq=%d %s %s=%s\n", r.Offset, r.Seq, r.TabletID, r.Mutation.Row,
						ddShow(r.Mutation.Ops[0].Value))
				}
			}
			fmt.Fprintf(&b, "  end=%d size=%d", fr.End, fr.Size)
			if fr.Torn {
				fmt.Fprintf(&b, " torn (%d bytes)", fr.TornBytes)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "records: %d\n", rep.Records)
		if err != nil {
			b.WriteString(ddError(w.root, err))
		}
		return b.String()
	case "save":
		w.mustBeClosed(t, d)
		w.saved = map[string][]byte{}
		for _, p := range w.files(t) {
			data, err := os.ReadFile(FilePath(w.root, p))
			if err != nil {
				t.Fatal(err)
			}
			w.saved[FilePath(w.root, p)] = data
		}
		return ""
	case "restore":
		w.mustBeClosed(t, d)
		for _, p := range w.files(t) {
			if err := os.Remove(FilePath(w.root, p)); err != nil {
				t.Fatal(err)
			}
		}
		for path, data := range w.saved {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return ""
	case "remove":
		w.mustBeClosed(t, d)
		pos := w.file(t, d)
		if err := os.Remove(FilePath(w.root, pos)); err != nil {
			t.Fatal(err)
		}
		return ""
	case "truncate", "corrupt", "write", "zero", "copy":
		w.mustBeClosed(t, d)
		path := FilePath(w.root, w.file(t, d))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		at := w.offset(t, d, "at", path, data)
		switch d.Cmd {
		case "truncate":
			if at > len(data) {
				d.Fatalf(t, "at=%d past the end (%d)", at, len(data))
			}
			data = data[:at]
		case "corrupt":
			x := int64(0xff)
			if d.HasArg("xor") {
				var xs string
				d.ScanArgs(t, "xor", &xs)
				var err error
				if x, err = strconv.ParseInt(xs, 0, 16); err != nil || x < 1 || x > 0xff {
					d.Fatalf(t, "xor=%s: want a byte, not 0", xs)
				}
			}
			if at >= len(data) {
				d.Fatalf(t, "at=%d past the end (%d)", at, len(data))
			}
			data[at] ^= byte(x)
		case "zero":
			var n int
			d.ScanArgs(t, "len", &n)
			if at+n > len(data) {
				d.Fatalf(t, "at=%d len=%d past the end (%d)", at, n, len(data))
			}
			clear(data[at : at+n])
		case "copy":
			var n int
			d.ScanArgs(t, "len", &n)
			from := w.offset(t, d, "from", path, data)
			if from+n > len(data) || at+n > len(data) {
				d.Fatalf(t, "copy of %d bytes from %d to %d: past the end (%d)", n, from, at, len(data))
			}
			copy(data[at:at+n], bytes.Clone(data[from:from+n]))
		case "write":
			if at > len(data) {
				data = append(data, make([]byte, at-len(data))...)
			}
			in := []byte(d.Input)
			data = append(data[:at], append(in, data[min(at+len(in), len(data)):]...)...)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s size=%d\n", filepath.Base(path), len(data))
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (w *ddWAL) mustBeOpen(t *testing.T, d *datadriven.TestData) {
	if w.l == nil {
		d.Fatalf(t, "%s: the log is not open", d.Cmd)
	}
}

func (w *ddWAL) mustBeClosed(t *testing.T, d *datadriven.TestData) {
	if w.l != nil {
		d.Fatalf(t, "%s: close or crash the log first", d.Cmd)
	}
}

func (w *ddWAL) files(t *testing.T) []Position {
	files, err := Files(vfs.Default, w.root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// file is the position of the file the file argument names.
func (w *ddWAL) file(t *testing.T, d *datadriven.TestData) Position {
	var s string
	d.ScanArgs(t, "file", &s)
	files := w.files(t)
	if s == "last" && len(files) > 0 {
		return files[len(files)-1]
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 1 || i > len(files) {
		d.Fatalf(t, "file=%s: want 1..%d or last", s, len(files))
	}
	return files[i-1]
}

// offset resolves the at argument in the file at path holding data. A
// record's offset is the one it had when last seen whole, so damage can be
// undone by the same command.
func (w *ddWAL) offset(t *testing.T, d *datadriven.TestData, key, path string, data []byte) int {
	var s string
	d.ScanArgs(t, key, &s)
	base, delta := s, 0
	if i := strings.LastIndexAny(s, "+-"); i > 0 {
		n, err := strconv.Atoi(s[i:])
		if err != nil {
			d.Fatalf(t, "%s=%s: %v", key, s, err)
		}
		base, delta = s[:i], n
	}
	var at int
	switch {
	case base == "end":
		at = len(data)
	case base == "data" || strings.HasPrefix(base, "seq"):
		if w.offs[path] == nil {
			w.offs[path] = map[uint64]int64{}
		}
		offs := w.offs[path]
		rep, _ := ReplayFile(vfs.Default, path, func(r *Record) error {
			offs[r.Seq] = r.Offset
			return nil
		})
		if base == "data" {
			at = int(rep.End)
			break
		}
		seq, err := strconv.ParseUint(base[len("seq"):], 10, 64)
		off, ok := offs[seq]
		if err != nil || !ok {
			d.Fatalf(t, "%s=%s: no record %s in %s", key, s, base, filepath.Base(path))
		}
		at = int(off)
	default:
		n, err := strconv.Atoi(base)
		if err != nil {
			d.Fatalf(t, "%s=%s: want a number, end, data or seqN, then +K or -K", key, s)
		}
		at = n
	}
	return at + delta
}

// ddValue parses a record's value: "c*N" is N bytes c, else the text.
func ddValue(t *testing.T, d *datadriven.TestData, s string) []byte {
	if c, n, ok := strings.Cut(s, "*"); ok && len(c) == 1 {
		k, err := strconv.Atoi(n)
		if err != nil {
			d.Fatalf(t, "value %q: %v", s, err)
		}
		return bytes.Repeat([]byte(c), k)
	}
	return []byte(s)
}

// ddShow prints a value as ddValue reads it.
func ddShow(v []byte) string {
	if len(v) > 8 && bytes.Count(v, v[:1]) == len(v) {
		return fmt.Sprintf("%c*%d", v[0], len(v))
	}
	return string(v)
}

// ddError prints err with the paths under root cut to their file names.
func ddError(root string, err error) string {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return fmt.Sprintf("corruption: %s at offset %d: %s\n", filepath.Base(ce.File), ce.Offset, ddCut(root, ce.Err.Error()))
	}
	return "error: " + ddCut(root, err.Error()) + "\n"
}

// ddCut cuts the log's directory off the paths in s.
func ddCut(root, s string) string {
	s = strings.ReplaceAll(s, PrefixDir(root, testPrefix)+string(filepath.Separator), "")
	return strings.ReplaceAll(s, root, "$ROOT")
}

// ddLogLines is a slog.Handler keeping what the log reports (Open's
// repairs), without times; take prints and forgets them.
type ddLogLines struct {
	mu    sync.Mutex
	lines []string
}

func (h *ddLogLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *ddLogLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *ddLogLines) WithGroup(string) slog.Handler            { return h }

func (h *ddLogLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "log %s: %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func (h *ddLogLines) take(root string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, l := range h.lines {
		b.WriteString(ddCut(root, l) + "\n")
	}
	h.lines = nil
	return b.String()
}
