// Package tsfile writes and reads TSFiles: the immutable sorted files of a
// tablet, stored as a set of blocks in the block store (docs/design.md
// 'TSFiles and compaction').
//
// # Blocks
//
// A TSFile is 2F+2 blocks, all created in one blockstore
// CreationTransaction (so it appears whole or not at all):
//
//	for each column family F (and "" for row tombstones, if any):
//	    data block   pages of F's entries, in memstore.Compare order
//	    index block  one entry per page: offset, length, count, first key
//	bloom block      bloom filter over the distinct row keys
//	footer block     names every other block; the TSFile's identity
//
// A read of one family touches only that family's data and index blocks
// (and the row-tombstone block, present only if rows were deleted).
//
// Block IDs are unique only inside one block store, and after a failover a
// tablet reads TSFiles of several stores. So a TSFile is named by its
// store's UUID and its footer ID (Info.FooterRef), and the Reader keys the
// page cache by blockstore.BlockRef (store UUID, block ID).
//
// # Byte layout (format version 2; little-endian; uvarint/varint = LEB128)
//
//	data block  := page*
//	page        := entry* count:u32 crc32c(entry*‖count):u32      (~32 KiB)
//	entry       := kind:u8 uvarint(len row) row uvarint(len qual) qual
//	               varint(ts) uvarint(seq) [varint(end) if kind=DeleteColumn]
//	               [uvarint(len value) value if kind=SetCell]
//
//	index block := "BHTI" uvarint(npages) ientry* crc32c:u32
//	ientry      := uvarint(offset) uvarint(length) uvarint(count) key
//	key         := entry without the value (the page's first entry)
//
//	bloom block := "BHTB" k:u32 bits[...] crc32c:u32
//	               (10 bits per row, k=7 probes of double hashing of
//	               FNV-1a-64+fmix64; ≈0.8 % false positives)
//
//	footer      := "BHTSFIL1" version:u32 uvarint(nfam) fam*
//	               bloomID:u64 uvarint(bloomSize)
//	               uvarint(len minRow) minRow uvarint(len maxRow) maxRow
//	               varint(minTs) varint(maxTs) uvarint(maxSeq)
//	               uvarint(entries) uvarint(rows)
//	               crc32c:u32
//	fam         := uvarint(len name) name dataID:u64 indexID:u64
//	               uvarint(dataSize) uvarint(indexSize) uvarint(entries) uvarint(pages)
//
// seq is the entry's write sequence (memstore.Entry.Seq: what a tombstone
// hides and which of two writes of one cell wins is decided by it); maxSeq
// and maxTs are the largest over the file, so a tablet opened over its
// files continues its write sequence and clock above them. Keys (entries
// without seq and value) are unique in a file. Version 1 had no seq and no
// maxSeq; readers of version 2 reject it.
//
// The trailing crc32c (Castagnoli) of an index, bloom or footer block
// covers every byte of the block before it, magic included; a page's
// covers its entries and count. The bloom filter's false-positive rate is
// measured by TestBloomFalsePositives (bound 1 %).
//
// The family of an entry is implied by its block. The magic strings and
// FormatVersion must not change for this layout; a new layout takes a new
// version, and readers reject versions they do not know.
//
// # Invariants
//
//   - Every page, index, bloom and footer is checksummed; a mismatch or a
//     structural failure is a *CorruptionError naming the block and the byte
//     offset inside it (errors.Is(err, ErrCorrupt)). The reader never
//     returns entries from a page it could not verify, and never panics on
//     any block contents.
//   - Index pages tile the data block exactly; every page holds ≥ 1 entry.
//   - The reader opens lazily (footer at Open; an index on first use of its
//     family; the bloom filter on the first point read), seeks by the sparse
//     index, and caches verified pages in a blockcache.Cache under
//     (data block, offset). A scan that misses reads the next uncached
//     pages in the same I/O (read-ahead: ReaderOptions.ReadAhead, default 4).
//   - A checksum failure of a whole block is reported at offset 0; one of
//     a page at the page's offset in its data block.
package tsfile
