// Package master is the gRPC Master service (proto/bighivepb/master.proto)
// over the replicated metadata of package meta.
//
// # Who answers
//
// Any master answers every RPC. A master that is not the raft leader
// forwards the call over gRPC to the leader's gRPC address (taken from the
// peer list) and relays the answer. It forwards through the same
// leader-following internal/masterconn connection clients and tservers
// use, starting at the leader raft names: a hung leader costs one attempt
// (Config.ForwardAttemptTimeout, within the caller's deadline) and the
// call moves on to another master. A call that arrives while no leader is
// known waits up to 3 s (longer than an election) for one. A call that
// arrives already forwarded, or finds no leader after that wait, is
// refused with Unavailable carrying a
// bighivepb.NotLeader detail naming the leader's gRPC address (empty if
// none is known), which clients follow. Reads that route clients
// (GetTableLocations, DescribeTable, ListTables, ListTServers,
// GetGCReferences) are answered by the leader after raft.VerifyLeader, so
// they are never stale. A new leader first waits for a raft barrier, so its
// state includes every commit of earlier terms, before it answers anything.
//
// # Schema changes
//
// AddFamily, DeleteFamily, SetGCRule and SetFamilyCompression commit one
// meta command (which gives the schema a new version), then push the schema to every tserver
// holding a tablet of the table (TServer.UpdateSchema) and return once
// each acknowledged; heartbeat replies carry changed schemas as well.
// DropRowRange has each overlapping tablet's owner write a delete-row
// tombstone per row through its write path (TServer.DropRows), looking
// tablets up again when they split or move (schema.go). DeleteFamily then
// has each tablet's owner mask the family's cells the same way
// (TServer.PurgeFamily: a delete-family tombstone per row holding it) and
// records FamilyPurged; until then the name stays in the schema's
// purging_families and cannot be created again, and a new DeleteFamily or
// an AddFamily of the name finishes the purge first (a master failing in
// the middle leaves it resumable).
//
// # Backups
//
// CreateBackup (backup.go; docs/design.md 'Backups') checkpoints every
// tserver serving a tablet of the table, then records in one command the
// file lists the metadata holds for the table's tablets, which the state
// machine refuses unless every tablet is one those checkpoints covered;
// it flushes again on a refusal, until the call's deadline. A request id
// makes a retried call answer the backup its first attempt recorded.
// RestoreTable is one command making a table of a backup's schema,
// ranges and files; the leader loop assigns its tablets. The leader
// deletes expired backups every Config.BackupExpiryInterval. SharedTSFiles
// tells a tserver which replaced files of a compaction a backup may share,
// so it leaves them to its orphan pass. Each step of a backup or a restore
// is a checkpoint (idempotent) or one command, so a leader dying at any
// BackupStep (Config.BackupHook) leaves a backup or a restored table whole
// or absent. GetBackup and ListBackups answer each backup's space
// (backupspace.go): the bytes of the files it alone names, and of those a
// tablet or another backup names too, from the sizes the metadata holds.
// CopyBackup is one command that reads the source and records the copy
// naming its files; ImportBackup records an imported backup CREATING,
// then the files tservers wrote for it, one command each, then READY
// (docs/backup-format.md).
//
// # What goes through raft
//
// State changes only, one raft command each: DDL, tserver registrations,
// assignments and unassignments (batched: a tick assigns every unassigned
// tablet in one command), load, checkpoint (a burst of reports is one
// command), split and merge reports, id allocation, backups and restores. Heartbeats, leases, reported
// tablet sizes, rebalancing moves in flight (and the starts the move
// budget counts, and registration times the warm-up counts from), cache
// priorities and the starts of tablets' unavailability live only in the
// leader's memory; a new leader starts every registered tserver's lease
// afresh, from the moment it became leader, takes every tserver it knows
// as warm, and starts with a full move budget.
//
// # Leases and assignment (the leader's loop)
//
//   - A heartbeat renews the tserver's lease for Config.Lease, counted at
//     the tserver from when it sent the heartbeat and at the master from
//     when it received it, so the master's view always ends later.
//   - A tserver whose last heartbeat is older than Lease + DeadMargin is
//     dead (the leader loop wakes when the next lease runs out, not only
//     every TickInterval, so it is declared then): its tablets become UNASSIGNED in one command (epoch kept) and
//     are assigned again, each assignment incrementing the epoch. The
//     leader marks the lease dead (under its lock) before it reads the
//     tablets to unassign, and a heartbeat of a dead incarnation is never
//     renewed, whatever metadata it read: it is answered Reregister, and a
//     register of that incarnation is refused, so the tserver drops every
//     tablet and comes back as a new incarnation. Otherwise a heartbeat
//     that read the metadata before the Unassign committed could give the
//     old owner a lease over tablets whose logs are being split.
//   - A lease is granted (a heartbeat or registration answered) only while
//     a quorum confirmed this master's leadership within ConfirmWindow
//     (at most DeadMargin): the leader asks (raft's VerifyLeader) every
//     ConfirmWindow/4, and a leader that resumes from a pause after another
//     was elected refuses leases, Unavailable, until its loop notices and
//     steps down (confirm.go). A new leader declares a tserver it never
//     heard from dead once Lease + ConfirmWindow passed since its own
//     start. So every lease an old leader granted ends before a new leader
//     may declare that tserver dead.
//   - Leases are time.Now() readings compared on the monotonic clock.
//   - Start-up grace (grace.go): a new leader session neither declares
//     tservers dead nor assigns until Config.StartupGrace passed or every
//     tserver the metadata knew at its start has heartbeated or
//     registered, so a cold start spreads the tablets over the tservers
//     that check in; a first start (no tserver known) ends it two
//     heartbeats after the first tserver checked in.
//   - Unassigned tablets go to live tservers that have heartbeated to this
//     leader, always to the one with the fewest tablets (ties by uuid), so
//     the spread is within one of even.
//   - When the spread exceeds one (a tserver joined), at most
//     Config.MaxMoves tablets move at a time, and at most
//     Config.MovesPerInterval start in any Config.MoveInterval,
//     cluster-wide; a tserver is a target only once
//     Config.RebalanceWarmup has passed since it registered with this
//     leader (moveBudgetLocked, rebalanceTargetsLocked in leader.go), so
//     a tserver that was stopped past its lease and came back takes
//     tablets from the others gradually. A move never makes two
//     owners (invariant 6 in docs/design.md, 'one tserver serves a tablet
//     at a time'): the leader first tells the old owner
//     to unassign the tablet in a heartbeat reply, and commits the new
//     assignment (new epoch) only after a later heartbeat of the old owner
//     no longer lists the tablet, or after the old owner is dead.
//   - Nudges (nudge.go): what a tick decides for a tserver (an
//     assignment committed, a move's unassignment, log split tasks) goes
//     out in that tserver's heartbeat reply, and the tick then asks it to
//     heartbeat at once (an empty TServer.AssignTablets), so each step of
//     a recovery or a move costs a round trip, not up to a heartbeat
//     interval. Best effort: a lost nudge costs only that wait.
//   - Heartbeats are full or deltas on the last one the leader
//     acknowledged (heldset.go, internal/hbdelta). The leader keeps each
//     lease's held set in memory, applies a delta only onto the base it
//     acknowledged (else: send_full, nothing applied), and serializes one
//     tserver's heartbeats.
//   - Every heartbeat reply carries the reconciliation: a held tablet the
//     metadata does not give to this tserver at that epoch (deleted table,
//     split parent, moved, stale epoch) is unassigned; an owned tablet the
//     tserver does not hold is (re)sent as an assignment, at most once per
//     ResendInterval. It is recomputed on a full heartbeat, a changed held
//     set or ownership generation (meta.FSM.OwnerGeneration, read before
//     the View), a move from the tserver, or a resend due; otherwise the
//     last outcome is reused, so a steady heartbeat reads no tablet. Tservers apply unassignments before assignments, and
//     treat an assignment at an epoch they already hold as a no-op.
//   - Cache priorities set with SetCachePriority are pushed in heartbeat
//     replies to the tservers holding the table's tablets when they change.
//   - Cost per heartbeat and per tick (issue 21, docs/scale.md): both read
//     the owners index and tablet briefs (table, state, owner, epoch, read
//     from the encoded record without decoding it, meta.Reader.TabletBrief);
//     a heartbeat decodes whole only the owned tablets it may (re)send, a
//     tick only the UNASSIGNED ones. Assignment picks the least loaded
//     tserver from a heap.
//
// # Errors
//
// Every error is an internal/apierr error: InvalidArgument (bad names,
// duplicate families, unsorted, duplicate or empty split keys, no
// families), AlreadyExists, NotFound, FailedPrecondition (stale epoch or
// not the owner), Unavailable (no leader, leadership lost), per invariant 8
// in docs/design.md, 'bad input gets a clear status'.
//
// Log splitting of dead tservers' logs before their tablets are assigned
// again, and garbage collection of recovery files: logsplit.go. The dead
// prefixes of one tick are planned as one group of tasks (at most the dead
// log's files plus a constant per prefix, whatever the number of live
// tservers) and committed in one MetaLogSplitsDone command.
//
// Merges (merge.go; docs/design.md 'Merge'): the leader's merger looks
// every Config.MergeCheckInterval for adjacent serving tablets with no move
// in flight, both reported (while serving) below Config.MergeThreshold for
// Config.MergeMinAge and together below half Config.SplitThreshold (the
// policy, mergeplan.go: a split's children never merge back), moves one of
// a pair to the other's tserver when they differ (the move path above; the
// pair is then held out of rebalancing for a minute), and asks that
// tserver to merge them (TServer.Merge); MergeTablets does the same for one
// pair on demand. ReportMerge commits the tserver's report. The leader's
// merge state is memory only: the metadata changes in the one MetaMerge
// command, so a crash at any MergeStep leaves the parents or the merged
// tablet, never neither.
//
// The leader measures how long each tablet goes unserved across a move or
// a recovery (unavail.go: bighive_master_tablet_unavailable_seconds by
// cause, and a "tablet available again" log line per tablet), in memory
// only.
//
// The status page at "/" of the HTTP port (status.go) reads this master's
// raft and metadata copy, and on the leader its session (leases, reported
// sizes). Recent events (leadership, registrations, tservers declared
// dead, recoveries, moves, splits, table creation) go to a bounded
// in-memory ring (events.go) that only a leader session records into; it
// is neither persisted nor replicated.
package master
