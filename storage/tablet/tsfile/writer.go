package tsfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
)

// Info describes a written TSFile. A tablet's metadata needs only Store and
// Footer to open it again; Blocks lists every block (footer included) for
// deletion. Every block of a TSFile lives in the one store Store names
// (they are created in one transaction), and its IDs mean something only
// there: FooterRef and BlockRefs name the blocks across stores.
type Info struct {
	// Store is the UUID of the block store holding the file.
	Store        string
	Footer       blockstore.BlockID
	Blocks       []blockstore.BlockID
	Size         int64 // bytes over all blocks
	Entries      int64
	Rows         int64
	MinRow       []byte
	MaxRow       []byte
	MinTimestamp int64
	MaxTimestamp int64
	// MaxSeq is the largest write sequence of an entry (the tablet's write
	// sequence continues above it when the tablet is opened again).
	MaxSeq uint64
	// DataBytes and RawBytes are the data blocks' bytes as stored and
	// uncompressed (RawBytes is 0 in version-2 files).
	DataBytes, RawBytes int64
	// Counted says the file is of format version 4 or later, so that
	// Tombstones, TombstoneBytes and the families' cell counts are known;
	// they are 0 otherwise.
	Counted bool
	// Tombstones is the number of tombstone entries (of every kind) and
	// TombstoneBytes their encoded bytes, uncompressed.
	Tombstones, TombstoneBytes int64
	// Families describes each family's data block, "" (row tombstones)
	// first when present.
	Families []FamilyStats
}

// FamilyStats describes one family's entries in a TSFile. The counts
// (Cells to Beyond) are those of a version-4 footer; zero in older files.
type FamilyStats struct {
	Family      string
	Entries     int64
	StoredBytes int64 // the data block
	RawBytes    int64 // its pages uncompressed (0 in version 2)
	// Cells is the number of SetCell entries, Tombstones that of the
	// others; TombstoneBytes is the tombstones' encoded bytes.
	Cells, Tombstones, TombstoneBytes int64
	// MinCellTimestamp and MaxCellTimestamp bound the cells' timestamps
	// (both 0 without cells).
	MinCellTimestamp, MaxCellTimestamp int64
	// Beyond[k] is the number of cells that are not among the k+1 newest
	// cells of their column (row and qualifier) in this file: the cells a
	// max-versions rule of k+1 drops from the file alone.
	Beyond [MaxRanks]int64
}

// FooterRef names the file's footer block across stores: the file's
// identity.
func (i Info) FooterRef() blockstore.BlockRef {
	return blockstore.BlockRef{Store: i.Store, ID: i.Footer}
}

// BlockRefs names every block of the file across stores.
func (i Info) BlockRefs() []blockstore.BlockRef { return blockstore.Refs(i.Store, i.Blocks) }

// WriterOptions configures Write.
type WriterOptions struct {
	// Store is the UUID naming mgr in tablet metadata; it becomes
	// Info.Store.
	Store string
	// TabletID is passed to the block store (data-dir group choice).
	TabletID string
	// PageSize is the target data page size (default DefaultPageSize).
	PageSize int
	// Compression names the codec of each family's pages, row tombstones
	// (family "") included; nil gives every family DefaultCompression.
	// Each family's entries go to a data block of their own, so the codec
	// is the family's.
	Compression func(family string) Compression
}

type familyWriter struct {
	meta  dataMeta
	block blockstore.WritableBlock
	page  []byte
	count int
	first memstore.Entry
	pages []indexEntry
	off   int64
	codec Compression
	// counts are the version-4 counts; col and rank the column of the last
	// cell and its rank in it (1 = newest).
	counts familyCounts
	col    memstore.Entry
	rank   int
	// stored and scratch are reused buffers: the encoded page and the
	// compressor's output.
	stored, scratch []byte
}

// Write streams it (from its first entry, in Compare order) into a new
// TSFile in mgr: one data block per family (row tombstones in a block of
// family ""), one index block per data block, a bloom filter block over the
// rows and a footer block. Every block joins one creation transaction; the
// TSFile is durable when Write returns nil, and nothing of it is visible
// when Write fails (its blocks are aborted or never committed). An empty
// iterator yields ErrEmpty and no blocks.
func Write(ctx context.Context, mgr blockstore.Manager, it memstore.Iterator, opts WriterOptions) (info Info, err error) {
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	var created []blockstore.WritableBlock
	committed := false
	defer func() {
		if !committed {
			for _, b := range created {
				if b.State() != blockstore.Closed {
					b.Abort()
				}
			}
		}
	}()
	create := func() (blockstore.WritableBlock, error) {
		b, err := mgr.CreateBlock(blockstore.CreateBlockOptions{TabletID: opts.TabletID})
		if err != nil {
			return nil, fmt.Errorf("tsfile: create block: %w", err)
		}
		created = append(created, b)
		return b, nil
	}

	fams := map[string]*familyWriter{}
	var last *familyWriter // the previous entry's: most entries are in the family of the one before
	var f footer
	f.version = plainFormatVersion
	var hashes []uint64
	var lastRow []byte
	flush := func(fw *familyWriter) error {
		if fw.count == 0 {
			return nil
		}
		fw.page = binary.LittleEndian.AppendUint32(fw.page, uint32(fw.count))
		var err error
		fw.stored, fw.scratch, err = encodePage(fw.stored[:0], fw.scratch, fw.page, fw.codec)
		if err != nil {
			return fmt.Errorf("tsfile: page of family %q at %d of block %s: %w", fw.meta.family, fw.off, fw.block.ID(), err)
		}
		if err := fw.block.Append(fw.stored); err != nil {
			return fmt.Errorf("tsfile: append page to block %s: %w", fw.block.ID(), err)
		}
		fw.pages = append(fw.pages, indexEntry{off: fw.off, length: int64(len(fw.stored)), count: fw.count, first: fw.first})
		fw.off += int64(len(fw.stored))
		fw.meta.pages++
		fw.meta.rawSize += int64(len(fw.page))
		fw.page, fw.count = fw.page[:0], 0
		return nil
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return Info{}, err
			}
		}
		e := it.Entry()
		fam := e.Family
		if e.Kind == mutation.DeleteRow {
			fam = ""
		}
		fw := last
		if fw == nil || fw.meta.family != fam {
			fw = fams[fam]
		}
		if fw == nil {
			b, err := create()
			if err != nil {
				return Info{}, err
			}
			fw = &familyWriter{meta: dataMeta{family: fam, data: b.ID()}, block: b, codec: DefaultCompression}
			if opts.Compression != nil {
				fw.codec = opts.Compression(fam)
			}
			fams[fam] = fw
		}
		last = fw
		if fw.count == 0 {
			fw.first = e.Clone()
			fw.first.Value = nil
		}
		if e.Kind == mutation.MergeCell {
			f.version = FormatVersion
		}
		n0 := len(fw.page)
		fw.page = appendEntry(fw.page, e, true)
		fw.countEntry(e, int64(len(fw.page)-n0))
		fw.count++
		fw.meta.entries++
		if len(fw.page) >= opts.PageSize {
			if err := flush(fw); err != nil {
				return Info{}, err
			}
		}
		if f.entries == 0 || !bytes.Equal(e.Row, lastRow) {
			hashes = append(hashes, hashRow(e.Row))
			lastRow = append(lastRow[:0], e.Row...)
			if f.entries == 0 {
				f.minRow = bytes.Clone(e.Row)
			}
			f.rows++
		}
		if f.entries == 0 || e.Timestamp < f.minTS {
			f.minTS = e.Timestamp
		}
		if f.entries == 0 || e.Timestamp > f.maxTS {
			f.maxTS = e.Timestamp
		}
		f.maxSeq = max(f.maxSeq, e.Seq)
		f.entries++
	}
	if err := it.Err(); err != nil {
		return Info{}, fmt.Errorf("tsfile: reading input: %w", err)
	}
	if f.entries == 0 {
		return Info{}, ErrEmpty
	}
	f.maxRow = bytes.Clone(lastRow)

	names := make([]string, 0, len(fams))
	for name := range fams {
		names = append(names, name)
	}
	sort.Strings(names)
	txn := mgr.NewCreationTransaction()
	add := func(b blockstore.WritableBlock, data []byte) error {
		if data != nil {
			if err := b.Append(data); err != nil {
				return fmt.Errorf("tsfile: append block %s: %w", b.ID(), err)
			}
		}
		if err := b.Finalize(); err != nil {
			return fmt.Errorf("tsfile: finalize block %s: %w", b.ID(), err)
		}
		txn.AddCreatedBlock(b)
		info.Blocks = append(info.Blocks, b.ID())
		info.Size += b.BytesAppended()
		return nil
	}
	for _, name := range names {
		fw := fams[name]
		if err := flush(fw); err != nil {
			return Info{}, err
		}
		fw.meta.dataSize = fw.off
		if err := add(fw.block, nil); err != nil {
			return Info{}, err
		}
		ib, err := create()
		if err != nil {
			return Info{}, err
		}
		idx := encodeIndex(fw.pages)
		fw.meta.index, fw.meta.indexSize = ib.ID(), int64(len(idx))
		if err := add(ib, idx); err != nil {
			return Info{}, err
		}
		fw.meta.counts = &fw.counts
		f.data = append(f.data, fw.meta)
	}
	bb, err := create()
	if err != nil {
		return Info{}, err
	}
	bl := encodeBloom(hashes)
	f.bloom, f.bloomSize = bb.ID(), int64(len(bl))
	if err := add(bb, bl); err != nil {
		return Info{}, err
	}
	fb, err := create()
	if err != nil {
		return Info{}, err
	}
	if err := add(fb, f.encode()); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	if err := txn.CommitCreatedBlocks(); err != nil {
		return Info{}, fmt.Errorf("tsfile: commit %d blocks: %w", len(created), err)
	}
	committed = true
	out := f.info(opts.Store, fb.ID(), fb.BytesAppended())
	if out.Size != info.Size {
		return Info{}, fmt.Errorf("tsfile: footer describes %d bytes, %d written", out.Size, info.Size)
	}
	return out, nil
}

// countEntry adds e (encoded in n bytes) to the family's version-4 counts.
func (fw *familyWriter) countEntry(e *memstore.Entry, n int64) {
	c := &fw.counts
	if e.Kind != mutation.SetCell && e.Kind != mutation.MergeCell {
		c.tombstones++
		c.tombstoneBytes += n
		return
	}
	if c.cells == 0 || e.Timestamp < c.minCellTS {
		c.minCellTS = e.Timestamp
	}
	if c.cells == 0 || e.Timestamp > c.maxCellTS {
		c.maxCellTS = e.Timestamp
	}
	if c.cells > 0 && bytes.Equal(e.Row, fw.col.Row) && bytes.Equal(e.Qualifier, fw.col.Qualifier) {
		// The operands of one aggregate cell are one version.
		if e.Kind != mutation.MergeCell || fw.col.Kind != mutation.MergeCell || e.Timestamp != fw.col.Timestamp {
			fw.rank++
		}
	} else {
		fw.rank = 1
		fw.col.Row = append(fw.col.Row[:0], e.Row...)
		fw.col.Qualifier = append(fw.col.Qualifier[:0], e.Qualifier...)
	}
	fw.col.Kind, fw.col.Timestamp = e.Kind, e.Timestamp
	for k := range min(fw.rank-1, MaxRanks) {
		c.beyond[k]++
	}
	c.cells++
}

var errClosed = errors.New("tsfile: reader closed")
