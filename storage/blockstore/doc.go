// Package blockstore is Bighive's block layer, after Apache Kudu's
// (docs/design.md 'Where the design comes from' sums it up): immutable,
// append-only blocks named by a BlockID, written by a
// WritableBlock (CLEAN → DIRTY → FINALIZED → CLOSED), read concurrently by a
// ReadableBlock, committed in groups by a CreationTransaction and deleted by
// a DeletionTransaction. Open(Options{Dirs: []string{dir}}) gives the
// log-structured manager (Kind "log", the default); Kind "file" gives one
// file per block. Both pass one conformance suite.
//
// # Invariants
//
//   - The in-memory index is never ahead of the disk: a block is visible
//     (OpenBlock, AllBlockIDs) only after its data and its CREATE record are
//     synced, and, for a container's first block, the directory too.
//   - A block that was never closed is never visible, before or after a crash.
//   - Deletion is immediate in memory and not durable on disk: after a crash
//     a deleted block may reappear, but always intact, because its space is
//     only freed (hole punch) after its DELETE record is synced, and only
//     once its last open reader closed it.
//   - IDs are never reused: the counter resumes above the largest ID
//     replayed and above the wall clock in µs.
//   - IDs are unique only inside one store: two stores count from their own
//     clocks and may hand out the same ID. Outside this package a block that
//     may live in another store is named by a BlockRef (store UUID, ID), and
//     a deletion goes only to the store that holds the block.
//   - Every file operation goes through Options.FS (a vfs.FS).
//   - Garbage on disk never panics; corruption is reported with file and offset.
//
// # Log block manager layout
//
// Each data directory holds containers, a pair of files named by a random
// 32-hex-digit UUID:
//
//	<dir>/<uuid>.data      block bytes, each block at an offset aligned up to
//	                       the filesystem block size (st_blksize, 4096 if
//	                       unknown); preallocated with fallocate in steps
//	                       (PreallocateStep, 32 MiB); holes punched for
//	                       deleted blocks (FALLOC_FL_PUNCH_HOLE|KEEP_SIZE)
//	                       over coalesced ranges
//	<dir>/<uuid>.metadata  header + records:
//
//	header (16 bytes, version 1):
//	+--------------------------+-----------------+---------------------------------+
//	| magic "bhblkmd\x00" (8)  | version u32 (4) | crc32c of bytes [0, 12) u32 (4) |
//	+--------------------------+-----------------+---------------------------------+
//	the checksum covers the 12 bytes before it: magic ‖ version
//
//	record (repeated, appended):
//	+------------+------------------------------+--------------------------+
//	| length u32 | crc32c(length ‖ payload) u32 | payload: storagepb.Block- |
//	|            |                              | Record (proto, ≤ 4096 B)  |
//	+------------+------------------------------+--------------------------+
//	the record checksum covers the 4 length bytes, then the payload
//
// Integers are little-endian; crc32c is Castagnoli. BlockRecord
// (proto/storagepb/blockstore.proto) holds block_id (fixed64), op (CREATE
// or DELETE), timestamp_us and, for CREATE only, the offset and length of
// the block in the data file. On replay a frame cut by the end of the file,
// or a bad checksum in the very last frame, is a torn append
// (PartialRecord, repaired by truncation); a bad header, a bad checksum
// before the last frame or a length over 4096 is CorruptRecord; a
// well-framed record that makes no sense (undecodable payload, a range
// outside .data, a duplicate CREATE, a DELETE without CREATE) is
// MalformedRecord. Both are fatal and name the file and the offset of the
// frame. A container is checked out by one writer from
// CreateBlock to Finalize; past MaxContainerSize (10 GiB) it is full and its
// data file is truncated to its cursor. A full container with no live,
// written or read block is dead: both files are removed.
//
// # Durability order of a commit (per container; containers in parallel)
//
//	fdatasync .data → append CREATE records → fdatasync .metadata →
//	fsync the directory (first use of the container) → register in memory
//
// A sync failure marks the container read-only; its other writers fail with
// ErrContainerReadOnly; new blocks go to other containers.
//
// # Start-up
//
// Each directory's containers are replayed in parallel (OpenWorkersPerDir),
// each into a container-local map, then merged. Findings go into the Report:
// partial (torn) records, corrupt and malformed records (fatal: Open fails
// with a *CorruptionError), incomplete containers, dead and low-live
// containers, excess space, misaligned blocks, temp files. Unless ReadOnly,
// repair then removes dead containers, truncates torn tails, deletes
// incomplete containers and temp files, rewrites low-live metadata through
// vfs.WriteFileAtomic, and truncates and re-punches full containers holding
// too much disk. ReadOnly opens create, delete and repair nothing, so a
// second process can read a store its owner still runs.
//
// # A read-only view stays current
//
// The owner of a store goes on committing after a read-only open, and a
// reader is asked for a block only after its owner committed it (a TSFile
// is named by the tablet metadata after its creation transaction). So a
// read-only manager that lacks a block reloads its view before it answers
// ErrNotFound (refresh.go): the log manager lists its healthy directories,
// replays each container it did not know and each known one whose metadata
// file changed size (whole, by path: a restarted owner may have rewritten
// it), and adds every live block its index lacks; the file manager looks
// for the block's file. Callers that miss at once share one reload. A torn
// last record is an append in progress, left for the next reload; a
// corrupt or malformed one is reported with the ErrNotFound as a
// *CorruptionError naming the file and offset, and hides no other block.
// Deletions are not reloaded: IDs are never reused.
//
// # File block manager layout
//
//	<dir>/<16 hex id>.block      one committed block
//	<dir>/<16 hex id>.block.tmp  a block being written (removed at open)
//
// Commit: fdatasync each file → rename to .block → fsync each directory once.
//
// # FsManager: roots, instance files, locks (instance version 1)
//
// Open returns an *FsManager (OpenFs gives it typed) over the data dirs
// (one per disk) and the metadata root (Options.MetadataDir, default the
// first data dir), canonicalized and de-duplicated:
//
//	<root>/instance                 storagepb.FsInstance: node UUID, format time
//	<dir>/block_manager_instance    storagepb.FsDirInstance: dir UUID, all dir
//	                                UUIDs, kind, filesystem block size
//	<dir>/block_manager.lock        flock(LOCK_EX) of the read-write owner; its pid
//
//	instance file (both kinds; 20-byte header, then the payload):
//	+---------------------+-------------+------------+--------------------------+---------+
//	| magic (8) "bhfsinst"| version u32 | length u32 | crc32c(bytes [0, 16) ‖   | payload |
//	|   or "bhdirins"     |    = 1      | of payload |   payload) u32           | (proto) |
//	+---------------------+-------------+------------+--------------------------+---------+
//
// The instance checksum covers magic ‖ version ‖ length, then the payload;
// the length must equal the file size minus 20 and be at most 1 MiB.
// Payloads are storagepb.FsInstance and storagepb.FsDirInstance
// (proto/storagepb/fs.proto). Both files are written with
// vfs.WriteFileAtomic (temp file, fsync, rename, fsync of the directory);
// any framing failure is a *CorruptionError naming the file and offset.
//
// Invariants of the FsManager:
//
//   - Every root's instance file holds the same UUID, or Open fails naming
//     both paths and UUIDs (ErrUUIDMismatch). A root without one gets the
//     existing UUID only if empty; with none anywhere, a read-write Open
//     formats every root.
//   - A directory of another block manager kind is refused (ErrKindMismatch).
//   - Only one read-write open per directory (flock; ErrLocked names the
//     holder). Read-only opens take no lock and create nothing.
//   - What a failed Open created is removed: files, then directories in
//     reverse order. New dir UUIDs reach the older dirs' all_uuids only
//     after the block manager opened.
//   - A block of tablet T goes to a healthy, non-full directory of T's
//     DataDirGroup (chosen by the power of two choices; grown by one
//     directory when all are full, i.e. below Options.ReservedBytes).
//   - A disk-failure I/O error (EIO and kin) marks its directory failed:
//     it gets no new blocks, its blocks fail with ErrDirFailed, and
//     OnTabletsFailed hears of the tablets whose group includes it. Open
//     skips failed directories; with none healthy it fails (ErrAllDirsFailed).
//   - The log manager opens .data and .metadata through a FileCache: at
//     most MaxOpenFiles descriptors plus those pinned by running I/O.
//
// # Seams
//
// dataDir is the per-directory abstraction; Options.OnIOError sees every
// I/O error before the error manager; fileOpener is the FileCache or the
// FS; Options.FreeSpace and Options.IsDiskFailure are test seams.
package blockstore
