// Package checkpoint turns a tserver's tablets into a durable store: the
// seven-step checkpoint (docs/design.md 'Checkpoint'), merging and
// major compactions of TSFiles, log garbage collection, orphan block
// collection and restart recovery.
//
// # The checkpoint
//
// A Coordinator owns the global state lock and keeps it private. A write
// takes it shared through AdmitWrite, from before its WAL append to after
// its buffer apply (package replica is the one write path that does);
// a split takes it exclusively through Exclusive to switch on
// dual-writing; Checkpoint holds it exclusively only to swap buffers and
// roll the log:
//
//  1. wait until no split runs and the previous checkpoint finished;
//  2. take the state lock exclusively;
//  3. swap active ↔ standby buffer of every serving, non-empty tablet;
//  4. roll the WAL (Roll does no I/O);
//  5. release the lock;
//  6. write each standby buffer as one TSFile (one creation transaction)
//     and free it; writes go on meanwhile;
//  7. commit, per tablet, the full TSFile list and the single position of
//     the rolled-to file to the Metadata.
//
// Because a write holds the shared lock from its WAL append to its buffer
// apply, every record in a file before the rolled-to one is in a buffer
// swapped at step 3 (or in an earlier TSFile), and every later write is in
// the rolled-to file or later: after step 6 the new position covers all
// unflushed data. The invariants:
//
//   - Metadata names a TSFile only after its creation transaction
//     committed (invariant 3 in docs/design.md, 'metadata names only
//     committed TSFiles'): step 7 runs after step 6.
//   - A failure before step 7 changes no metadata: the old positions still
//     cover the data. A standby whose flush failed stays and is flushed by
//     the next checkpoint, which then records the position of the roll that
//     sealed it (not the newer one: the active buffer holds writes since
//     that roll); a failed step 7 is retried by the next checkpoint, which
//     reports the full current file list again.
//   - Only serving tablets (logs replayed) take part.
//   - Replaced TSFiles' blocks are deleted with one deletion transaction
//     only after a commit that no longer names them.
//   - A block is named by (store UUID, block ID) — blockstore.BlockRef —
//     wherever it is referenced, compared or deleted: IDs are unique only
//     inside one store. A deletion goes only to Options.Blocks and only for
//     files whose tsfile.Info.Store is Options.Store; a replaced file of
//     another store (a tablet that moved here reads it) is left to that
//     store's owner, whose orphan pass collects it once no metadata names
//     it.
//   - Compactions run one at a time (compactMu), paced to CompactionRate
//     on average, so they cannot hold back checkpoints for long or starve
//     writes; a major one runs every MajorEvery and when a tablet's
//     GarbageEstimator reports more than GarbageShare of its entries as
//     garbage, but never for a tablet whose only file is its last major
//     compaction's output (that would only loop).
//   - Log GC deletes only files older than every position any tablet
//     lists (References: the master in the cluster), never the current
//     file; orphan collection deletes only blocks of Options.Store that no
//     tablet anywhere names and no local tablet uses, after a grace period
//     (invariant 9 in docs/design.md, 'nothing named is deleted').
//
// # Recovery
//
// Recover (single node) opens every tablet over its TSFiles, then replays
// each of its log positions — that file and every later file of the
// prefix — reading each log file once for all tablets, and reports
// progress and time. RecoverTablet does the same for one tablet a tserver
// loads. Replay is idempotent (invariant 4 in docs/design.md), and Engine.Replay skips a
// record whose sequences are all at or below the tablet's FlushedSeq: it
// is in the TSFiles already, and applying it again could bring back a
// cell whose tombstone a major compaction purged (package tablet,
// "Compactions").
//
// The package writes no files of its own: TSFiles are the engine's
// (tablet/tsfile), log files the WAL's, and the local metadata format is in
// package localmeta.
package checkpoint
