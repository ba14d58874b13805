// Package tserver is the tablet server: it wires the shared WAL (wal), the
// tablet engines (tablet), the checkpoint coordinator (checkpoint) and the
// block store (blockstore) into the gRPC TServer service, and keeps the
// tserver in the cluster through package membership (registration,
// heartbeats, lease), whose Host it is (member.go).
// The write path itself, from timestamp assignment to the lease check, is
// package replica's: the service decodes and validates a request, finds
// the replica, calls it and maps its errors to statuses. MutateRows runs
// its rows as one Replica.WriteBatch (one WAL group commit), and so does
// each tablet's group of writes in a message of the batch stream
// (BatchCommands, batchstream.go), whose commands each get the status
// their unary call would have returned. Close first ends the batch
// streams (commands received after it are refused with NOT_SERVING,
// nothing applied), so that the graceful stop does not wait for streams
// a client keeps open.
//
// Invariants kept here (numbered as in docs/design.md, 'Invariants'):
//   - 1: a write is acknowledged only after wal.Append returned, i.e. after
//     its record's fdatasync;
//   - 6: a tablet is served only at the epoch the master gave, and only
//     while the lease — renewed by heartbeat replies and counted from when
//     the heartbeat was sent, on the monotonic clock — is valid; a write
//     whose lease ran out during its append is not acknowledged; told to
//     register again, the tserver drops every tablet first, and every
//     register call is a new incarnation; a heartbeat lists every tablet
//     this tserver may still serve at its epoch, a load still waiting for
//     its slot too (not serving), and an unassignment cancels such a load
//     before it opens, so a heartbeat that no longer lists a tablet tells
//     the master its old owner let go (a move may then finish);
//   - 8: every handler returns apierr statuses: InvalidArgument for bad
//     input, NOT_SERVING/WRONG_TABLET/RECOVERING details for routing;
//     ReadModifyWriteRow answers FailedPrecondition for an increment of a
//     cell that is not 8 bytes; every write (ReadModifyWriteRow and
//     CheckAndMutateRow included) answers Unavailable (never a routing
//     detail, which tells a client that nothing was applied) when it may
//     have been logged but is not acknowledged;
//   - 9: a loaded tablet serves only after the master committed this
//     tserver's log position into the tablet's list: its own entry of a
//     ReportTabletLoads call (loadreport.go batches the loads that finish
//     while a call is in flight into the next one; no timer);
//   - fail stop: once the log fails (an I/O error on a log file: ENOSPC, a
//     failed fdatasync; no later write can be made durable) the tserver
//     gives up its lease and stops serving at once, logs the cause, and
//     stops; Done and Err report it and cmd/tserver exits 1. The master
//     then sees no heartbeat, declares it dead and recovers its tablets
//     from its log elsewhere: every acknowledged write is in that log.
//   - a TSFile is named by its block store's UUID and its footer ID
//     (TSFileRef.block_store_uuid, tsfile.Info.Store): block IDs are
//     unique only per store. This tserver deletes blocks only in its own
//     store; files of other stores that its compactions replace are
//     collected by their owners (GetGCReferences answers per store UUID),
//     and so are replaced files of its own store that a backup may share
//     (SharedTSFiles; docs/design.md 'Backups').
//   - backup export and import (backup.go): ExportTSFile reads a TSFile
//     of any store (read-only, as a moved tablet's) and streams its
//     entries; ImportTSFile writes streamed entries, checked to be in
//     order, as a new TSFile of its own store, named by nothing until the
//     caller adds it to its backup at once; the orphan pass counts its
//     blocks as referenced for an hour meanwhile (importHolds), whatever
//     its grace.
//   - schemas: the tserver keeps the highest TableSchema.version it has
//     seen of each table (assignments, heartbeat replies, UpdateSchema
//     pushes) and every tablet of the table runs on it, also one loading
//     from an assignment that carried an older version (schema.go);
//     DropRows writes a delete-row tombstone per row present in a range
//     through the replica's write path, so it is logged and ordered;
//     PurgeFamily applies a schema without a deleted family, waits for
//     the writes validated before, and writes a delete-family tombstone
//     per row holding the family the same way (replica.WriteInternal);
//   - SampleRowKeys answers a tablet's sample keys and estimated size
//     (sample.go);
//   - compactions are the checkpoint coordinator's, with the policy of
//     Options.Compaction* (the --compaction-* flags: a major compaction of
//     each tablet every 24 h by default and whenever its estimated garbage
//     passes 20 % of its entries, merging ones past 6 TSFiles);
//   - each heartbeat reports every tablet's TSFile space (space.go:
//     file, data and raw bytes, entries, tombstones, garbage share);
//     the Compact RPC runs one now for one tablet or every tablet here;
//   - a read-only store of another tserver is open only while some TSFile
//     of a tablet here is read through it (stores.go): it closes with the
//     last such file and is opened again on demand.
//
// A tablet's life here: assigned (heartbeat reply or AssignTablets) →
// opened over its TSFiles, from whichever block store holds each (other
// tservers' stores are opened read-only) → its logs replayed from every
// listed position → load reported → serving → unassigned (in-flight writes
// drain first) or the process ends. Its unflushed writes stay in this
// tserver's log, which its metadata names, until a checkpoint flushes them.
// The tablet is one replica.Replica the whole way, registered from its
// open on: its one serving state (loading, serving, stopped) is what the
// service, the heartbeat, the checkpoint and the splitter read, and the
// tserver moves it (Serve after the load report, Stop then Close at
// unload), never a second flag (package replica, "One object, one serving
// state").
package tserver
