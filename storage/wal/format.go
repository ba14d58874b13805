package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"bighive/storage/mutation"
)

// The on-disk format; doc.go draws both versions. These constants must
// not change without a new Version.
const (
	// Version is the format version written in every new file header.
	// Readers accept versionV1 too.
	Version   = 2
	versionV1 = 1

	magic            = "BHIVEWAL"
	headerFixedLenV1 = 32 // magic, version, prefix length, max flush, file ts, first seq
	headerFixedLen   = 36 // version 2: the same, then flags u32
	maxPrefixLen     = 1024
	frameHeaderLenV1 = 8  // length u32 + crc u32
	frameHeaderLen   = 16 // version 2: length u32 + crc u32 + log number u64
	payloadFixedLen  = 16
	// crcMaskV2 is XORed into every version-2 frame checksum, so that a
	// version-1 frame left in a recycled file never checks as version 2.
	crcMaskV2 = 0xa282ead8
	// flagRecycled (header flags, version 2): the file reuses a retired
	// log file, so the bytes past its data are stale frames, not zeros.
	flagRecycled = 1 << 0
	// MaxRecordBytes bounds the payload of one record (seq, timestamp,
	// tablet id and the encoded row mutation): a row mutation is at most
	// 256 MiB as counted by internal/limits (each operation counted at
	// least its encoded size), its key 4 KiB, and the rest fits the
	// 8 MiB left.
	MaxRecordBytes = 264 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors. Corruption is reported as a *CorruptionError wrapping one of
// ErrBadHeader, ErrChecksum or ErrBadRecord.
var (
	ErrClosed         = errors.New("wal: log closed")
	ErrFailed         = errors.New("wal: log failed after an I/O error")
	ErrBadName        = errors.New("wal: bad name")
	ErrBadOptions     = errors.New("wal: bad options")
	ErrRecordTooLarge = errors.New("wal: record too large")
	ErrBadHeader      = errors.New("wal: bad file header")
	ErrChecksum       = errors.New("wal: checksum mismatch")
	ErrBadRecord      = errors.New("wal: bad record")
	ErrBadPosition    = errors.New("wal: bad position")
)

// CorruptionError is damage that a crash cannot explain: a bad header, or a
// bad record with valid data after it. File is the path, Offset the byte
// offset of the damaged header or record frame.
type CorruptionError struct {
	File   string
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corruption in %s at offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// fileHeader is the first bytes of every log file.
type fileHeader struct {
	Version  uint16 // as read; appendTo writes Version
	Prefix   string
	FileTS   int64
	FirstSeq uint64 // seq of the file's first record; last seq of the log before it + 1
	MaxFlush uint32 // upper bound of one write of the flusher (torn-tail window)
	Flags    uint32 // version 2: flagRecycled
}

// size is the length of the header appendTo writes (the current version).
func (h *fileHeader) size() int { return headerFixedLen + len(h.Prefix) + 4 }

func (h *fileHeader) appendTo(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, Version)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.Prefix)))
	dst = binary.LittleEndian.AppendUint32(dst, h.MaxFlush)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.FileTS))
	dst = binary.LittleEndian.AppendUint64(dst, h.FirstSeq)
	dst = binary.LittleEndian.AppendUint32(dst, h.Flags)
	dst = append(dst, h.Prefix...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// frames is the record framing of the file the header starts.
func (h *fileHeader) frames() frameFmt {
	if h.Version == versionV1 {
		return framesV1
	}
	return framesV2(h.FileTS)
}

// headerState classifies the first bytes of a file.
type headerState int

const (
	headerOK     headerState = iota
	headerUnused             // all zero: prepared but never activated
	headerShort              // shorter than a header: torn before anything was durable
	headerBad
)

// decodeHeader parses the header (version 1 or 2) at the start of b and
// returns its length.
func decodeHeader(b []byte) (fileHeader, int, headerState, error) {
	var h fileHeader
	const minLen = headerFixedLenV1 + 4
	if len(b) < minLen {
		if allZero(b) || len(b) < len(magic) && string(b) == magic[:len(b)] ||
			len(b) >= len(magic) && string(b[:len(magic)]) == magic {
			return h, 0, headerShort, nil
		}
		return h, 0, headerBad, fmt.Errorf("%w: %d bytes", ErrBadHeader, len(b))
	}
	if allZero(b[:minLen]) {
		return h, 0, headerUnused, nil
	}
	if string(b[:len(magic)]) != magic {
		return h, 0, headerBad, fmt.Errorf("%w: bad magic %q", ErrBadHeader, b[:len(magic)])
	}
	fixed := 0
	switch v := binary.LittleEndian.Uint16(b[8:]); v {
	case versionV1:
		fixed = headerFixedLenV1
	case Version:
		fixed = headerFixedLen
	default:
		return h, 0, headerBad, fmt.Errorf("%w: version %d, want %d or %d", ErrBadHeader, v, versionV1, Version)
	}
	h.Version = binary.LittleEndian.Uint16(b[8:])
	n := int(binary.LittleEndian.Uint16(b[10:]))
	if n == 0 || n > maxPrefixLen {
		return h, 0, headerBad, fmt.Errorf("%w: prefix length %d", ErrBadHeader, n)
	}
	size := fixed + n + 4
	if len(b) < size {
		return h, 0, headerShort, nil
	}
	if got, want := crc32.Checksum(b[:size-4], castagnoli), binary.LittleEndian.Uint32(b[size-4:]); got != want {
		return h, 0, headerBad, fmt.Errorf("%w: %w: %08x, want %08x", ErrBadHeader, ErrChecksum, got, want)
	}
	h.MaxFlush = binary.LittleEndian.Uint32(b[12:])
	h.FileTS = int64(binary.LittleEndian.Uint64(b[16:]))
	h.FirstSeq = binary.LittleEndian.Uint64(b[24:])
	if h.Version != versionV1 {
		h.Flags = binary.LittleEndian.Uint32(b[32:])
		if h.Flags&^flagRecycled != 0 {
			return h, 0, headerBad, fmt.Errorf("%w: unknown flags %#x", ErrBadHeader, h.Flags)
		}
	}
	h.Prefix = string(b[fixed : fixed+n])
	return h, size, headerOK, nil
}

// frameFmt is the record framing of one file: version 1 (length, crc) or
// version 2 (length, crc, log number). A version-2 frame belongs to the
// file whose log number (its FileTS) it carries; a frame with another
// number is a stale frame of the file's previous life.
type frameFmt struct {
	hdr    int    // frame header bytes
	v2     bool   // frames carry a log number
	logNum uint64 // version 2: the file's log number
}

var framesV1 = frameFmt{hdr: frameHeaderLenV1}

func framesV2(logNum int64) frameFmt {
	return frameFmt{hdr: frameHeaderLen, v2: true, logNum: uint64(logNum)}
}

// encodeFrame encodes the frame of a record, all but its sequence number
// (and, in version 2, its log number), onto dst, with a frame header of
// hdr bytes, and returns the checksum so far. Appenders run it outside the
// log's lock; sealFrame finishes the frame under it. The sequence number
// is the last field of the payload, and the log number comes last in the
// checksum, so that only those 16 bytes are checksummed under the lock.
func encodeFrame(dst []byte, hdr int, ts int64, tablet string, m *mutation.RowMutation) ([]byte, uint32) {
	start := len(dst)
	dst = append(dst, make([]byte, hdr)...) // length, crc (and log number), filled below and by sealFrame
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
	dst = binary.AppendUvarint(dst, uint64(len(tablet)))
	dst = append(dst, tablet...)
	dst = m.Append(dst)
	frame := dst[start:]
	binary.LittleEndian.PutUint32(frame, uint32(len(frame)-hdr+8))
	return dst, crc32.Update(crc32.Checksum(frame[:4], castagnoli), castagnoli, frame[hdr:])
}

// sealFrame appends frame (made by encodeFrame for ff, with
// checksum-so-far partial) and seq to buf, completing the checksum.
func sealFrame(buf, frame []byte, partial uint32, seq uint64, ff frameFmt) []byte {
	start := len(buf)
	buf = append(buf, frame...)
	buf = binary.LittleEndian.AppendUint64(buf, seq)
	crc := crc32.Update(partial, castagnoli, buf[len(buf)-8:])
	if ff.v2 {
		binary.LittleEndian.PutUint64(buf[start+8:], ff.logNum)
		crc = crc32.Update(crc, castagnoli, buf[start+8:start+16]) ^ crcMaskV2
	}
	binary.LittleEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// appendRecord appends the whole frame of one record to dst.
func appendRecord(dst []byte, ff frameFmt, seq uint64, ts int64, tablet string, m *mutation.RowMutation) []byte {
	frame, crc := encodeFrame(nil, ff.hdr, ts, tablet, m)
	return sealFrame(dst, frame, crc, seq, ff)
}

// recordSize bounds the frame length of a record (version 2).
func recordSize(tablet string, m *mutation.RowMutation) int {
	return frameHeaderLen + payloadFixedLen + binary.MaxVarintLen64 + len(tablet) + m.Size()
}

// frameState classifies the bytes at one offset of a file.
type frameState int

const (
	frameOK    frameState = iota
	frameEnd              // a zero frame header: nothing more was written here
	frameShort            // the frame runs past the end of the file
	frameBad              // checksum or length is wrong
	frameStale            // version 2: a whole frame of another log number
)

// readFrame checks the frame at the start of b and returns its payload.
func readFrame(b []byte, ff frameFmt) ([]byte, frameState, error) {
	if len(b) < ff.hdr {
		if allZero(b) {
			return nil, frameEnd, nil
		}
		return nil, frameShort, nil
	}
	n := binary.LittleEndian.Uint32(b)
	crc := binary.LittleEndian.Uint32(b[4:])
	var logNum uint64
	if ff.v2 {
		logNum = binary.LittleEndian.Uint64(b[8:])
	}
	if n == 0 && crc == 0 && logNum == 0 {
		return nil, frameEnd, nil
	}
	if n < payloadFixedLen+1 || n > MaxRecordBytes {
		return nil, frameBad, fmt.Errorf("%w: frame length %d", ErrBadRecord, n)
	}
	if uint64(len(b)-ff.hdr) < uint64(n) {
		return nil, frameShort, nil
	}
	payload := b[ff.hdr : ff.hdr+int(n)]
	got := crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, payload)
	if ff.v2 {
		got = crc32.Update(got, castagnoli, b[8:16]) ^ crcMaskV2
	}
	if got != crc {
		return nil, frameBad, fmt.Errorf("%w: record checksum %08x, want %08x", ErrChecksum, got, crc)
	}
	if ff.v2 && logNum != ff.logNum {
		return nil, frameStale, fmt.Errorf("%w: record of log number %d in the file of %d", ErrBadRecord, logNum, ff.logNum)
	}
	return payload, frameOK, nil
}

// decodePayload parses a payload whose checksum matched.
func decodePayload(p []byte, r *Record) error {
	r.Timestamp = int64(binary.LittleEndian.Uint64(p))
	r.Seq = binary.LittleEndian.Uint64(p[len(p)-8:])
	p = p[8 : len(p)-8]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return fmt.Errorf("%w: tablet id length", ErrBadRecord)
	}
	r.TabletID = string(p[k : k+int(n)])
	m, err := mutation.Decode(p[k+int(n):], false)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	r.Mutation = m
	return nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
