// Package merge is the tserver side of a tablet merge, the inverse of a
// split (docs/design.md 'Merge'): two adjacent tablets of a table (left
// ends where right starts), both served by this tserver, become one
// tablet whose range is the union of theirs, and a crash at any step
// leaves either both parents intact or the merge done.
//
// # Why both parents must be on one tserver
//
// The merged tablet's data is the union of the parents' TSFiles (their key
// ranges are disjoint, so a read of the merged tablet merges them without
// any rewrite) plus one new TSFile per parent holding its write buffer at
// the fence. One tserver can fence, flush and report both parents with a
// single master command and no cross-server coordination, exactly as a
// split does; the master moves one parent first (the existing move path:
// unassign from the old owner, assign to the new one only once it stopped)
// when they are on different tservers.
//
// # The steps (Run)
//
//  1. Prepare: a checkpoint first (Options.Checkpoint), so the buffers
//     that the fence must flush are small; then Options.BeginSplit, so no
//     checkpoint runs until the merge ends (a checkpoint would change the
//     parents' TSFile lists and log positions under it). A parent holding
//     a standby buffer (a failed flush) ends the merge with ErrBusy.
//  2. Allocate: one fresh tablet id from the master.
//  3. Fence: under the exclusive state lock (every write holds it shared
//     from its WAL append to its apply) both parents are routed through a
//     fenced split.DualWrite, so every later write fails with
//     split.ErrFenced (the client sees WRONG_TABLET-class errors, refreshes
//     its locations and retries), and both active buffers are swapped out.
//     Every write either is in a swapped buffer or the parents' TSFiles, or
//     was refused.
//  4. Flush: each swapped buffer is written as a new TSFile. No metadata
//     changes.
//  5. Report: the master, in one raft command, checks both parents' epochs
//     and owner, removes them and adds the merged tablet: range the union,
//     TSFiles the flushed files plus both parents' lists as the metadata
//     holds them, no log positions, ASSIGNED to this tserver at epoch 1.
//     The caller unloads the parents and loads the merged tablet through
//     the normal load path (it replays nothing: all its data is in files).
//  6. Committed.
//
// # Crash safety, step by step
//
// Until the commit in step 5 the only metadata is the parents', unchanged:
// their TSFile lists and log positions name every acknowledged write
// (every write is in the tserver's WAL before it is acknowledged), so a
// crash of the tserver (or of the master) at steps 1–5 leaves both parents
// intact; they are recovered from their logs like after any crash. The
// flushed files are then orphans no metadata names (deleted on a failure,
// else collected by the orphan pass). After the commit the merged tablet's
// files hold every acknowledged write of both parents: the fence came
// before the swap, so nothing was acknowledged after the snapshot. A
// compaction that commits a parent's new list during the merge is safe:
// the master takes the parents' lists from its own metadata, never from
// the report. When the report's outcome is unknown, the parents stay
// fenced and the caller unloads both: whichever the master decided, the
// next owner loads from metadata that covers every acknowledged write.
//
// # A refusal of a retried report is outcome unknown
//
// Only a definite refusal (ErrRefused) undoes the merge: the parents take
// writes again and the flushed files are deleted. A refusal is definite
// only when it answered the report's first attempt. The master connection
// retries an attempt on another master after a transport error, a timeout
// or a leader change, and the attempt it retries may have committed with
// its reply lost. The master answers a retried report of a committed merge
// as committed only while the merged tablet is the reporter's (meta's
// mergeDone); once it moved, or was split or merged again, the retry is
// refused (NotFound, FailedPrecondition …) though the merge committed.
// Undoing the merge then would let parents the metadata no longer has
// take writes no later owner reads, and delete files the merged tablet
// names. So a refusal of a retried report is outcome unknown: the parents
// stay fenced and are unloaded, nothing is deleted, and the master assigns
// whatever its metadata holds.
//
// Writes stop for the fence only: from step 3 to the merged tablet's load,
// which is two buffer flushes (small, after step 1's checkpoint), one raft
// command and opening TSFiles.
package merge
