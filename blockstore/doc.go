// Package blockstore is Bighive's block layer, after Apache Kudu's
// (seed 001): immutable, append-only blocks named by a BlockID, written by a
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
//	<dir>/<uuid>.metadata  header + records:
//
//	header (16 bytes, version 1):
//	+--------------------------+-------------+-------------------------+
//	| magic "bhblkmd\x00" (8)  | version u32 | crc32c(bytes 0..12) u32 |
//	+--------------------------+-------------+-------------------------+
//	record (repeated, appended):
//	+------------+------------------------------+--------------------------+
//	| length u32 | crc32c(length ‖ payload) u32 | payload: storagepb.Block- |
//	|            |                              | Record (proto, ≤ 4096 B)  |
//	+------------+------------------------------+--------------------------+
//
// Integers are little-endian; crc32c is Castagnoli. BlockRecord holds the
// block id, CREATE or DELETE, a timestamp in µs and, for CREATE, the offset
// and length in the data file. A container is checked out by one writer from
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
// # File block manager layout
//
//	<dir>/<16 hex id>.block      one committed block
//	<dir>/<16 hex id>.block.tmp  a block being written (removed at open)
//
// Commit: fdatasync each file → rename to .block → fsync each directory once.
//
// # Seams for the next layer
//
// dataDir is the per-directory abstraction (FsManager adds UUIDs, locks,
// free space and failure state); Options.OnIOError is the error-manager
// hook; fileOpener is the indirection the FileCache will implement; the
// directory picker takes CreateBlockOptions.TabletID for directory groups.
package blockstore
