// Package memstore is a tablet's sorted write buffer, and the entry type and
// iterators the tablet engine merges buffers and TSFiles with.
//
// # Entries and their order
//
// An Entry is a cell (SetCell) or a tombstone (DeleteColumn, DeleteFamily,
// DeleteRow). Entries sort by
//
//	row ↑, family ↑, level ↑, qualifier ↑, rank ↑, timestamp ↓, end ↑
//
// where a row tombstone has family "" (real family names are never empty),
// level is 0 for row tombstones, 1 for family tombstones and 2 for columns,
// and inside a column the column tombstones (rank 0) come before the cells
// (rank 1). So a reader walking one row meets every tombstone before the
// cells it may hide, and the cells of a column newest first. Two cells with
// the same (row, family, qualifier, timestamp) compare equal: the newer write
// overwrites the older one, which is what makes log replay idempotent.
//
// Tombstones hide by timestamp, not by write order: a DeleteColumn hides the
// column's cells with a timestamp in [Timestamp, End) (End 0: unbounded); a
// family or row tombstone hides the family's or row's cells with a timestamp
// at or before its own. Merging sources therefore only needs "newest source
// wins" for equal keys.
//
// # Concurrency and atomicity
//
// A Memstore is a skiplist with one writer at a time (Apply serialises
// writers) and any number of lock-free readers. Apply links every entry of a
// batch with the batch's sequence number and publishes that number only
// after the whole batch is linked; an iterator captures the published
// number when it is created and skips later entries. So a row mutation
// applied as one batch is seen whole or not at all, and an iterator is a
// stable snapshot even while writes continue.
//
// # Memory accounting
//
// MemoryUsage is the sum over every linked entry (overwritten ones included:
// they still occupy memory until the buffer is dropped) of
// len(row)+len(family)+len(qualifier)+len(value) plus EntryOverhead plus 8
// bytes per skiplist tower level. It ignores only the allocator's rounding.
package memstore
