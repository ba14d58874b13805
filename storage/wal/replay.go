package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// Record is one replayed record: one atomic row mutation of one tablet.
type Record struct {
	Seq       uint64 // per tserver, increasing by one per record across files and restarts
	Timestamp int64  // wall time of the append, µs since the Unix epoch
	TabletID  string
	Mutation  mutation.RowMutation // owns its bytes; the caller may keep it
	File      Position             // the file holding the record
	Offset    int64                // offset of the record's frame in File
}

// FileReport describes what replay found in one file.
type FileReport struct {
	Path     string
	FileTS   int64
	FirstSeq uint64 // from the header (0 when Unused)
	Records  int    // whole records read
	LastSeq  uint64 // seq of the last whole record (0 when Records == 0)
	// End is the offset just past the last whole record: where a torn
	// tail starts, and what the owner truncates the file to.
	End int64
	// Unused is a file whose header was never written (prepared, never
	// activated, or cut off before its first sync).
	Unused bool
	// Torn is true when non-zero bytes follow End: a record cut off by a
	// crash. Replay stopped reading the file at End. TornBytes counts the
	// bytes from End to the last non-zero byte.
	Torn      bool
	TornBytes int64
	// Size is the file's size (pre-zeroed space included).
	Size int64
}

// ReplayReport lists the files a replay read, oldest first.
type ReplayReport struct {
	Files   []FileReport
	Records int // records handed to the callback
}

// Torn reports whether any file had a torn tail.
func (r *ReplayReport) Torn() bool {
	for i := range r.Files {
		if r.Files[i].Torn {
			return true
		}
	}
	return false
}

// Files lists the log files of prefix under root, oldest first. Temporary
// and foreign files in the directory are ignored.
func Files(fsys vfs.FS, root, prefix string) ([]Position, error) {
	if _, err := ParsePrefix(prefix); err != nil {
		return nil, err
	}
	ents, err := fsys.ReadDir(PrefixDir(root, prefix))
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", PrefixDir(root, prefix), err)
	}
	var out []Position
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		ts, err := ParseFileName(e.Name())
		if err != nil {
			continue
		}
		out = append(out, Position{Prefix: prefix, FileTS: ts})
	}
	slices.SortFunc(out, func(a, b Position) int {
		switch {
		case a.FileTS < b.FileTS:
			return -1
		case a.FileTS > b.FileTS:
			return 1
		}
		return 0
	})
	return out, nil
}

// Replay reads the log file at from and every later file of from.Prefix,
// in timestamp order, and calls fn for every record of every tablet, in
// sequence order. Each file is read once; the caller filters by
// Record.TabletID (ReplayTablets does that for several tablets at once).
// If no file at from exists, replay starts at the first later file: a
// position handed out by Roll names a file that may not have been created
// before a crash, and then holds no record.
//
// A torn tail is accepted only at the end of the newest file that has a
// header, within one flush window of the end of the file (doc.go, "Torn
// tails and corruption"); it is listed in the report. Sequence numbers
// must continue from each file to the next. Anything else (damage with
// valid data after it, a torn tail in an older file, a gap in the
// sequence numbers) is a *CorruptionError naming the file and the offset;
// replay stops there and returns the report so far. Records handed to fn
// before the error were whole and valid, but the caller must not serve
// without the rest. An error from fn stops replay and is returned as is.
//
// Replay only reads; it is safe to run on the files of a live log, though
// it then sees only what was written when it read each file.
func Replay(ctx context.Context, fsys vfs.FS, root string, from Position, fn func(*Record) error) (ReplayReport, error) {
	var rep ReplayReport
	files, err := Files(fsys, root, from.Prefix)
	if err != nil {
		return rep, err
	}
	var ch chain
	for _, pos := range files {
		if pos.FileTS < from.FileTS {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		fr, err := ch.replayFile(fsys, FilePath(root, pos), &pos, func(r *Record) error {
			rep.Records++
			return fn(r)
		})
		rep.Files = append(rep.Files, fr)
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// chain checks what holds across the files of one prefix, read oldest
// first: a torn tail may end only the newest file that has a header (a
// crash damages only the last flush, and the log starts a file only after
// every flush of the previous one is durable), and each header's FirstSeq
// is the last sequence number of the file before it + 1. Files without a
// header (Unused) hold no record and are skipped. The first file read has
// no predecessor to check against.
type chain struct {
	prev *FileReport // the last file read that has a header
}

// check checks the file at path, whose bytes start with head, against the
// files read before it.
func (c *chain) check(path string, head []byte) error {
	h, _, st, _ := decodeHeader(head)
	if st != headerOK || c.prev == nil {
		return nil // a bad header is scanFile's to report
	}
	p := c.prev
	if p.Torn {
		return &CorruptionError{File: p.Path, Offset: p.End, Err: fmt.Errorf(
			"%w: damaged record in a file that is not the newest (%s follows it)", ErrBadRecord, filepath.Base(path))}
	}
	if want := p.FirstSeq + uint64(p.Records); h.FirstSeq != want {
		return &CorruptionError{File: path, Offset: 0, Err: fmt.Errorf(
			"%w: first seq %d, but the file before it (%s) ends at seq %d", ErrBadHeader, h.FirstSeq, filepath.Base(p.Path), want-1)}
	}
	return nil
}

// add records a file that was read.
func (c *chain) add(fr FileReport) {
	if !fr.Unused {
		c.prev = &fr
	}
}

// replayFile reads and scans one file of the chain.
func (c *chain) replayFile(fsys vfs.FS, path string, pos *Position, fn func(*Record) error) (FileReport, error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return FileReport{Path: path}, fmt.Errorf("wal: read %s: %w", path, err)
	}
	if err := c.check(path, data); err != nil {
		return FileReport{Path: path, Size: int64(len(data))}, err
	}
	fr, err := scanFile(path, data, pos, fn)
	if err == nil {
		c.add(fr)
	}
	return fr, err
}

// checkNext checks the first file with a header among files (the files of
// the prefix after the ones read) against the chain, reading only its
// header. Readers of a part of a prefix (SplitLog of a bounded range) use
// it to learn whether the last file they read is the newest.
func (c *chain) checkNext(fsys vfs.FS, root string, files []Position) error {
	if c.prev == nil {
		return nil
	}
	for _, pos := range files {
		path := FilePath(root, pos)
		head, err := readHead(fsys, path)
		if err != nil {
			return err
		}
		if _, _, st, _ := decodeHeader(head); st == headerUnused || st == headerShort {
			continue
		}
		return c.check(path, head)
	}
	return nil
}

// readHead reads the first bytes of a file, enough for any header.
func readHead(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, max(headerFixedLen, headerFixedLenV1)+maxPrefixLen+4)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("wal: read %s: %w", path, err)
	}
	return b[:n], nil
}

// ReplayTablets recovers several tablets from one prefix with one read of
// each file: from maps a tablet id to the FileTS of that tablet's position
// in the prefix. It replays from the smallest of them and calls fn only for
// records of a listed tablet that lie in that tablet's file or later.
func ReplayTablets(ctx context.Context, fsys vfs.FS, root, prefix string, from map[string]int64, fn func(*Record) error) (ReplayReport, error) {
	if len(from) == 0 {
		return ReplayReport{}, nil
	}
	first := int64(-1)
	for _, ts := range from {
		if first < 0 || ts < first {
			first = ts
		}
	}
	var n int
	rep, err := Replay(ctx, fsys, root, Position{Prefix: prefix, FileTS: first}, func(r *Record) error {
		ts, ok := from[r.TabletID]
		if !ok || r.File.FileTS < ts {
			return nil
		}
		n++
		return fn(r)
	})
	rep.Records = n
	return rep, err
}

// ReplayFile reads the one log file at path and calls fn for each record.
// Torn tails and corruption are handled as in Replay.
func ReplayFile(fsys vfs.FS, path string, fn func(*Record) error) (FileReport, error) {
	return replayFile(fsys, path, nil, fn)
}

func replayFile(fsys vfs.FS, path string, pos *Position, fn func(*Record) error) (FileReport, error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return FileReport{Path: path}, fmt.Errorf("wal: read %s: %w", path, err)
	}
	return scanFile(path, data, pos, fn)
}

// scanFile parses the bytes of one file. pos, when known, is what the file
// name says; the header must agree with it.
func scanFile(path string, data []byte, pos *Position, fn func(*Record) error) (FileReport, error) {
	rep := FileReport{Path: path, Size: int64(len(data))}
	if pos == nil {
		if ts, err := ParseFileName(filepath.Base(path)); err == nil {
			rep.FileTS = ts
		}
	} else {
		rep.FileTS = pos.FileTS
	}
	h, off, st, err := decodeHeader(data)
	switch st {
	case headerBad:
		return rep, &CorruptionError{File: path, Offset: 0, Err: err}
	case headerUnused, headerShort:
		rep.Unused = true
		if !allZero(data) {
			rep.Torn = true
			rep.TornBytes = int64(lastNonZero(data))
		}
		return rep, nil
	}
	if pos != nil && (h.Prefix != pos.Prefix || h.FileTS != pos.FileTS) {
		return rep, &CorruptionError{File: path, Offset: 0,
			Err: fmt.Errorf("%w: header names %s/%d, file is %s", ErrBadHeader, h.Prefix, h.FileTS, pos)}
	}
	filePos := Position{Prefix: h.Prefix, FileTS: h.FileTS}
	ff := h.frames()
	rep.FirstSeq = h.FirstSeq
	rep.End = int64(off)
	seq := h.FirstSeq
	var rec Record
	for {
		payload, fst, ferr := readFrame(data[off:], ff)
		switch fst {
		case frameOK:
			rec = Record{File: filePos, Offset: int64(off)}
			if err := decodePayload(payload, &rec); err != nil {
				return rep, &CorruptionError{File: path, Offset: int64(off), Err: err}
			}
			if rec.Seq != seq {
				return rep, &CorruptionError{File: path, Offset: int64(off),
					Err: fmt.Errorf("%w: seq %d, want %d", ErrBadRecord, rec.Seq, seq)}
			}
			if fn != nil {
				if err := fn(&rec); err != nil {
					return rep, err
				}
			}
			seq++
			off += ff.hdr + len(payload)
			rep.Records++
			rep.LastSeq = rec.Seq
			rep.End = int64(off)
			continue
		case frameEnd:
			ferr = fmt.Errorf("%w: zero frame header before written data", ErrBadRecord)
		case frameShort:
			// The frame claims more bytes than the file has. That is what
			// a crash leaves in the middle of a record, and also what a
			// damaged length field looks like: the window rule below
			// tells them apart.
			ferr = fmt.Errorf("%w: a frame of %d bytes runs past the end of the file (%d bytes)", ErrBadRecord,
				frameLen(data[off:], ff.hdr), len(data))
		}
		if ferr == nil {
			ferr = errors.New("wal: bad frame")
		}
		rest := data[off:]
		if h.Flags&flagRecycled != 0 {
			end, window := recycledTail(rest, fst, int(h.MaxFlush), ff)
			switch {
			case end:
				return rep, nil
			case window >= 0:
				rep.Torn = true
				rep.TornBytes = int64(lastNonZero(rest[:min(len(rest), window)]))
				return rep, nil
			}
			return rep, &CorruptionError{File: path, Offset: int64(off),
				Err: fmt.Errorf("%w, and frames of this file follow beyond the last flush", ferr)}
		}
		if fst == frameEnd && allZero(rest) {
			return rep, nil
		}
		if tornTail(rest, int(h.MaxFlush), seq, ff) {
			rep.Torn = true
			rep.TornBytes = int64(lastNonZero(rest))
			return rep, nil
		}
		return rep, &CorruptionError{File: path, Offset: int64(off), Err: ferr}
	}
}

// recycledTail judges the rest of a recycled file from the first frame
// that is not a whole record of the file (rest starts there, fst is what
// readFrame made of it). Past the data, a recycled file holds its
// previous lives' frames, whose log numbers differ, so "dead" bytes are
// bytes where no live frame (a frame with a good checksum and the file's
// log number) starts; zeros are dead too. It reports:
//
//   - end: the data ends cleanly here. The frame is no frame of this file
//     at all (its log number field differs: zeros, a stale frame, or the
//     inside of one), and everything after it is dead.
//   - torn (window >= 0): what a crash leaves. Everything from window on
//     is dead; window is maxFlush, or the frame's claimed length when
//     that is larger and no live frame starts inside it.
//   - corruption (window < 0): a live frame starts past the window, so
//     the damage has data of this file after the last flush.
func recycledTail(rest []byte, fst frameState, maxFlush int, ff frameFmt) (end bool, window int) {
	ours := len(rest) >= ff.hdr && binary.LittleEndian.Uint64(rest[8:]) == ff.logNum
	if !ours && !liveFrameIn(rest, 0, len(rest), ff) {
		return true, 0
	}
	window = maxFlush
	if n := frameLen(rest, ff.hdr); n > window && !liveFrameIn(rest, 1, min(n, len(rest)), ff) {
		window = n
	}
	if window >= len(rest) || !liveFrameIn(rest, window, len(rest), ff) {
		return false, window
	}
	return false, -1
}

// liveFrameIn reports whether a live frame of ff (a record with a good
// checksum and ff's log number) starts in b at an offset in
// [from, to). It looks for the log number's 8 bytes and checksums only
// there; after checksumming a few times len(b) it gives up and says yes,
// so crafted data costs linear time and makes replay refuse, never drop.
func liveFrameIn(b []byte, from, to int, ff frameFmt) bool {
	var num [8]byte
	binary.LittleEndian.PutUint64(num[:], ff.logNum)
	budget := 4*len(b) + 1<<20
	for p := max(from, 0); p < to && p+ff.hdr <= len(b); {
		i := bytes.Index(b[p+8:], num[:])
		if i < 0 {
			return false
		}
		q := p + i // the frame that would hold the number at q+8
		if q >= to {
			return false
		}
		if budget -= frameLen(b[q:], ff.hdr); budget < 0 {
			return true
		}
		if _, st, _ := readFrame(b[q:], ff); st == frameOK {
			return true
		}
		p = q + 1
	}
	return false
}

// tornTail reports whether rest, which starts with a frame that is not a
// whole valid record (bad checksum or length, cut off by the end of the
// file, or a zero header before data), is what a crash can leave: damage
// confined to the last flush. That flush started at or before the frame
// and wrote at most maxFlush bytes, or one larger record alone. So every byte past the window must be zero,
// where the window is maxFlush, or the frame's claimed length if that is
// larger. A claimed length can itself be the damage, and would then
// swallow the valid records after it: it widens the window only if no
// valid record of the log's own making lies inside it (laterRecord), as
// none can inside a lone large record. seq is the sequence number the
// frame should hold.
func tornTail(rest []byte, maxFlush int, seq uint64, ff frameFmt) bool {
	window := maxFlush
	if n := frameLen(rest, ff.hdr); n > window && !laterRecord(rest[:min(n, len(rest))], seq, ff) {
		window = n
	}
	return len(rest) <= window || allZero(rest[window:])
}

// laterRecord reports whether b, from its frame header's end on, holds a
// whole valid frame carrying a sequence number v+1 > seq right after 8
// bytes holding v: the last field of the record before it. It looks at
// every offset once and checksums a candidate only when those 8 bytes hold
// a sequence number b could contain, and it gives up (false) after
// checksumming a few times len(b), so data crafted to hold many
// near-matches costs linear time.
func laterRecord(b []byte, seq uint64, ff frameFmt) bool {
	minFrame := ff.hdr + payloadFixedLen + 1
	hi := seq + uint64(len(b)/minFrame) + 1
	budget := 4*len(b) + 1<<20 // bytes checksummed
	for q := ff.hdr; q+8+minFrame <= len(b); q++ {
		v := binary.LittleEndian.Uint64(b[q:])
		if v < seq || v >= hi {
			continue
		}
		e := q + 8 // where the next frame would start
		n := frameLen(b[e:], ff.hdr)
		if n < minFrame || e+n > len(b) {
			continue
		}
		if budget -= n; budget < 0 {
			return false
		}
		if payload, st, _ := readFrame(b[e:], ff); st == frameOK && binary.LittleEndian.Uint64(payload[len(payload)-8:]) == v+1 {
			return true
		}
	}
	return false
}

// frameLen is the length a frame header claims, or 0 when it claims an
// impossible one.
func frameLen(b []byte, hdr int) int {
	if len(b) < hdr {
		return 0
	}
	n := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24
	if n > MaxRecordBytes {
		return 0
	}
	return hdr + int(n)
}

// lastNonZero is the length of b without its trailing zero bytes.
func lastNonZero(b []byte) int {
	n := len(b)
	for n >= 8 && allZero(b[n-8:n]) {
		n -= 8
	}
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}
