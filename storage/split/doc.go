// Package split is the tserver side of a tablet split (docs/design.md
// 'Split'; invariant 5 there, 'a split commits in one transaction'): one tablet (the parent)
// becomes two (the children) without losing or blocking a write, and a
// crash at any step leaves either the parent intact or the split done.
//
// # Files
//
//	<root>/splitlog/<child-id>.log   one per child, created at step 4
//
// A child log is a single-file log in the WAL's format (wal.CreateSingle,
// format version 2, see package wal): file header with the child id as
// prefix, then records `seq, timestamp, tablet id (the child's), row
// mutation`, length-prefixed and CRC-32C checksummed. The children's
// metadata names it (TabletMeta.child_logs, relative to the root); a
// child's loader replays it (wal.ReplayFile) after its TSFiles are open.
//
// # The six steps (Run)
//
//  1. Preparing: Options.BeginSplit (the checkpoint coordinator's) makes
//     checkpoints wait; it waits for a running one. So neither the parent's
//     buffers nor its TSFile list nor its log positions change under the
//     split (a compaction may still replace files; then reading a replaced
//     file fails and the split is retried).
//  2. Two fresh ids from the master (AllocateTabletIds). Nothing else.
//  3. The middle row: one scan of the visible rows with bounded sampling;
//     the first row at which half the bytes lie before it. It is a row key,
//     so every row goes whole to one child.
//  4. Both child logs are created (header and directory entry synced).
//     Then, under the exclusive state lock (Options.Exclusive) — which every
//     write holds shared from its WAL append to its apply — the parent's writes are routed
//     through DualWrite and the active buffer is swapped out. This is the
//     snapshot point S: a write acknowledged before S is in the swapped
//     buffer or the TSFiles; a write after S is appended (durably, before
//     its acknowledgement) to the log of the child covering its row,
//     as well as to the tserver's WAL.
//  5. The children's TSFiles: the swapped buffer is flushed to a temporary
//     TSFile, and the merge (newest first) of it and the parent's TSFiles,
//     clipped to each child's range, is written as one TSFile per child.
//     No metadata changes; the temporary file is deleted.
//  6. The parent is fenced: new writes fail with ErrFenced (the tserver
//     answers WRONG_TABLET) and the admitted ones finish their split-log
//     append. A write whose split-log append failed (it is in the
//     parent's log and buffer, not in its child's log) abandons the
//     split here, before any report. Then the report: the master, in one raft command (one bbolt
//     transaction), checks the parent's epoch, removes the parent and adds
//     the children (range, TSFiles, no log positions, child logs), both
//     ASSIGNED to this tserver at epoch 1. The caller unloads the parent
//     and loads the children through the normal load path.
//
// # Crash safety, step by step
//
// Until the master's commit in step 6 the only metadata is the parent's,
// unchanged: its TSFile list and its log positions still name every
// acknowledged write, because every write of the parent — dual-written
// or not — is in the tserver's WAL before it is acknowledged. So a crash
// (or failure) at steps 1–6 before the commit leaves the parent intact,
// and after recovery (here or on another tserver) it holds every
// acknowledged write; the leftovers are child logs (removed on a failure;
// after a crash unnamed files no replay reads) and the children's TSFile
// blocks, which no metadata names (deleted on a failure, else collected by
// the orphan pass). A failed split is retried later.
//
// After the commit the children hold every acknowledged write of their
// rows: those acknowledged before S are in their TSFiles (the snapshot
// holds all of the parent's data as of S); those after S are in their
// child logs, durably before the acknowledgement; and no write is
// acknowledged by the parent after the fence, which precedes the report.
// A record in both (a write that raced the snapshot can only be in the
// child log, but replaying a child log twice, or one whose writes a later
// checkpoint of the child flushed, is harmless) replays idempotently: the
// triple (row, column, timestamp) is unique and its timestamp is in the
// record (invariant 4 in docs/design.md, 'replay is idempotent'). Hence the children need no log position
// of the parent; each child's loader adds its own position before its
// first write, as for any load.
//
// When the report's outcome is unknown (the master did not answer), the
// parent stays fenced and the caller unloads it: whichever the master
// decided, the next owner of the rows loads them from metadata that covers
// every acknowledged write.
//
// A refusal of a retried report is outcome unknown too. Only a definite
// refusal (ErrRefused) undoes the split (the parent takes writes again,
// the child logs and the children's TSFiles are deleted), and a refusal is
// definite only when it answered the report's first attempt. The master
// connection retries an attempt on another master after a transport
// error, a timeout or a leader change, and the attempt it retries may have
// committed with its reply lost. The master answers a retried report of a
// committed split as committed only while both children exist as the
// split made them (meta's splitDone); once a child was split or merged
// again the retry is refused (NotFound …) though the split committed, and
// undoing it would let a parent the metadata no longer has take writes
// and delete the files and child logs the children name.
//
// # Storms
//
// The tserver (tserver/split.go) splits a tablet at most once per interval,
// runs a bounded number of splits at once, and never splits a tablet that
// is not serving or while tablets are loading.
package split
