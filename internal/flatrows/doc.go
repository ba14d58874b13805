// Package flatrows is the flat encoding of scanned rows that
// ScanRowsResponse.chunk carries (the format is in proto/bighivepb's
// tserver.proto): the rows of one message contiguous in one buffer, so a
// message of many small rows costs the sender no message per row or cell
// and the receiver one allocation per message, not several per cell.
//
// Invariants:
//   - A Writer's buffer is a sequence of whole rows once EndRow has
//     returned; a row's cell count is patched in at EndRow.
//   - A Reader never panics on any input: a truncated or malformed
//     buffer, or counts and lengths beyond the buffer, make Err a
//     *CorruptError naming the byte offset, and iteration stops.
//   - The byte slices a Reader returns alias its buffer; it copies
//     nothing.
package flatrows
