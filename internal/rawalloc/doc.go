// Package rawalloc allocates byte slices whose contents are not cleared
// first.
//
// make([]byte, n) clears every byte, and for a buffer of a megabyte that is
// about to be overwritten whole (a received message copied together, a
// read of pages from a file) the clearing costs as much as the copy that
// follows: it was a third of a scanning client's CPU. Bytes returns memory
// from the same allocator, garbage-collected like any slice, without it.
//
// Invariants:
//   - The contents of a slice from Bytes are unspecified: the caller
//     writes every byte it will read (or hand on) before reading it. Old
//     bytes of another allocation must never reach a caller, a file or the
//     wire.
//   - The slice is the caller's alone, like one from make: nothing else
//     refers to its memory, and it is garbage like any other slice once
//     unreferenced.
package rawalloc
