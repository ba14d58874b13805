// Package tablet is one tablet's storage engine on a tserver: two write
// buffers (memstore), the tablet's TSFiles (tsfile), and reads merged over
// them (DESIGN.md 'Data model', 'Write path', 'TSFile', 'Read cache').
//
// # Write path
//
// The server validates and stamps a mutation with AssignTimestamps (every
// ServerTime op gets a server timestamp in µs, strictly increasing per
// tablet), appends it to the WAL, then calls Apply. Apply links all ops of
// the mutation in the active buffer as one batch, so no reader sees half a
// row mutation. Because the WAL holds concrete timestamps and a cell
// (row, family:qualifier, timestamp) written again overwrites, replay is
// idempotent.
//
// # Checkpoint seams
//
//	SwapBuffers()       under the server's exclusive state lock; memory only
//	FlushStandby(ctx)   writes the standby buffer as one TSFile (one
//	                    blockstore creation transaction); durable on return
//	InstallFlushed(i)   after the metadata names the file: the file joins the
//	                    read set and the standby buffer is dropped, in one
//	                    step for readers
//
// CompactFiles and InstallCompacted are the same pair for merging
// compactions. Open takes the existing TSFiles (restart, failover).
//
// # Reads
//
// A read takes a snapshot (buffer snapshots and referenced files under one
// lock), merges active buffer, standby buffer and TSFiles newest first
// (equal keys: the newest source wins), and resolves each row:
//
//  1. tombstones hide by timestamp: DeleteRow/DeleteFamily hide cells at
//     or before their timestamp, DeleteColumn those in [Timestamp, End);
//  2. the family's GC policy: the newest MaxVersions live versions of each
//     column, none older than now-MaxAge;
//  3. the read's selection: families/columns, TimeRange, then the newest
//     MaxVersions of what is left, per column.
//
// Get consults each TSFile's bloom filter first. Scan returns rows of
// [start, end) in order, with a row limit; TSFile scans read pages ahead.
// Rows with no visible cell are not returned.
//
// Invariants: a row mutation is visible whole or not at all; a TSFile
// joins the read set only through InstallFlushed/InstallCompacted, i.e.
// after its transaction committed; a file removed from the read set stays
// open until the last read that took it finishes. A TSFile is named by
// (store UUID, footer ID) — tsfile.Info.FooterRef — since block IDs are
// unique only inside one store and a tablet that moved reads files of
// several: compactions name their inputs so, and new files go to
// Options.Store only. FileRef.Release tells the opener when a file of
// another store is no longer read.
package tablet
