package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"bighive/internal/mutation"
)

// The on-disk format; doc.go draws it. These constants must not change
// without a new Version.
const (
	// Version is the format version written in every file header.
	Version = 1

	magic           = "BHIVEWAL"
	headerFixedLen  = 32 // magic, version, prefix length, max flush, file ts, first seq
	maxPrefixLen    = 1024
	frameHeaderLen  = 8 // length u32 + crc u32
	payloadFixedLen = 16
	// MaxRecordBytes bounds the payload of one record (seq, timestamp,
	// tablet id and the encoded row mutation).
	MaxRecordBytes = 128 << 20
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
	Prefix   string
	FileTS   int64
	FirstSeq uint64 // seq of the file's first record; last seq of the log before it + 1
	MaxFlush uint32 // upper bound of one write of the flusher (torn-tail window)
}

func (h *fileHeader) size() int { return headerFixedLen + len(h.Prefix) + 4 }

func (h *fileHeader) appendTo(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, Version)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.Prefix)))
	dst = binary.LittleEndian.AppendUint32(dst, h.MaxFlush)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.FileTS))
	dst = binary.LittleEndian.AppendUint64(dst, h.FirstSeq)
	dst = append(dst, h.Prefix...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// headerState classifies the first bytes of a file.
type headerState int

const (
	headerOK     headerState = iota
	headerUnused             // all zero: prepared but never activated
	headerShort              // shorter than a header: torn before anything was durable
	headerBad
)

// decodeHeader parses the header at the start of b and returns its length.
func decodeHeader(b []byte) (fileHeader, int, headerState, error) {
	var h fileHeader
	if len(b) < headerFixedLen+4 {
		if allZero(b) || len(b) < len(magic) && string(b) == magic[:len(b)] ||
			len(b) >= len(magic) && string(b[:len(magic)]) == magic {
			return h, 0, headerShort, nil
		}
		return h, 0, headerBad, fmt.Errorf("%w: %d bytes", ErrBadHeader, len(b))
	}
	if allZero(b[:headerFixedLen+4]) {
		return h, 0, headerUnused, nil
	}
	if string(b[:len(magic)]) != magic {
		return h, 0, headerBad, fmt.Errorf("%w: bad magic %q", ErrBadHeader, b[:len(magic)])
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != Version {
		return h, 0, headerBad, fmt.Errorf("%w: version %d, want %d", ErrBadHeader, v, Version)
	}
	n := int(binary.LittleEndian.Uint16(b[10:]))
	if n == 0 || n > maxPrefixLen {
		return h, 0, headerBad, fmt.Errorf("%w: prefix length %d", ErrBadHeader, n)
	}
	size := headerFixedLen + n + 4
	if len(b) < size {
		return h, 0, headerShort, nil
	}
	if got, want := crc32.Checksum(b[:size-4], castagnoli), binary.LittleEndian.Uint32(b[size-4:]); got != want {
		return h, 0, headerBad, fmt.Errorf("%w: %w: %08x, want %08x", ErrBadHeader, ErrChecksum, got, want)
	}
	h.MaxFlush = binary.LittleEndian.Uint32(b[12:])
	h.FileTS = int64(binary.LittleEndian.Uint64(b[16:]))
	h.FirstSeq = binary.LittleEndian.Uint64(b[24:])
	h.Prefix = string(b[headerFixedLen : headerFixedLen+n])
	return h, size, headerOK, nil
}

// encodeFrame encodes the frame of a record, all but its sequence number,
// onto dst, and returns the checksum so far. Appenders run it outside the
// log's lock; sealFrame finishes the frame under it. The sequence number
// is the last field of the payload so that only its 8 bytes are
// checksummed under the lock.
func encodeFrame(dst []byte, ts int64, tablet string, m *mutation.RowMutation) ([]byte, uint32) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // length and crc, filled below and by sealFrame
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
	dst = binary.AppendUvarint(dst, uint64(len(tablet)))
	dst = append(dst, tablet...)
	dst = m.Append(dst)
	frame := dst[start:]
	binary.LittleEndian.PutUint32(frame, uint32(len(frame)-frameHeaderLen+8))
	return dst, crc32.Update(crc32.Checksum(frame[:4], castagnoli), castagnoli, frame[frameHeaderLen:])
}

// sealFrame appends frame (made by encodeFrame, with checksum-so-far
// partial) and seq to buf, completing the checksum.
func sealFrame(buf, frame []byte, partial uint32, seq uint64) []byte {
	start := len(buf)
	buf = append(buf, frame...)
	buf = binary.LittleEndian.AppendUint64(buf, seq)
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Update(partial, castagnoli, buf[len(buf)-8:]))
	return buf
}

// appendRecord appends the whole frame of one record to dst.
func appendRecord(dst []byte, seq uint64, ts int64, tablet string, m *mutation.RowMutation) []byte {
	frame, crc := encodeFrame(nil, ts, tablet, m)
	return sealFrame(dst, frame, crc, seq)
}

// recordSize bounds the frame length of a record.
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
)

// readFrame checks the frame at the start of b and returns its payload.
func readFrame(b []byte) ([]byte, frameState, error) {
	if len(b) < frameHeaderLen {
		if allZero(b) {
			return nil, frameEnd, nil
		}
		return nil, frameShort, nil
	}
	n := binary.LittleEndian.Uint32(b)
	crc := binary.LittleEndian.Uint32(b[4:])
	if n == 0 && crc == 0 {
		return nil, frameEnd, nil
	}
	if n < payloadFixedLen+1 || n > MaxRecordBytes {
		return nil, frameBad, fmt.Errorf("%w: frame length %d", ErrBadRecord, n)
	}
	if uint64(len(b)-frameHeaderLen) < uint64(n) {
		return nil, frameShort, nil
	}
	payload := b[frameHeaderLen : frameHeaderLen+int(n)]
	if got := crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, payload); got != crc {
		return nil, frameBad, fmt.Errorf("%w: record checksum %08x, want %08x", ErrChecksum, got, crc)
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
