// Package memstore is a tablet's sorted write buffer, and the entry type and
// iterators the tablet engine merges buffers and TSFiles with.
//
// # Entries and their order
//
// An Entry is a cell (SetCell), an operand of an aggregate cell
// (MergeCell) or a tombstone (DeleteColumn, DeleteFamily, DeleteRow), and
// carries the write sequence (Seq) of the row mutation it came from.
// Entries sort by
//
//	row ↑, family ↑, level ↑, qualifier ↑, rank ↑, timestamp ↓, end ↑,
//	operand ↑, seq ↓
//
// where a row tombstone has family "" (real family names are never empty),
// level is 0 for row tombstones, 1 for family tombstones and 2 for columns,
// and inside a column the column tombstones (rank 0) come before the cells
// (rank 1). So a reader walking one row meets every tombstone before the
// cells it may hide, and the cells of a column newest first. Everything but
// seq is the entry's key (CompareKey): two cells of the same (row, family,
// qualifier, timestamp) have the same key whatever their values, and only
// the one with the highest seq counts (the later write overwrites). Iterators
// return one entry per key, that one; seeks ignore seq. Replaying a record
// again yields entries of the same key and seq, so replay is idempotent.
// Operands are the exception: operand is 1 for a MergeCell (0 for every
// other kind) and an operand's seq is part of its key, so the operands of
// one cell are all returned, newest first, each once; the engine folds
// them (package tablet), and a seek to an operand's key considers its seq.
//
// Tombstones hide by write order, not by timestamp (Bigtable's semantics): a
// tombstone hides a cell iff the cell's seq is lower than the tombstone's
// and the cell's timestamp is in the tombstone's range — [Timestamp, End)
// for a DeleteColumn (End 0: unbounded), every timestamp for a DeleteFamily
// or DeleteRow. A write after a delete is never hidden by it, whatever its
// timestamp. The engine (package tablet) applies this rule; this package
// only keeps the entries and their order.
//
// # Concurrency and atomicity
//
// A Memstore is a skiplist with one writer at a time (Apply serialises
// writers) and any number of lock-free readers. Apply links every entry of a
// batch with the batch's number (an internal counter of this buffer, not the
// write seq) and publishes that number only after the whole batch is
// linked; an iterator captures the published number when it is created and
// skips later entries. So a row mutation
// applied as one batch is seen whole or not at all, and an iterator is a
// stable snapshot even while writes continue.
//
// # Walking backwards
//
// The skiplist has no back pointers. A reverse scan walks rows backwards
// through RowFinder: LastRowBefore(bound) is a predecessor search from the
// head (the last node whose row is below bound, O(log n)), skipping rows
// the iterator cannot see; a Merge answers the greatest of its sources'
// answers. The caller then reads the row forwards with SeekGE.
//
// # Memory accounting
//
// MemoryUsage is the sum over every linked entry (overwritten ones included:
// they still occupy memory until the buffer is dropped) of
// len(row)+len(family)+len(qualifier)+len(value) plus EntryOverhead plus 8
// bytes per skiplist tower slot (a node of height h has the fewest of 1,
// 2, 4, 8 or 20 slots that hold h, right after it in memory). It ignores
// the allocator's rounding and the unused rest of the buffer's newest node
// slabs (nodes are handed out from arrays of 256 of each tower size).
package memstore
