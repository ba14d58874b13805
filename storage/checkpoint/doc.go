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
//   - What a checkpoint leaves for the next (a flushed file not yet
//     committed, the roll that sealed a standby) belongs to one load of
//     the tablet (one Tablet value), never to its id: a tablet unloaded
//     and loaded here again starts clean, and its new buffers are flushed,
//     never replaced by the old load's file.
//   - Only serving tablets (logs replayed, not unloaded) take part, and
//     only serving tablets are compacted. Tablet.Serving is asked of the
//     tablet's one serving state (the tserver's replica.Replica), never of
//     a copy that could disagree with the write path's. CheckpointTablets
//     narrows the participants to the serving tablets it picks (a tablet
//     about to be handed to another tserver): the others keep their
//     buffers and log positions, as a tablet that did not serve when a
//     checkpoint began does.
//   - Replaced TSFiles' blocks are deleted with one deletion transaction
//     only after an accepted commit of the same load that no longer names
//     them, while that load is held and the lease is valid (Fencing), and
//     only files References (SharedFiles) does not call shared: a file a
//     backup or a restored table may name is left to the orphan pass
//     (docs/design.md 'Backups').
//   - Result.Covered names the tablets whose committed files hold every
//     write made before the checkpoint's step 2: a backup's cut.
//   - A block is named by (store UUID, block ID) — blockstore.BlockRef —
//     wherever it is referenced, compared or deleted: IDs are unique only
//     inside one store. A deletion goes only to Options.Blocks and only for
//     files whose tsfile.Info.Store is Options.Store; a replaced file of
//     another store (a tablet that moved here reads it) is left to that
//     store's owner, whose orphan pass collects it once no metadata names
//     it.
//   - Compactions run one at a time (compactMu), paced to CompactionRate
//     on average and resting for CompactionDuty, so they cannot hold back
//     checkpoints for long or starve writes; a major one runs every
//     MajorEvery and when a tablet's GarbageEstimator reports more than
//     GarbageShare of its entries as garbage, but never for a tablet whose
//     only file is its last major compaction's output (that would only
//     loop). The backlog rule below lifts the rest and the pacing for the
//     tablets that fell behind.
//   - Log GC deletes only files older than every position any tablet
//     lists (References: the master in the cluster), never the current
//     file; orphan collection deletes only blocks of Options.Store that no
//     tablet anywhere names and no local tablet uses, after a grace period
//     (invariant 9 in docs/design.md, 'nothing named is deleted').
//
// # Fencing
//
// Every metadata update goes through one function (commit) and follows
// the fencing rule of docs/design.md ('Fencing background commits'):
//
//   - an update names its load (Update.Load, the Tablet value) and is
//     refused with ErrLoadEnded once that load ended: the coordinator
//     holds the load (Load.Hold) from before the commit until after the
//     install and the deletions that follow; a load that stopped serving
//     cannot be held, and ending it (replica.Replica.Close) waits for
//     every hold;
//   - nothing starts, commits or deletes without a valid lease
//     (Options.Lease, ErrNoLease);
//   - the file list is a compare-and-swap (Update.Replaced, Update.Drops,
//     ErrFilesChanged);
//   - a refusal (*RefusedError) installs and deletes nothing, and is
//     returned as an error; a commit without an answer leaves what it
//     named pending in the load's state (a flushed file, a compaction),
//     and the next update of that load names it again until one is
//     accepted.
//
// # Compaction backlog
//
// The duty rest keeps compaction from starving writes, and so, under a
// sustained write load at full speed, lets compaction fall behind: files
// per tablet (read amplification) would grow without bound. The backlog
// rule, after RocksDB's level-0 slowdown and stop triggers and HBase's
// blocking store files, makes the two meet at a bounded file count:
//
//   - A tablet with more than BacklogFiles TSFiles (default 2 ×
//     MaxTSFiles) is in backlog mode. Run looks at tablets most files
//     first; a backlog-mode tablet gets a merging compaction wide enough
//     (files − MaxTSFiles + 1, at least MergeWidth) to bring it back to
//     MaxTSFiles, or the major one when one is due, with no duty rest
//     after it; a tablet entering backlog mode cuts a running rest short.
//     It leaves backlog mode with that compaction.
//   - Writes to a tablet with more than StopFiles TSFiles (default 2 ×
//     BacklogFiles) are delayed by SlowWrite, before any lock: 1 ms for
//     the first file over, doubling with each further one, at most
//     MaxWriteDelay (default 250 ms, never more than 1 s). Writes are
//     slowed, never stopped: the delay holds nothing a checkpoint or a
//     compaction waits for, so both proceed. The tablet's compactions are
//     not paced to CompactionRate meanwhile (HBase's pressure-aware
//     throughput limit is lifted the same way past its blocking count).
//   - The counts come from the checkpoint's and the compaction's installs
//     and from each look for compactions; the write path reads one atomic
//     counter unless some tablet is over StopFiles.
//
// # Recovery
//
// Recover (single node) opens every tablet over its TSFiles, then replays
// each of its log positions — that file and every later file of the
// prefix — reading each log file once for all tablets, and reports
// progress and time. RecoverTablet does the same for one tablet a tserver
// loads. Replay is idempotent (invariant 4 in docs/design.md), and the
// engine's replay (tablet.Tablet.Replay) skips a record whose sequences
// are all at or below the tablet's FlushedSeq: it is in the TSFiles
// already, and applying it again could bring back a cell whose tombstone
// a major compaction purged (package tablet, "Compactions").
//
// The package writes no files of its own: TSFiles are the engine's
// (storage/tablet/tsfile), log files the WAL's, and the local metadata format is in
// package localmeta.
package checkpoint
