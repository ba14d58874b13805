// Package replica is the one write path of a tserver: a Replica is one
// load of a tablet (id, range, epoch, its one serving state, the lock that
// lets it leave only between writes, the admission to a running split,
// the engine) and runs every write of it, from timestamp assignment to the
// lease check. The tserver's gRPC service, the checkpoint tests and the
// split tests all write through Replica.Write, so what they test is what
// serves.
//
// # One object, one serving state
//
// A served tablet is one Replica over one tablet.Tablet (the engine). The
// tserver serves Replicas; the checkpoint coordinator, recovery, splits
// and merges work on the same values through their interfaces
// (checkpoint.Tablet, Compactor, GarbageEstimator, Load and Replayer;
// split.Tablet, merge.Tablet), which this package implements and the
// lower packages declare, so no lower layer imports this one. A Replica
// value names one load of the tablet: loading it again, even at the same
// epoch, makes a new Replica.
//
// A Replica moves through three states, only forward:
//
//	loading ──Serve──▶ serving ──Stop/Close──▶ stopped
//	   └───────────────Stop/Close───────────────▲
//
// loading: opened over its TSFiles, its logs replayed (Replay); no reads,
// no writes. serving: reads and writes, checkpoints and compactions.
// stopped: final; Serve after it fails, so a load unloaded during its load
// report never serves. There is no other serving flag: the coordinator's
// Tablet.Serving is this state, so the write path and the checkpoint
// cannot disagree about whether the tablet serves.
//
//   - A write is admitted only if the state is serving when it checks it,
//     holding the ops lock shared (step 3 below) until its apply returned.
//     Stop sets stopped and then takes the ops lock exclusively: when it
//     returns, every write admitted before has returned from its apply,
//     and no write is admitted after (each later write sees stopped). So
//     the tserver takes a tablet out of its heartbeat (which lets the
//     master give it to another tserver) only after its last write is in
//     the log the next owner replays.
//   - FenceWrites, a replica's last step before a handoff to another
//     tserver (a rebalancing move, tserver/handoff.go), refuses every
//     later write as Stop does and waits for the admitted ones, but leaves
//     the state serving: reads go on, and a checkpoint of the tablet alone
//     flushes what the buffers hold, so the next owner replays nothing.
//     It is a gate on writes, not a second serving state; Stop follows.
//   - Reads (Get, Scan, ScanRanges, GetRows, the row-key listings) answer
//     only while serving; Replay applies only while loading.
//   - A background commit (checkpoint step 7, a compaction, a split's or a
//     merge's report) holds the load (Hold) from before it is sent until
//     after its install and deletions; Hold fails unless the replica
//     serves, and Close (which stops first) waits for every hold, then
//     closes the engine. So nothing computed for an ended load commits,
//     installs or deletes after Close returned (docs/design.md, 'Fencing
//     background commits').
//   - The engine's write primitives (BeginWrite, Apply, Abandon) are not
//     part of a Replica's methods: a loaded tablet's buffers change only
//     through the write path and Replay.
//
// # The steps of a write, and why in this order
//
//  1. The row is checked against the range.
//  2. Throttle waits while the write buffers are over their hard limit,
//     before any lock is taken (a checkpoint must be able to run).
//  3. The replica's ops lock is taken shared and the replica must be
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
//  7. During a split, the record is appended to the child log of the
//     child covering its row. A failed append there abandons the split
//     (it is checked after the split's fence, before its report), so the
//     parent keeps owning the row and the write still counts.
//  8. The mutation is applied to the active buffer; Apply returns once it
//     is visible to reads (once every write of lower sequence finished).
//  9. The lease is checked: if it ran out during the append the master may
//     have moved the tablet, and the write, although logged and applied
//     here, is answered with ErrLeaseLost (outcome unknown).
//
// # Batches
//
// WriteBatch runs these steps once for many rows of the tablet (the
// tserver's MutateRows and batch stream use it), and a single write is a
// batch of one: Write, WriteInternal and WriteRowLocked run the batch
// path with one row, as do the log's and the tablet's single-row calls
// (wal.Log.Append, Tablet.Apply), so one code path carries every write.
// Step 1 per row, one
// throttle wait, the rows' stripes taken shared (each stripe once, in
// stripe order, so two batches cannot wait on each other), one ops lock,
// one admission and one split admission; step 5 per row in the order of
// the batch, so an invalid row fails alone; one WAL append of every valid
// row (wal.Log.AppendBatch queues them into one group commit and waits
// once); a row whose append failed is abandoned; one split-log append
// per child; one apply pass in sequence order (each row applied and
// finished, then one wait until the last is visible); one lease check,
// whose failure is the outcome of every logged row. Each row gets its own
// error, with Write's meaning, and no goroutine runs per row.
//
// # Row locks and read-modify-write
//
// ReadModifyWrite (increment, append) runs through WriteRowLocked, and so
// does CheckAndMutate (lock, evaluate the predicate on the row, write the
// chosen operations as an ordinary row mutation). It reads a row, computes new
// cells from it and writes them. It must be atomic with respect to every
// other write of the row: the result must be what some serial order of
// the writes produces. Reads see a prefix of write-sequence order, and a
// write is visible once its Apply returned, but a plain write that has
// its sequence and is still in its WAL append is invisible: a
// read-modify-write that read past it and wrote at a higher sequence
// would compute from a state that misses it (a delete of the row at
// sequence 5, applied after an increment at sequence 6 that read the old
// counter, leaves old+1, which neither order produces).
//
// So each replica has striped row locks (256 RWMutexes; a row hashes to
// one): a plain write holds its row's stripe shared from before step 3
// until its apply returned; a read-modify-write holds it exclusively from
// before its read until its own apply returned. Hence, for one row:
//
//   - when the read-modify-write reads, every write of the row that got
//     a sequence before it has returned from Apply, so it is visible;
//   - no write of the row gets a sequence between the read and the
//     read-modify-write's own sequence, and every later one gets a higher
//     sequence (and, with server timestamps, a later timestamp) and sees
//     the result.
//
// The row's writes are thus serialised in sequence order around each
// read-modify-write, which is atomic. The adds to aggregate cells
// (MergeCell operands: AddToCell, MergeToCell) are plain writes: blind,
// they read nothing and take the stripe shared like a set, and the
// tablet folds them on read; a read-modify-write rule on an aggregate
// family is refused before anything is read (ErrInvalidRule), and CheckAndMutate
// checks both branches' ops against the families' kinds before it reads. Plain writes of a row share the
// stripe, so they still run concurrently and share group commits; only
// writes of rows on the stripe of a running read-modify-write wait, never
// the whole tablet. The stripe is taken before the ops and admission
// locks, which are only held shared by writes, so a waiting checkpoint
// cannot close a cycle: the lock order is stripe, ops, admission.
//
// The log records the resulting SetCells, not the rules, so replay and
// split-log replay rewrite the same cells. The guarantee survives a
// restart, a failover and a split because each of those hands the row
// to a new replica only after the old one took its last write (Stop
// waits for the writes in flight; a split's fence refuses new writes and
// waits for the admitted ones before its report), and the new replica
// replays every logged write of the row before it serves. A
// read-modify-write refused by the old replica (not serving, splitting)
// wrote nothing and may be retried on the new one. A read-modify-write whose outcome is
// unknown (ErrUnknownOutcome: the lease ran out, or the engine closed,
// after the append) may still take effect when the next owner replays
// the log, so it must not be retried.
//
// # Invariants
//
//   - When Write (or WriteBatch for a row) returns nil the record is durable in the WAL (fdatasync
//     returned) and visible to every later read of the replica; during a
//     split it is also durable in its child's log, or else that
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
