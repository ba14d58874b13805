package tsfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
)

// FormatVersion is the TSFile format written by this package. It must
// change whenever the layout in doc.go does.
//
// Version 2 added the write sequence to every entry and the largest one to
// the footer; version 1 files (no sequences) are rejected. Version 3
// compresses pages (a codec byte and the raw length before each page's
// payload) and records each family's uncompressed page bytes in the
// footer. Version 4 records each family's cell and tombstone counts,
// tombstone bytes, cell timestamp range and versions beyond the first few
// of a column (the garbage a major compaction would drop is estimated from
// them). Version 5 is version 4 with MergeCell entries (an aggregate
// family's operands, which carry a value like SetCell); the writer writes
// it only for a file that holds one, and version 4 otherwise, so a build
// that predates operands refuses such a file by its version and still
// reads every other. Readers read versions 2 to 5.
const FormatVersion = 5

// plainFormatVersion is the version written for a file without MergeCell
// entries.
const plainFormatVersion = 4

// minFormatVersion is the oldest version readers accept.
const minFormatVersion = 2

// Magic numbers. They must not change.
const (
	footerMagic = "BHTSFIL1"
	indexMagic  = "BHTI"
	bloomMagic  = "BHTB"
)

// DefaultPageSize is the target size of a data page. A point read that
// misses the block cache reads, checks and decodes one page: 16 KiB costs
// it a third less than 32 KiB, with no measured loss to reads from the
// cache or to forward scans, which read many pages in one I/O
// (DefaultReadAhead), and reverse scans 11 % slower; 8 KiB would halve it
// but cost scans 10-20 % (docs/performance.md).
const DefaultPageSize = 16 << 10

// DefaultReadAhead is how many bytes of pages a scan reads in one I/O.
const DefaultReadAhead = 128 << 10

const trailerLen = 8 // version-2 page: u32 count, u32 crc

// minPageLen is the shortest stored page of a version: a page of version
// 3 or later has at least its codec byte, a one-byte raw length and the
// crc.
func minPageLen(version uint32) int64 {
	if version == 2 {
		return trailerLen
	}
	return 2 + 4
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ErrCorrupt is matched (errors.Is) by every CorruptionError.
var ErrCorrupt = errors.New("tsfile: corrupt")

// ErrEmpty is returned by Write when the iterator has no entry: no TSFile
// is created.
var ErrEmpty = errors.New("tsfile: no entries to write")

// ErrVersion is returned for a footer of an unknown format version.
var ErrVersion = errors.New("tsfile: unsupported format version")

// CorruptionError names the block and the byte offset in it where a
// checksum or a structure check failed: for a checksum mismatch, the start
// of the checksummed unit (the page, or 0 for index, bloom and footer
// blocks); for a structure failure, the offending field.
type CorruptionError struct {
	Block  blockstore.BlockID
	Offset int64
	Reason string
	// File names the TSFile (its footer) when a Reader reports the error
	// for a data page; zero otherwise.
	File blockstore.BlockRef
}

func (e *CorruptionError) Error() string {
	if e.File != (blockstore.BlockRef{}) {
		return fmt.Sprintf("tsfile: corrupt block %s of TSFile %s at offset %d: %s", e.Block, e.File, e.Offset, e.Reason)
	}
	return fmt.Sprintf("tsfile: corrupt block %s at offset %d: %s", e.Block, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(b blockstore.BlockID, off int64, format string, args ...any) error {
	return &CorruptionError{Block: b, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// appendEntry encodes e (without its family) for a page or an index key.
func appendEntry(dst []byte, e *memstore.Entry, withValue bool) []byte {
	dst = append(dst, byte(e.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(e.Row)))
	dst = append(dst, e.Row...)
	dst = binary.AppendUvarint(dst, uint64(len(e.Qualifier)))
	dst = append(dst, e.Qualifier...)
	dst = binary.AppendVarint(dst, e.Timestamp)
	dst = binary.AppendUvarint(dst, e.Seq)
	if e.Kind == mutation.DeleteColumn {
		dst = binary.AppendVarint(dst, e.End)
	}
	if withValue && (e.Kind == mutation.SetCell || e.Kind == mutation.MergeCell) {
		dst = binary.AppendUvarint(dst, uint64(len(e.Value)))
		dst = append(dst, e.Value...)
	}
	return dst
}

// decoder reads the fields of the encodings; on any bounds failure it sets
// bad and returns zero values. It aliases its input.
type decoder struct {
	b   []byte
	pos int
	bad bool
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.pos:])
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) varint() int64 {
	if d.bad {
		return 0
	}
	v, n := binary.Varint(d.b[d.pos:])
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) byte() byte {
	if d.bad || d.pos >= len(d.b) {
		d.bad = true
		return 0
	}
	c := d.b[d.pos]
	d.pos++
	return c
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)-d.pos) {
		d.bad = true
		return nil
	}
	v := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	if n == 0 {
		return nil
	}
	return v
}

func (d *decoder) u64() uint64 {
	if d.bad || len(d.b)-d.pos < 8 {
		d.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.pos:])
	d.pos += 8
	return v
}

func (d *decoder) u32() uint32 {
	if d.bad || len(d.b)-d.pos < 4 {
		d.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.pos:])
	d.pos += 4
	return v
}

func (d *decoder) done() bool { return d.pos >= len(d.b) }

// entry decodes one entry into e (aliasing d's bytes); family is set by the
// caller. rowBlock says whether only DeleteRow is allowed.
func (d *decoder) entry(e *memstore.Entry, withValue, rowBlock bool) bool {
	k := mutation.Kind(d.byte())
	if d.bad || k < mutation.SetCell || k > mutation.MergeCell || (k == mutation.DeleteRow) != rowBlock {
		d.bad = true
		return false
	}
	e.Kind = k
	e.Row = d.bytes()
	e.Qualifier = d.bytes()
	e.Timestamp = d.varint()
	e.Seq = d.uvarint()
	e.End = 0
	e.Value = nil
	if k == mutation.DeleteColumn {
		e.End = d.varint()
	}
	if withValue && (k == mutation.SetCell || k == mutation.MergeCell) {
		e.Value = d.bytes()
	}
	return !d.bad
}

// dataMeta describes one family's data block and its index block.
type dataMeta struct {
	family    string
	data      blockstore.BlockID
	index     blockstore.BlockID
	dataSize  int64
	indexSize int64
	entries   int64
	pages     int64
	// rawSize is the bytes of the family's pages uncompressed (entries and
	// counts, no headers or checksums); version 3 on, else 0.
	rawSize int64
	// counts holds the version-4 counts; nil in older files.
	counts *familyCounts
}

// MaxRanks is the number of version ranks a version-4 footer counts per
// family (FamilyStats.Beyond).
const MaxRanks = 8

// familyCounts are a family's version-4 footer counts (FamilyStats).
type familyCounts struct {
	cells, tombstones, tombstoneBytes int64
	minCellTS, maxCellTS              int64
	beyond                            [MaxRanks]int64
}

func (c *familyCounts) encode(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(c.cells))
	b = binary.AppendUvarint(b, uint64(c.tombstones))
	b = binary.AppendUvarint(b, uint64(c.tombstoneBytes))
	b = binary.AppendVarint(b, c.minCellTS)
	b = binary.AppendVarint(b, c.maxCellTS)
	b = binary.AppendUvarint(b, MaxRanks)
	for _, n := range c.beyond {
		b = binary.AppendUvarint(b, uint64(n))
	}
	return b
}

// counts reads a family's familyCounts; ok is false for values no writer
// makes (negative counts, more tombstones or ranked cells than entries, a
// rank count other than MaxRanks).
func (d *decoder) counts(entries int64) (*familyCounts, bool) {
	c := &familyCounts{}
	c.cells = int64(d.uvarint())
	c.tombstones = int64(d.uvarint())
	c.tombstoneBytes = int64(d.uvarint())
	c.minCellTS = d.varint()
	c.maxCellTS = d.varint()
	if d.uvarint() != MaxRanks {
		return nil, false
	}
	prev := c.cells
	for i := range c.beyond {
		c.beyond[i] = int64(d.uvarint())
		if c.beyond[i] < 0 || c.beyond[i] > prev {
			return nil, false
		}
		prev = c.beyond[i]
	}
	ok := !d.bad && c.cells >= 0 && c.tombstones >= 0 && c.tombstoneBytes >= 0 && c.cells+c.tombstones == entries
	return c, ok
}

type footer struct {
	version   uint32
	data      []dataMeta // sorted by family; "" (row tombstones) first
	bloom     blockstore.BlockID
	bloomSize int64
	minRow    []byte
	maxRow    []byte
	minTS     int64
	maxTS     int64
	maxSeq    uint64
	entries   int64
	rows      int64
}

func (f *footer) encode() []byte {
	b := []byte(footerMagic)
	b = binary.LittleEndian.AppendUint32(b, f.version)
	b = binary.AppendUvarint(b, uint64(len(f.data)))
	for _, d := range f.data {
		b = binary.AppendUvarint(b, uint64(len(d.family)))
		b = append(b, d.family...)
		b = binary.LittleEndian.AppendUint64(b, uint64(d.data))
		b = binary.LittleEndian.AppendUint64(b, uint64(d.index))
		b = binary.AppendUvarint(b, uint64(d.dataSize))
		b = binary.AppendUvarint(b, uint64(d.indexSize))
		b = binary.AppendUvarint(b, uint64(d.entries))
		b = binary.AppendUvarint(b, uint64(d.pages))
		if f.version >= 3 {
			b = binary.AppendUvarint(b, uint64(d.rawSize))
		}
		if f.version >= 4 {
			b = d.counts.encode(b)
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(f.bloom))
	b = binary.AppendUvarint(b, uint64(f.bloomSize))
	b = binary.AppendUvarint(b, uint64(len(f.minRow)))
	b = append(b, f.minRow...)
	b = binary.AppendUvarint(b, uint64(len(f.maxRow)))
	b = append(b, f.maxRow...)
	b = binary.AppendVarint(b, f.minTS)
	b = binary.AppendVarint(b, f.maxTS)
	b = binary.AppendUvarint(b, f.maxSeq)
	b = binary.AppendUvarint(b, uint64(f.entries))
	b = binary.AppendUvarint(b, uint64(f.rows))
	return binary.LittleEndian.AppendUint32(b, crc(b))
}

func decodeFooter(id blockstore.BlockID, b []byte) (footer, error) {
	var f footer
	if len(b) < len(footerMagic)+8 || string(b[:len(footerMagic)]) != footerMagic {
		return f, corrupt(id, 0, "not a TSFile footer (bad magic or too short: %d bytes)", len(b))
	}
	body := b[:len(b)-4]
	if got, want := crc(body), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return f, corrupt(id, 0, "footer checksum mismatch over %d bytes (%08x != %08x)", len(body), got, want)
	}
	d := decoder{b: body, pos: len(footerMagic)}
	f.version = d.u32()
	if f.version < minFormatVersion || f.version > FormatVersion {
		return f, fmt.Errorf("%w %d in block %s (want %d to %d)", ErrVersion, f.version, id, minFormatVersion, FormatVersion)
	}
	n := d.uvarint()
	if n > uint64(len(body)) {
		return f, corrupt(id, int64(d.pos), "footer names %d data blocks", n)
	}
	seen := map[string]bool{}
	for i := uint64(0); i < n && !d.bad; i++ {
		var m dataMeta
		m.family = string(d.bytes())
		m.data = blockstore.BlockID(d.u64())
		m.index = blockstore.BlockID(d.u64())
		m.dataSize = int64(d.uvarint())
		m.indexSize = int64(d.uvarint())
		m.entries = int64(d.uvarint())
		m.pages = int64(d.uvarint())
		if f.version >= 3 {
			m.rawSize = int64(d.uvarint())
		}
		countsOK := true
		if f.version >= 4 && !d.bad {
			m.counts, countsOK = d.counts(m.entries)
		}
		if !d.bad && (!countsOK || seen[m.family] || m.dataSize < 0 || m.indexSize < 0 || m.entries < 0 || m.pages < 0 || m.rawSize < 0) {
			return f, corrupt(id, int64(d.pos), "bad data block entry for family %q", m.family)
		}
		seen[m.family] = true
		f.data = append(f.data, m)
	}
	f.bloom = blockstore.BlockID(d.u64())
	f.bloomSize = int64(d.uvarint())
	f.minRow = d.bytes()
	f.maxRow = d.bytes()
	f.minTS = d.varint()
	f.maxTS = d.varint()
	f.maxSeq = d.uvarint()
	f.entries = int64(d.uvarint())
	f.rows = int64(d.uvarint())
	if d.bad || !d.done() || f.bloomSize < 0 {
		return f, corrupt(id, int64(d.pos), "malformed footer")
	}
	return f, nil
}

// indexEntry locates one page and holds its first key.
type indexEntry struct {
	off, length int64
	count       int
	first       memstore.Entry
}

func encodeIndex(pages []indexEntry) []byte {
	b := []byte(indexMagic)
	b = binary.AppendUvarint(b, uint64(len(pages)))
	for i := range pages {
		p := &pages[i]
		b = binary.AppendUvarint(b, uint64(p.off))
		b = binary.AppendUvarint(b, uint64(p.length))
		b = binary.AppendUvarint(b, uint64(p.count))
		b = appendEntry(b, &p.first, false)
	}
	return binary.LittleEndian.AppendUint32(b, crc(b))
}

// decodeIndex checks the index block and that its pages tile [0, dataSize).
func decodeIndex(version uint32, id blockstore.BlockID, b []byte, family string, dataSize int64) ([]indexEntry, error) {
	if len(b) < len(indexMagic)+5 || string(b[:len(indexMagic)]) != indexMagic {
		return nil, corrupt(id, 0, "not an index block")
	}
	body := b[:len(b)-4]
	if got, want := crc(body), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, corrupt(id, 0, "index checksum mismatch over %d bytes (%08x != %08x)", len(body), got, want)
	}
	d := decoder{b: body, pos: len(indexMagic)}
	n := d.uvarint()
	if n > uint64(len(body)) {
		return nil, corrupt(id, int64(d.pos), "index names %d pages", n)
	}
	pages := make([]indexEntry, 0, n)
	var next int64
	for i := uint64(0); i < n; i++ {
		start := d.pos
		var p indexEntry
		p.off = int64(d.uvarint())
		p.length = int64(d.uvarint())
		p.count = int(d.uvarint())
		if !d.entry(&p.first, false, family == "") {
			return nil, corrupt(id, int64(start), "malformed index entry %d", i)
		}
		p.first.Family = family
		if p.off != next || p.length < minPageLen(version) || p.length > dataSize-p.off || p.count <= 0 {
			return nil, corrupt(id, int64(start), "index entry %d: page [%d,+%d) does not follow %d in a block of %d bytes", i, p.off, p.length, next, dataSize)
		}
		next = p.off + p.length
		pages = append(pages, p)
	}
	if d.bad || !d.done() || next != dataSize {
		return nil, corrupt(id, int64(d.pos), "malformed index block (pages cover %d of %d bytes)", next, dataSize)
	}
	return pages, nil
}

func encodeBloom(hashes []uint64) []byte {
	b := append([]byte(bloomMagic), buildBloom(hashes)...)
	return binary.LittleEndian.AppendUint32(b, crc(b))
}

func decodeBloom(id blockstore.BlockID, b []byte) (bloom, error) {
	if len(b) < len(bloomMagic)+4 || string(b[:len(bloomMagic)]) != bloomMagic {
		return bloom{}, corrupt(id, 0, "not a bloom block")
	}
	body := b[:len(b)-4]
	if got, want := crc(body), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return bloom{}, corrupt(id, 0, "bloom checksum mismatch over %d bytes (%08x != %08x)", len(body), got, want)
	}
	f, err := parseBloom(body[len(bloomMagic):])
	if err != nil {
		return bloom{}, corrupt(id, int64(len(bloomMagic)), "%v", err)
	}
	return f, nil
}

// checkPage verifies a stored page (at offset off of data block id) of a
// file of the given version and returns its entry bytes, uncompressed: a
// version-2 page is entry* count:u32 crc32c:u32, a page of version 3 or
// later is decoded by decodePage. The checksum is checked before anything else.
func checkPage(version uint32, id blockstore.BlockID, off int64, page []byte, wantCount int) ([]byte, error) {
	var body []byte
	if version == 2 {
		if len(page) < trailerLen {
			return nil, corrupt(id, off, "page of %d bytes", len(page))
		}
		n := len(page) - 4
		if got, want := crc(page[:n]), binary.LittleEndian.Uint32(page[n:]); got != want {
			return nil, corrupt(id, off, "checksum mismatch in the %d-byte page (%08x != %08x)", len(page), got, want)
		}
		body = page[:n]
	} else {
		var err error
		if body, err = decodePage(id, off, page); err != nil {
			return nil, err
		}
	}
	return pageEntries(version, id, off, body, wantCount)
}

// pageEntries checks a page body's count against the index and returns
// its entry bytes.
func pageEntries(version uint32, id blockstore.BlockID, off int64, body []byte, wantCount int) ([]byte, error) {
	n := len(body)
	if c := binary.LittleEndian.Uint32(body[n-4:]); int(c) != wantCount {
		if version == 2 {
			return nil, corrupt(id, off+int64(n-4), "page holds %d entries, index says %d", c, wantCount)
		}
		return nil, corrupt(id, off, "page holds %d entries, index says %d", c, wantCount)
	}
	return body[: n-4 : n-4], nil
}

// info describes the file of footer f (stored as footerID, footerLen
// bytes, in store): what Write returns and Reader.Info reports.
func (f *footer) info(store string, footerID blockstore.BlockID, footerLen int64) Info {
	i := Info{Store: store, Footer: footerID, Entries: f.entries, Rows: f.rows, MinRow: f.minRow, MaxRow: f.maxRow,
		MinTimestamp: f.minTS, MaxTimestamp: f.maxTS, MaxSeq: f.maxSeq, Counted: f.version >= 4}
	for _, d := range f.data {
		i.Blocks = append(i.Blocks, d.data, d.index)
		i.Size += d.dataSize + d.indexSize
		i.DataBytes += d.dataSize
		i.RawBytes += d.rawSize
		fs := FamilyStats{Family: d.family, Entries: d.entries, StoredBytes: d.dataSize, RawBytes: d.rawSize}
		if c := d.counts; c != nil {
			fs.Cells, fs.Tombstones, fs.TombstoneBytes = c.cells, c.tombstones, c.tombstoneBytes
			fs.MinCellTimestamp, fs.MaxCellTimestamp = c.minCellTS, c.maxCellTS
			fs.Beyond = c.beyond
			i.Tombstones += c.tombstones
			i.TombstoneBytes += c.tombstoneBytes
		}
		i.Families = append(i.Families, fs)
	}
	i.Blocks = append(i.Blocks, f.bloom, footerID)
	i.Size += f.bloomSize + footerLen
	return i
}
