package tsfile

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"bighive/storage/blockstore"
)

// Compression is the codec of a family's data pages. The zero value,
// CompressionDefault, means DefaultCompression, so a schema that names no
// codec gets it. (The codec byte stored in a page is another numbering:
// see the codec* constants.)
type Compression uint8

// Codecs.
const (
	// CompressionDefault is DefaultCompression.
	CompressionDefault Compression = iota
	// CompressionNone stores pages raw.
	CompressionNone
	// CompressionSnappy stores pages in the Snappy block format (written
	// by s2 in its Snappy-compatible mode; any Snappy decoder reads it).
	CompressionSnappy
	// CompressionZstd stores each page as one zstd frame.
	CompressionZstd
)

// DefaultCompression is the codec of a family whose schema names none.
const DefaultCompression = CompressionSnappy

// The codec byte at the start of every page from format version 3 on. The
// values are part of the format and must not change.
const (
	codecRaw    byte = 0
	codecSnappy byte = 1
	codecZstd   byte = 2
)

// MaxPageBytes bounds a page's uncompressed length: a page is about
// WriterOptions.PageSize plus at most one entry (a value is at most
// 100 MiB, its key and qualifier at most 20 KiB), so a page holding one
// entry of the largest value fits. The writer refuses a larger page and
// the reader calls a page header stating a larger one corrupt, so damaged
// bytes never make it allocate more.
const MaxPageBytes = 128 << 20

func (c Compression) String() string {
	switch c {
	case CompressionDefault:
		return "default"
	case CompressionNone:
		return "none"
	case CompressionSnappy:
		return "snappy"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// ParseCompression parses "none", "snappy" or "zstd" ("" and "default"
// are CompressionDefault).
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "default":
		return CompressionDefault, nil
	case "none":
		return CompressionNone, nil
	case "snappy":
		return CompressionSnappy, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return 0, fmt.Errorf("tsfile: unknown compression %q (want none, snappy or zstd)", s)
}

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// zstdCodec returns the shared zstd encoder and decoder (both safe for
// concurrent EncodeAll and DecodeAll). The page checksum covers the frame,
// so the frame's own checksum is left out; DecodeAll output is limited to
// the capacity the caller gives (the page's stated length).
func zstdCodec() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
		if zstdErr != nil {
			return
		}
		zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(MaxPageBytes), zstd.WithDecodeAllCapLimit(true))
	})
	if zstdErr != nil {
		return nil, nil, fmt.Errorf("tsfile: zstd: %w", zstdErr)
	}
	return zstdEnc, zstdDec, nil
}

// encodePage appends to dst the stored form of a page body (entry*
// count:u32): codec byte, uvarint raw length, payload, crc32c over all of
// it. The payload is c's encoding of body when that is at least an eighth
// smaller than body (smaller gains do not pay for decompressing on every
// cache miss), else body itself under CompressionNone. scratch is a
// reusable buffer; the grown one is returned with dst.
func encodePage(dst, scratch, body []byte, c Compression) (page, scratchOut []byte, err error) {
	if len(body) > MaxPageBytes {
		return dst, scratch, fmt.Errorf("tsfile: page of %d bytes is over the limit of %d", len(body), MaxPageBytes)
	}
	payload := body
	used, codec := codecRaw, codecRaw
	switch c {
	case CompressionDefault:
		return encodePage(dst, scratch, body, DefaultCompression)
	case CompressionNone:
	case CompressionSnappy:
		if need := s2.MaxEncodedLen(len(body)); cap(scratch) < need {
			scratch = make([]byte, need)
		}
		scratch = s2.EncodeSnappy(scratch[:cap(scratch)], body)
		codec = codecSnappy
	case CompressionZstd:
		enc, _, err := zstdCodec()
		if err != nil {
			return dst, scratch, err
		}
		scratch = enc.EncodeAll(body, scratch[:0])
		codec = codecZstd
	default:
		return dst, scratch, fmt.Errorf("tsfile: unknown compression %v", c)
	}
	if codec != codecRaw && len(scratch) < len(body)-len(body)/8 {
		payload, used = scratch, codec
	}
	start := len(dst)
	dst = append(dst, used)
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	dst = append(dst, payload...)
	dst = binary.LittleEndian.AppendUint32(dst, crc(dst[start:]))
	return dst, scratch, nil
}

// storedPage is a page of format version 3 or later whose checksum and
// header verifyPage checked.
type storedPage struct {
	id      blockstore.BlockID
	off     int64 // of the page in its data block
	codec   byte
	raw     int // the body's length, stated by the header
	hdrLen  int
	payload []byte
}

// verifyPage checks a stored page of format version 3 or later (at
// offset off of data block id): the checksum first, over the stored
// bytes, then the header (a known codec, 4 <= rawLen <= MaxPageBytes, and
// a raw payload of exactly rawLen bytes). Nothing is allocated from the
// header's word before the checksum matched.
func verifyPage(id blockstore.BlockID, off int64, page []byte) (storedPage, error) {
	if len(page) < 2+4 {
		return storedPage{}, corrupt(id, off, "page of %d bytes", len(page))
	}
	n := len(page) - 4
	if got, want := crc(page[:n]), binary.LittleEndian.Uint32(page[n:]); got != want {
		return storedPage{}, corrupt(id, off, "checksum mismatch in the %d-byte page (%08x != %08x)", len(page), got, want)
	}
	raw, k := binary.Uvarint(page[1:n])
	if k <= 0 {
		return storedPage{}, corrupt(id, off+1, "malformed page header")
	}
	if raw < 4 || raw > MaxPageBytes {
		return storedPage{}, corrupt(id, off+1, "page states %d uncompressed bytes (limit %d)", raw, MaxPageBytes)
	}
	p := storedPage{id: id, off: off, codec: page[0], raw: int(raw), hdrLen: 1 + k, payload: page[1+k : n : n]}
	switch p.codec {
	case codecRaw:
		if len(p.payload) != p.raw {
			return storedPage{}, corrupt(id, off+1, "raw page states %d bytes, holds %d", raw, len(p.payload))
		}
	case codecSnappy, codecZstd:
	default:
		return storedPage{}, corrupt(id, off, "unknown page codec %d", p.codec)
	}
	return p, nil
}

// inflate returns the page's body (entry* count:u32): the payload itself
// when the page is stored raw, else the payload decompressed into dst
// (len 0, cap p.raw; nil allocates), which must be exactly p.raw bytes.
func (p *storedPage) inflate(dst []byte) ([]byte, error) {
	at := p.off + int64(p.hdrLen)
	switch p.codec {
	case codecRaw:
		return p.payload, nil
	case codecSnappy:
		dl, err := s2.DecodedLen(p.payload)
		if err != nil || dl != p.raw {
			return nil, corrupt(p.id, at, "snappy page of %d bytes decodes to %d, header says %d (%v)", len(p.payload), dl, p.raw, err)
		}
		if cap(dst) < p.raw {
			dst = make([]byte, 0, p.raw)
		}
		body, err := s2.Decode(dst[:p.raw], p.payload)
		if err != nil {
			return nil, corrupt(p.id, at, "snappy: %v", err)
		}
		return body, nil
	case codecZstd:
		var h zstd.Header
		if err := h.Decode(p.payload); err != nil || (h.HasFCS && h.FrameContentSize != uint64(p.raw)) {
			return nil, corrupt(p.id, at, "zstd frame header states %d bytes, page header %d (%v)", h.FrameContentSize, p.raw, err)
		}
		_, dec, err := zstdCodec()
		if err != nil {
			return nil, err
		}
		if cap(dst) < p.raw {
			dst = make([]byte, 0, p.raw)
		}
		body, err := dec.DecodeAll(p.payload, dst[:0:p.raw])
		if err != nil {
			return nil, corrupt(p.id, at, "zstd: %v", err)
		}
		if len(body) != p.raw {
			return nil, corrupt(p.id, at, "zstd page decodes to %d bytes, header says %d", len(body), p.raw)
		}
		return body, nil
	}
	return nil, corrupt(p.id, p.off, "unknown page codec %d", p.codec)
}

// decodePage verifies a stored page of format version 3 or later and
// returns its body (verifyPage, then inflate). The body aliases page when
// the page is stored raw.
func decodePage(id blockstore.BlockID, off int64, page []byte) ([]byte, error) {
	p, err := verifyPage(id, off, page)
	if err != nil {
		return nil, err
	}
	return p.inflate(nil)
}
