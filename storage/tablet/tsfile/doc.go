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
// # Byte layout (format version 5; little-endian; uvarint/varint = LEB128)
//
//	data block  := page*
//	page        := codec:u8 uvarint(rawLen) payload crc32c(codec‖rawLen‖payload):u32
//	payload     := body                          if codec = 0 (none)
//	             | snappy block format of body   if codec = 1 (snappy)
//	             | one zstd frame of body        if codec = 2 (zstd)
//	body        := entry* count:u32              (rawLen bytes; ~16 KiB)
//	entry       := kind:u8 uvarint(len row) row uvarint(len qual) qual
//	               varint(ts) uvarint(seq) [varint(end) if kind=DeleteColumn]
//	               [uvarint(len value) value if kind=SetCell or MergeCell]
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
//	               uvarint(rawSize) counts
//	counts      := uvarint(cells) uvarint(tombstones) uvarint(tombstoneBytes)
//	               varint(minCellTs) varint(maxCellTs)
//	               uvarint(nranks = 8) uvarint(beyond)*nranks
//
// An index entry's offset and length are of the stored page; count is its
// entries. rawSize is the sum of the family's bodies (rawLen); dataSize /
// rawSize is the family's compression ratio.
//
// counts describe the family's entries: cells are its SetCell and
// MergeCell entries and tombstones the others (cells + tombstones =
// entries; the operands of one aggregate cell are one version in the
// ranks below; the row-tombstone
// family "" has only tombstones), tombstoneBytes the tombstones' encoded
// entry bytes, minCellTs and maxCellTs the cells' timestamp range, and
// beyond[k] the cells that are not among the k+1 newest of their column
// (row, qualifier) in the file (non-increasing in k). A tablet estimates
// from them, without reading a page, how much of its data a major
// compaction would drop (Info.Tombstones, FamilyStats).
//
// seq is the entry's write sequence (memstore.Entry.Seq: what a tombstone
// hides and which of two writes of one cell wins is decided by it); maxSeq
// and maxTs are the largest over the file, so a tablet opened over its
// files continues its write sequence and clock above them. Keys (entries
// without seq and value, but with the seq of an operand) are unique in a
// file.
//
// # Compression
//
// A family's codec comes from its schema (WriterOptions.Compression;
// DefaultCompression, snappy, when the schema names none, also for the
// row tombstones of family ""). Since every family has a data block of
// its own, a page holds entries of one family and is compressed with that
// family's codec. The codec byte is per page: a page is stored compressed
// only when that makes it at least an eighth smaller than its body, else
// it is stored as codec 0, so incompressible data costs no decompression.
// Snappy pages are written by s2 in its Snappy-compatible mode; a zstd
// frame has no checksum of its own (the page's covers it).
//
// The checksum covers the stored bytes, so damage is found before
// anything is decompressed. Then rawLen must be between 4 and MaxPageBytes
// (128 MiB), the codec's own length (snappy's header, the zstd frame's
// content size) must equal it, decompression must yield exactly rawLen
// bytes, and the count must match the index; every failure is a
// *CorruptionError naming the data block, the TSFile and the offset of the
// page (of its payload for a failed decompression). The block cache holds
// bodies' entries uncompressed: a page is decompressed once per cache
// miss.
//
// # Versions
//
// Readers read versions 2 to 5 and reject others (ErrVersion); the writer
// writes version 5 for a file that holds a MergeCell entry and version 4
// for any other, so files of tables without aggregate families stay
// readable by a build that predates them. Fixtures written by the writers of versions 2 and 3
// are in testdata and are read by TestReadFixtures.
//
//   - Version 1 had no seq and no maxSeq; it is rejected.
//   - Version 2 is version 3 without compression: page := body
//     crc32c(body):u32 (a page is at least 8 bytes), and fam has no
//     rawSize. Tablets keep reading their version-2 files; compactions
//     rewrite them in the current version (FormatVersion, 4).
//   - Version 3 adds the codec byte and rawLen to each page and rawSize
//     to each fam.
//   - Version 4 adds counts to each fam; pages are those of version 3.
//     Files of versions 2 and 3 have no counts (Info.Counted false); a
//     compaction rewrites them as version 4.
//   - Version 5 adds entries of kind MergeCell (5), an aggregate family's
//     operands: kind 5 carries a value like SetCell. Keys are unique in
//     a file as before, an operand's seq being part of its key
//     (memstore.CompareKey).
//
// The trailing crc32c (Castagnoli) of an index, bloom or footer block
// covers every byte of the block before it, magic included; a page's
// covers its entries and count. The bloom filter's false-positive rate is
// measured by TestBloomFalsePositives (bound 1 %).
//
// The family of an entry is implied by its block. The magic strings and
// a version's layout must not change; a new layout takes a new
// FormatVersion.
//
// # Invariants
//
//   - Every page, index, bloom and footer is checksummed; a mismatch or a
//     structural failure (a failed decompression included) is a
//     *CorruptionError naming the block and the byte offset inside it
//     (errors.Is(err, ErrCorrupt)). The reader never
//     returns entries from a page it could not verify, and never panics on
//     any block contents.
//   - Index pages tile the data block exactly; every page holds ≥ 1 entry.
//   - The reader opens lazily (footer at Open; an index on first use of its
//     family; the bloom filter on the first point read), seeks by the sparse
//     index, and caches verified pages' entries, uncompressed, in a
//     blockcache.Cache under (data block, offset). A scan that misses
//     reads the next uncached pages in the same I/O (read-ahead:
//     ReaderOptions.ReadAhead, default 128 KiB of pages). A lent iterator
//     (NewLentIterator) does so through the cache for its first
//     ScanFillBytes of a block's pages, then into buffers of its own that
//     it overwrites at its next read; its caller keeps no entry's bytes
//     past the iterator's next move. The second seek into a cached
//     page makes its row index (where each row starts) and attaches it to
//     the cached page; later seeks binary-search it (rowindex.go). Only a
//     page that decodes whole, in row order, gets one.
//   - A checksum failure of a whole block is reported at offset 0; one of
//     a page at the page's offset in its data block.
package tsfile
