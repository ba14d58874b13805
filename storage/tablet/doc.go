// Package tablet is one tablet's storage engine on a tserver: two write
// buffers (memstore), the tablet's TSFiles (tsfile), and reads merged over
// them (docs/design.md: 'Data model', 'Write path', 'TSFiles and
// compaction', 'Read path and read cache').
//
// # Write path
//
// The server validates and stamps a mutation with AssignTimestamps: it gets
// the tablet's next write sequence (Seq) and every ServerTime op a server
// timestamp in µs, both strictly increasing per tablet. A table of
// millisecond granularity (Schema.Granularity Millis) has server
// timestamps truncated to whole milliseconds, not decreasing rather than
// strictly increasing (writes within one millisecond share it, and the
// higher sequence wins), and its client timestamps that are not a multiple
// of 1000 µs are refused there, before the log; replay applies logged
// timestamps as they are. The server appends
// it to the WAL, then calls Apply. Apply links all ops of the mutation in
// the active buffer as one batch, so no reader sees half a row mutation.
// Because the WAL holds the sequence and concrete timestamps, and an entry
// of the same key and sequence applied again changes nothing, replay
// (Replay) is idempotent; it skips records the TSFiles already hold (FlushedSeq, see
// Compactions). Apply does not check families against the schema (a logged
// record of a family deleted since still replays; its cells stay hidden),
// and BeginInternalWrite accepts an absent family: the server masks a
// deleted family's cells with delete-family tombstones on the rows
// FamilyRowKeys lists. After SetSchema, WaitWrites waits for every write
// validated against the old schema.
//
// SampleRowKeys estimates sizes of row ranges from the TSFiles' page
// indexes (tsfile.Reader.Pages) and the write buffers, reading no data.
//
// # Write sequence and delete semantics
//
// Deletes follow Cloud Bigtable, not HBase: a delete of a column (of its
// versions in a time range [start, end), end 0 unbounded; no range: every
// version), of a family or of a row removes the cells written BEFORE it in
// write order, whatever their timestamps, and never hides a write that
// comes after it, even one with an older timestamp. The order is the write
// sequence: every memstore entry and TSFile entry carries the Seq of its
// op (op i of a mutation has the mutation's Seq+i, so the ops of one
// mutation apply in order: a delete masks a set made earlier in the same
// mutation, as Bigtable documents), and a tombstone hides a cell iff cell.Seq < tombstone.Seq and
// the cell's timestamp is in the tombstone's range (family and row
// tombstones: every timestamp). Writing a cell of the same (row, family,
// qualifier, timestamp) again overwrites it: the higher Seq wins, whatever
// the source (buffer or file) holding it.
//
// The sequence is per tablet and strictly increasing for the tablet's whole
// life, across restarts and moves to other tservers (the tserver's WAL
// sequence is per server and is not comparable after a failover): Open
// continues above the largest Seq and timestamp of the TSFiles (kept in
// their footers), and replay (log, recovery files, child logs) observes the
// Seq and the timestamps of every record it applies (ObserveMutation), so
// sequences and server timestamps assigned afterwards are greater than
// every existing one even when this server's clock is behind.
//
// Order of concurrent writes: the sequence is assigned before the WAL
// append and Apply runs after it, so two concurrent writes may reach the
// buffer in the opposite order of their sequences. The write path assigns
// with BeginWrite, which keeps the sequence in flight until its Apply (or
// Abandon); reads see no buffer entry above the visible bound (the largest
// sequence below every write in flight), and Apply of a write in flight
// returns only once the bound reached it. So a reader sees a prefix of
// sequence order — never a put of sequence 6 with the cells that a delete
// of sequence 5, still being logged, will hide — and a write is visible
// when it is acknowledged. A write that finishes before a concurrent one
// of lower sequence waits for it (at most that write's WAL group commit).
// sequence.go has the details.
//
// # Aggregate families
//
// A family with FamilyPolicy.Aggregate (Sum, Min, Max over int64s) holds
// MergeCell operands, 8-byte big-endian int64s, written blind (no read
// under the row lock). validate refuses, for a client's write, a SetCell
// into an aggregate family, a MergeCell into a plain one, an operand of
// another length and one without a client timestamp (replay applies what
// was logged). The operands of one cell all stay (their Seq is part of
// their key, see memstore), and a read folds them: for each (row, family,
// qualifier, timestamp), the operands no tombstone hides — newest
// sequence first, down to the newest tombstone covering the cell — are
// folded with the aggregator into one cell whose value is the 8-byte
// big-endian result (foldOperands). Everything after step 1 below (the GC
// rule, where the merged cell is one version and max age applies to its
// timestamp; the selection; the RowFilter; Stats) sees merged cells
// only. A minor compaction folds the operands of each cell that no
// tombstone of its run separates into one operand of the newest one's
// sequence (foldIter), so every tombstone hides it exactly when it hid
// all of them; a major one folds the visible operands into one and drops
// the hidden ones, as it drops hidden cells. Flushes, splits and merges
// copy operands as they are. A folded operand replaces operands of other
// sequences, so applying one of those again would count it twice: folding,
// like purging tombstones, rests on no record reaching a buffer once a
// file holds it (replay skips records at or below FlushedSeq, and a
// record is in one buffer, so in one file: point 1 below). Applying a
// record again while its entries are only in the buffers changes nothing,
// as for any record.
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
// (of equal keys the highest write sequence wins, then the newest source),
// and resolves each row:
//
//  1. tombstones hide by write sequence: a DeleteRow or DeleteFamily hides
//     the cells of its scope with a lower Seq, a DeleteColumn those with a
//     lower Seq and a timestamp in [Timestamp, End) (End 0: unbounded);
//  2. the family's GC rule (FamilyPolicy.Rule, a GCRule: max versions, max
//     age, and unions and intersections of them nested to any depth; a
//     union calls a cell garbage if any sub-rule does, an intersection if
//     all do; max versions counts the newest live versions per column, max
//     age is relative to now). Without a Rule, the union of MaxVersions and
//     MaxAge. Cells of a family not in the schema (deleted) are never
//     returned;
//  3. the read's selection: families/columns, TimeRange, then the newest
//     MaxVersions of what is left, per column;
//  4. the read's RowFilter (ReadOptions.Filter, a compiled Cloud Bigtable
//     RowFilter, package filter) on the row's remaining cells, one row at
//     a time; compactions never apply it.
//
// Get consults each TSFile's bloom filter first. Scan returns rows of
// [start, end) in order, with a row limit; TSFile scans read pages ahead.
// ScanRanges reads several sorted, disjoint ranges from one snapshot, with
// one limit over all, forward or reversed. A reverse scan returns rows in
// descending key order, each row's cells in the usual order, and sees what
// a forward scan sees: it walks back one row at a time, asking every
// source for the greatest row below the last one read (the skiplist's
// predecessor search; a TSFile's page index and one decoded page; the
// merge takes the greatest, see memstore.RowFinder), then reads that row
// forwards through steps 1 to 4. It holds one row, never a range.
// Rows with no visible cell are not returned. A scan checks its context
// once per row examined (visible or not), so a cancelled scan over deleted
// or filtered-out rows stops at the next row.
//
// # Compactions
//
// A minor compaction keeps every entry but overwritten duplicates, and so
// every tombstone (older files may hold cells they hide); it folds the
// operands of aggregate cells (see Aggregate families). A major one also
// drops hidden cells: by sequence, by the GC rule (the same rowReader as a
// read, so nested unions and intersections decide alike; a GC rule calls a
// suffix of each column's live versions garbage, since it is monotone in
// rank and age, so dropping them changes no other cell's rank), and every
// cell of a family absent from the schema. When its run holds the tablet's
// oldest file it drops the tombstones as well (purges them), keeping only
// an entry of the run's highest sequence: that entry, or, when it is a
// cell the GC rule or a deleted family drops, a column tombstone of that
// sequence covering just the cell's timestamp (it hides only what the
// cell overwrote, and the cell does not come back when the rule is
// relaxed or the family created again). Why purging is safe:
//
//  1. Files are ordered by sequence row by row: every entry of a row in a
//     newer file has a higher sequence than every entry of that row in an
//     older one. A flush writes a buffer swapped while no write is in
//     flight (the write path assigns sequences and applies under the
//     checkpoint's shared state lock, the swap takes it exclusively), a
//     buffer is flushed and committed before the next swap, replay applies
//     only records above every file (3), a compaction replaces an adjacent
//     run by one file, a split child's file is its parent's snapshot
//     clipped to its range, and a merged tablet writes above every file of
//     both parents. Across rows the order need not hold: a merged tablet's
//     list is the merge's flushed files (the left parent's, then the
//     right's), then the left parent's files, then the right's, and each
//     parent had a sequence of its own, so a file of the right parent may
//     hold higher sequences than a file of the left listed before it. A
//     row, though, lived in one parent only.
//  2. Hence every logged record whose sequences are at or below F, the
//     largest MaxSeq of the tablet's files, is in the files (or was
//     dropped from them with what hid it). A split child's file is its
//     parent's snapshot clipped to its range; its child log holds only
//     later writes. A merged tablet replays no log of its parents: its
//     files hold their buffers as of the fence. A major compaction keeps
//     an entry of sequence F, so F never goes down, even when everything
//     else is dropped.
//  3. Replay (log positions, recovery files, child logs) skips a record
//     whose last sequence is at or below FlushedSeq, the F of the files
//     Open was given. Such records are read: a checkpoint names the log
//     file it rolled to, which holds only later writes, but one whose
//     roll failed commits its flushed file later with the old positions,
//     so until the next checkpoint commits a restart or a failover reads
//     again records that file holds.
//  4. A tombstone T of a run that holds the oldest file hides only cells
//     of its row of lower sequence. The run is a suffix of the list, so it
//     holds every file of T's row from T's file on; by 1 and 2 those cells
//     are in the run, not in a newer file or a buffer, and the compaction
//     drops them; by 3 no replay brings one back after a restart or on
//     another tserver. So T hides nothing any more and can go.
//
// Without the skip in 3, purging would still rest on a wider argument
// (a replayed record comes with every later record of the tablet, its
// tombstones included, because the named logs always cover a suffix of
// its sequences); 3 makes it local to the tablet's own files.
//
// Every TSFile the tablet writes (flush, compaction, and a split's
// children through Compression) compresses each family's pages with the
// codec of FamilyPolicy.Compression in the schema current when the write
// starts (tsfile.DefaultCompression, snappy, for a family that names none,
// for row tombstones and for families absent from the schema). Files keep
// the codec they were written with; a compaction rewrites them with the
// current one.
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
