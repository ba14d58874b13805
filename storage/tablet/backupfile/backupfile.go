package backupfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"

	"bighive/storage/memstore"
	"bighive/storage/mutation"

	spb "bighive/proto/storagepb"
)

// FormatVersion is the version this build writes and the only one it
// reads.
const FormatVersion = 1

// ManifestName is the manifest's file name in an export directory.
const ManifestName = "MANIFEST"

// MaxChunk bounds a data record's payload and the manifest's: a chunk
// ends at the first entry past ChunkTarget, and one entry holds up to a
// 100 MiB value (limits.MaxValueBytes) and its keys.
const MaxChunk = 128 << 20

// ChunkTarget is the payload size a writer aims for (a record ends at the
// first entry past it).
const ChunkTarget = 1 << 20

var (
	manifestMagic = []byte("BHBKMANI")
	dataMagic     = []byte("BHBKDATA")
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// ErrVersion is returned for a file of another format version.
var ErrVersion = errors.New("backupfile: unsupported format version")

// ErrCorrupt matches every *CorruptError.
var ErrCorrupt = errors.New("backupfile: corrupt")

// CorruptError names the file and the byte offset where it stopped making
// sense.
type CorruptError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("backupfile: %s at offset %d: %s", e.File, e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(file string, off int64, format string, args ...any) error {
	return &CorruptError{File: file, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Checksum is the crc32c (Castagnoli) the format uses.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// header is magic(8) version u32 (little-endian).
func appendHeader(dst, magic []byte) []byte {
	dst = append(dst, magic...)
	return binary.LittleEndian.AppendUint32(dst, FormatVersion)
}

// readHeader reads and checks a header; what names the file's kind.
func readHeader(r io.Reader, file string, magic []byte, what string) error {
	var h [12]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return corrupt(file, int64(n), "%s header cut short (%d of 12 bytes)", what, n)
		}
		return fmt.Errorf("backupfile: read %s: %w", file, err)
	}
	if !bytes.Equal(h[:8], magic) {
		return corrupt(file, 0, "not a backup %s (magic %q, want %q)", what, h[:8], magic)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != FormatVersion {
		return fmt.Errorf("%w: %s is a %s of format version %d; this build reads version %d", ErrVersion, file, what, v, FormatVersion)
	}
	return nil
}

// frame is length u32 | crc32c(payload) u32 | payload.
func appendFrame(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, Checksum(payload))
	return append(dst, payload...)
}

// readFrame reads one frame at off. io.EOF only when the file ends
// cleanly before it.
func readFrame(r io.Reader, file string, off int64, buf []byte) ([]byte, error) {
	var h [8]byte
	n, err := io.ReadFull(r, h[:])
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, corrupt(file, off, "record header cut short (%d of 8 bytes): the file is truncated", n)
	case err != nil:
		return nil, fmt.Errorf("backupfile: read %s at offset %d: %w", file, off, err)
	}
	size, sum := binary.LittleEndian.Uint32(h[:4]), binary.LittleEndian.Uint32(h[4:])
	if size > MaxChunk {
		return nil, corrupt(file, off, "record length %d over the limit %d", size, MaxChunk)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if n, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, corrupt(file, off, "record of %d bytes cut short after %d: the file is truncated", size, n)
		}
		return nil, fmt.Errorf("backupfile: read %s at offset %d: %w", file, off+8, err)
	}
	if got := Checksum(buf); got != sum {
		return nil, corrupt(file, off, "record checksum %08x, want %08x", got, sum)
	}
	return buf, nil
}

// WriteManifest writes m as a manifest file.
func WriteManifest(w io.Writer, m *spb.BackupManifest) error {
	payload, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("backupfile: encode manifest: %w", err)
	}
	if len(payload) > MaxChunk {
		return fmt.Errorf("backupfile: manifest of %d bytes over the limit %d", len(payload), MaxChunk)
	}
	_, err = w.Write(appendFrame(appendHeader(nil, manifestMagic), payload))
	return err
}

// ReadManifest reads a manifest file (file names it in errors) and checks
// that its tablets tile the row space and its file paths are relative.
func ReadManifest(r io.Reader, file string) (*spb.BackupManifest, error) {
	if err := readHeader(r, file, manifestMagic, "manifest"); err != nil {
		return nil, err
	}
	payload, err := readFrame(r, file, 12, nil)
	if err == io.EOF {
		return nil, corrupt(file, 12, "manifest has no body: the file is truncated")
	}
	if err != nil {
		return nil, err
	}
	var extra [1]byte
	if n, _ := r.Read(extra[:]); n > 0 {
		return nil, corrupt(file, 20+int64(len(payload)), "bytes after the manifest's body")
	}
	m := &spb.BackupManifest{}
	if err := proto.Unmarshal(payload, m); err != nil {
		return nil, corrupt(file, 20, "manifest body does not decode: %v", err)
	}
	if err := checkManifest(m); err != nil {
		return nil, corrupt(file, 20, "%v", err)
	}
	return m, nil
}

// checkManifest checks what an import relies on: tablets that tile the
// row space in order, and data file paths inside the directory.
func checkManifest(m *spb.BackupManifest) error {
	if m.Schema == nil {
		return errors.New("manifest has no schema")
	}
	if len(m.Tablets) == 0 {
		return errors.New("manifest has no tablets")
	}
	var prev []byte
	for i, t := range m.Tablets {
		last := i == len(m.Tablets)-1
		if !bytes.Equal(t.StartRow, prev) || (i > 0 && len(t.StartRow) == 0) || (len(t.EndRow) == 0) != last ||
			(!last && bytes.Compare(t.StartRow, t.EndRow) >= 0 && i > 0) {
			return fmt.Errorf("tablet %d [%q, %q) does not continue the row space", i, t.StartRow, t.EndRow)
		}
		prev = t.EndRow
		for _, f := range t.Files {
			if !ValidPath(f.Path) {
				return fmt.Errorf("tablet %d: data file path %q is not a plain relative path", i, f.Path)
			}
		}
	}
	return nil
}

// ValidPath says whether p is a relative path of the form the writer uses
// (no "..", no absolute path, no empty element).
func ValidPath(p string) bool {
	if p == "" || p == ManifestName || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// DataPath is the path, relative to the export directory, of tablet t's
// file f.
func DataPath(t, f int) string { return fmt.Sprintf("t%05d/f%05d.data", t, f) }

// DataWriter writes a data file: the header, then one record per chunk.
type DataWriter struct {
	w       io.Writer
	size    int64
	crc     uint32
	entries int64
	buf     []byte
}

// NewDataWriter writes the header to w.
func NewDataWriter(w io.Writer) (*DataWriter, error) {
	d := &DataWriter{w: w}
	return d, d.write(appendHeader(nil, dataMagic))
}

func (d *DataWriter) write(b []byte) error {
	if _, err := d.w.Write(b); err != nil {
		return fmt.Errorf("backupfile: write data file: %w", err)
	}
	d.size += int64(len(b))
	d.crc = crc32.Update(d.crc, castagnoli, b)
	return nil
}

// WriteChunk appends one record; the chunk must decode (ChunkEntries).
func (d *DataWriter) WriteChunk(chunk []byte) error {
	n, err := ChunkEntries(chunk)
	if err != nil {
		return fmt.Errorf("backupfile: chunk %d of the data file: %w", d.entries, err)
	}
	if len(chunk) > MaxChunk {
		return fmt.Errorf("backupfile: chunk of %d bytes over the limit %d", len(chunk), MaxChunk)
	}
	d.buf = appendFrame(d.buf[:0], chunk)
	d.entries += int64(n)
	return d.write(d.buf)
}

// Size, CRC and Entries describe what was written so far (the manifest's
// entry for the file).
func (d *DataWriter) Size() int64    { return d.size }
func (d *DataWriter) CRC() uint32    { return d.crc }
func (d *DataWriter) Entries() int64 { return d.entries }

// DataReader reads a data file's records, checking each checksum.
type DataReader struct {
	r       io.Reader
	file    string
	off     int64
	crc     uint32
	entries int64
	buf     []byte
}

// NewDataReader reads and checks the header; file names it in errors.
func NewDataReader(r io.Reader, file string) (*DataReader, error) {
	d := &DataReader{file: file}
	d.r = io.TeeReader(r, crcWriter{&d.crc})
	if err := readHeader(d.r, file, dataMagic, "data file"); err != nil {
		return nil, err
	}
	d.off = 12
	return d, nil
}

type crcWriter struct{ crc *uint32 }

func (c crcWriter) Write(b []byte) (int, error) {
	*c.crc = crc32.Update(*c.crc, castagnoli, b)
	return len(b), nil
}

// Next returns the next record's payload (valid until the next call), or
// io.EOF at the end of the file. The payload's entries count is checked.
func (d *DataReader) Next() ([]byte, error) {
	at := d.off
	p, err := readFrame(d.r, d.file, at, d.buf)
	if err != nil {
		return nil, err
	}
	d.buf = p
	d.off += 8 + int64(len(p))
	n, err := ChunkEntries(p)
	if err != nil {
		return nil, corrupt(d.file, at+8, "%v", err)
	}
	d.entries += int64(n)
	return p, nil
}

// Offset is the file offset of the next record; Entries and CRC are the
// entries and the checksum of what was read so far.
func (d *DataReader) Offset() int64  { return d.off }
func (d *DataReader) Entries() int64 { return d.entries }
func (d *DataReader) CRC() uint32    { return d.crc }

// Check compares what was read, at the end of the file, with the
// manifest's entry for it: a file cut at a record boundary, or with
// records swapped or from another file, reads as if whole.
func (d *DataReader) Check(f *spb.BackupManifestFile) error {
	switch {
	case d.off != f.Size:
		return corrupt(d.file, d.off, "file ends after %d bytes; the manifest says %d", d.off, f.Size)
	case d.crc != f.Crc32C:
		return corrupt(d.file, 0, "file checksum %08x; the manifest says %08x", d.crc, f.Crc32C)
	case d.entries != f.Entries:
		return corrupt(d.file, d.off, "file holds %d entries; the manifest says %d", d.entries, f.Entries)
	}
	return nil
}

// The chunk encoding (a record's payload):
//
//	chunk := uvarint(count) entry*count
//	entry := kind:u8 uvarint(len row) row uvarint(len family) family
//	         uvarint(len qualifier) qualifier varint(timestamp) varint(end)
//	         uvarint(seq) uvarint(len value) value

// AppendEntry appends one entry's encoding (without the chunk's count).
func AppendEntry(dst []byte, e *memstore.Entry) []byte {
	dst = append(dst, byte(e.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(e.Row)))
	dst = append(dst, e.Row...)
	dst = binary.AppendUvarint(dst, uint64(len(e.Family)))
	dst = append(dst, e.Family...)
	dst = binary.AppendUvarint(dst, uint64(len(e.Qualifier)))
	dst = append(dst, e.Qualifier...)
	dst = binary.AppendVarint(dst, e.Timestamp)
	dst = binary.AppendVarint(dst, e.End)
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(e.Value)))
	return append(dst, e.Value...)
}

// Chunk builds one chunk from entries.
type Chunk struct {
	body  []byte
	count int
}

// Add appends an entry.
func (c *Chunk) Add(e *memstore.Entry) {
	c.body = AppendEntry(c.body, e)
	c.count++
}

// Len is the encoded size of the entries so far; Count their number.
func (c *Chunk) Len() int   { return len(c.body) }
func (c *Chunk) Count() int { return c.count }

// Bytes returns the chunk (count and entries) and empties c.
func (c *Chunk) Bytes() []byte {
	out := binary.AppendUvarint(make([]byte, 0, len(c.body)+binary.MaxVarintLen64), uint64(c.count))
	out = append(out, c.body...)
	c.body, c.count = c.body[:0], 0
	return out
}

// ChunkEntries decodes a chunk and returns its number of entries.
func ChunkEntries(chunk []byte) (int, error) {
	n := 0
	err := DecodeChunk(chunk, func(*memstore.Entry) error { n++; return nil })
	return n, err
}

// DecodeChunk calls fn with each entry of chunk (its slices point into
// chunk). An error names the offset in the chunk.
func DecodeChunk(chunk []byte, fn func(*memstore.Entry) error) error {
	d := decoder{b: chunk}
	count := d.uvarint()
	if d.err != nil || count > uint64(len(chunk)) {
		return fmt.Errorf("chunk entry count at byte 0 does not decode")
	}
	var e memstore.Entry
	for i := uint64(0); i < count; i++ {
		at := d.pos
		e.Kind = mutation.Kind(d.byte())
		e.Row = d.bytes()
		e.Family = string(d.bytes())
		e.Qualifier = d.bytes()
		e.Timestamp = d.varint()
		e.End = d.varint()
		e.Seq = d.uvarint()
		e.Value = d.bytes()
		if d.err != nil {
			return fmt.Errorf("entry %d at byte %d of the chunk: %w", i, at, d.err)
		}
		if e.Kind < mutation.SetCell || e.Kind > mutation.MergeCell {
			return fmt.Errorf("entry %d at byte %d of the chunk: unknown kind %d", i, at, e.Kind)
		}
		if err := fn(&e); err != nil {
			return fmt.Errorf("entry %d at byte %d of the chunk: %w", i, at, err)
		}
	}
	if d.pos != len(chunk) {
		return fmt.Errorf("%d bytes after the chunk's %d entries", len(chunk)-d.pos, count)
	}
	return nil
}

type decoder struct {
	b   []byte
	pos int
	err error
}

var errShort = errors.New("cut short")

// varint reads one LEB128 integer with read (binary.Uvarint or
// binary.Varint).
func varint[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b[d.pos:])
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) uvarint() uint64 { return varint(d, binary.Uvarint) }
func (d *decoder) varint() int64   { return varint(d, binary.Varint) }

func (d *decoder) byte() byte {
	if d.err != nil || d.pos >= len(d.b) {
		d.err = errShort
		return 0
	}
	d.pos++
	return d.b[d.pos-1]
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.pos) {
		d.err = fmt.Errorf("length %d past the chunk's end", n)
		return nil
	}
	b := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return b
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
