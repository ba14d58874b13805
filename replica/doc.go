// Package replica is the one write path of a tserver: a Replica owns one
// served tablet (id, range, epoch, serving state, the lock that lets it
// leave only between writes, the admission to a running split) and runs
// every write of it, from timestamp assignment to the lease check. The
// tserver's gRPC service, the checkpoint tests and the split tests all
// write through Replica.Write, so what they test is what serves.
//
// # The steps of a write, and why in this order
//
//  1. The row is checked against the range.
//  2. Throttle waits while the write buffers are over their hard limit,
//     before any lock is taken (a checkpoint must be able to run).
//  3. The replica's ops lock is taken shared and the tablet must be
//     serving: Stop takes it exclusively, so an unloaded tablet has no
//     write between its append and its apply.
//  4. The checkpoint's state lock is taken shared (AdmitWrite) until after
//     the apply: no checkpoint swaps buffers or rolls the log meanwhile,
//     so the record lies in a log file the tablet's metadata still names
//     until the buffer it was applied to is flushed.
//  5. A running split's dual-write admits the write (or refuses it once
//     the split's report is being sent: the client refreshes its
//     locations; nothing was logged). Then the mutation is validated and
//     gets the tablet's next write sequence and its server timestamps
//     (tablet.BeginWrite), before the append: the log holds the sequence
//     and concrete timestamps, so replaying a record rewrites the same
//     cells. The sequence stays in flight until the apply (or Abandon, if
//     the append fails), and no read sees a write of higher sequence
//     before it; being inside the admitted section, no write is in flight
//     when a checkpoint swaps buffers.
//  6. The record is appended to the tserver's WAL; Append returns once it
//     is durable. The caller's context can stop it only before the record
//     is queued for a group commit (then it is never written); a queued
//     record is waited for whatever the context does and, once logged,
//     applied, so a cancelled request never leaves a record that is
//     logged but invisible until the next restart.
//  7. During a split, the record is appended to the split log of the
//     child covering its row. A failed append there abandons the split
//     (it is checked after the split's fence, before its report), so the
//     parent keeps owning the row and the write still counts.
//  8. The mutation is applied to the active buffer; Apply returns once it
//     is visible to reads (once every write of lower sequence finished).
//  9. The lease is checked: if it ran out during the append the master may
//     have moved the tablet, and the write, although logged and applied
//     here, is answered with ErrLeaseLost (outcome unknown).
//
// # Invariants
//
//   - When Write returns nil the record is durable in the WAL (fdatasync
//     returned) and visible to every later read of the replica; during a
//     split it is also durable in its child's split log, or else that
//     split never reports to the master (the parent keeps the row).
//   - When Write returns an error the record is either not logged, or
//     logged and applied (ErrLeaseLost; an error of step 7 is not
//     returned): never logged and invisible.
//   - An append to a failed log (wal.ErrFailed: an I/O error the log
//     cannot recover from) is reported to Options.LogFailed; the tserver
//     then gives up its lease and stops, so the master moves its tablets
//     and replays its log elsewhere.
//
// The package writes no files of its own.
package replica
