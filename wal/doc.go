// Package wal is Bighive's write-ahead log: one log per tserver, shared by
// all its tablets (seed 002 'WriteLog'), group-committed (seed 003).
//
// # Files
//
//	<root>/wal/<prefix>/<timestamp>.log
//	<root>/wal/<prefix>/prepared-<n>.tmp     the next file, being prepared
//
// prefix is the tserver's host:port made file-name safe by FormatPrefix;
// timestamp is the file's creation time in µs, 20 zero-padded decimal
// digits (FormatFileName), so names sort in creation order. A log starts a
// new file at every Open and every Roll, and when a file is full
// (Options.FileSize). File timestamps are strictly increasing per prefix,
// across restarts and backward clock steps: a new timestamp is
// max(clock, newest existing + 1). A log position (Position) is
// (prefix, file timestamp); replaying from it reads that file and every
// later file of the prefix.
//
// # Invariants
//
//  1. Append returns only after its record is durable: written, and
//     fdatasync'ed together with every record of lower sequence number. A
//     new file's directory entry is fsync'ed before any record in it is
//     acknowledged (DESIGN.md invariant 1).
//  2. Sequence numbers start at 1 and increase by one per record, across
//     files and restarts; within a file they are contiguous from the
//     header's FirstSeq. Records of later files have higher numbers.
//  3. Every header and record is checksummed (CRC-32C). Replay tells a torn
//     tail (what a crash leaves: the last flush cut off) from corruption
//     (anything else), and reports corruption as a *CorruptionError with
//     file and offset, never skipping it (invariant 7).
//  4. One record is one row mutation: replay hands over all of it or none.
//     Replaying twice hands over the same records (invariant 4; applying
//     them is idempotent because cell timestamps are in the record).
//  5. DeleteBefore removes only files wholly before the position it is
//     given, never the named file (invariant 9).
//
// # Durability order
//
// One flusher goroutine writes batches in sequence order. For each batch:
// one pwritev of [header of a new file] + records at the end of the file,
// one fdatasync, and, for the first batch of a file, one fsync of the
// directory; then every appender of the batch is released. The next batch
// forms while that runs; there are no timers. Files are prepared in the
// background (written with zeros and synced, Options.Prealloc) and renamed
// to their final name when the flusher starts them, so a flush never
// allocates blocks. A finished file is truncated to its data in the
// background.
//
// # Format (version 1, little-endian; these layouts must not change
// without a new Version)
//
// File header, at offset 0:
//
//	+---------+---------+--------+----------+---------+----------+--------+--------+
//	| magic   | version | plen   | maxFlush | fileTS  | firstSeq | prefix | crc    |
//	| 8 bytes | u16 = 1 | u16    | u32      | i64 µs  | u64      | plen   | u32    |
//	+---------+---------+--------+----------+---------+----------+--------+--------+
//	magic = "BHIVEWAL"; crc = CRC-32C (Castagnoli) of all header bytes before it;
//	maxFlush bounds the bytes of one flush (MaxBatchBytes + header), for torn-tail detection.
//
// Records follow the header back to back (flushes are not padded: padding
// to 4 KiB measured slower here, README, "Write-ahead log"):
//
//	+----------+----------+---------------------------------------------------+
//	| length L | crc      | payload (L bytes)                                 |
//	| u32      | u32      |                                                   |
//	+----------+----------+---------------------------------------------------+
//	crc = CRC-32C of the 4 length bytes followed by the payload.
//
//	payload := timestamp:i64(µs) uvarint(len(tablet)) tablet mutation seq:u64
//
// The sequence number comes last so that appenders checksum everything
// else before they take the log's lock, and only its 8 bytes under it.
//
// mutation is the bighive/internal/mutation encoding of the RowMutation
// (row key, then each op: kind, family, qualifier, cell timestamp, delete
// range end, value).
//
// A frame header of 8 zero bytes ends the data: files are pre-zeroed, and
// the rest of the file is zero. L is at most MaxRecordBytes.
//
// # Torn tails and corruption
//
// A crash can damage only the last flush, which starts at or before the
// first bad frame and is at most maxFlush bytes long (or one larger
// record). So at the first frame that is not a whole valid record
// (checksum or length wrong, cut off by the end of the file, or a zero
// header with data after it): if every byte from maxFlush bytes after it
// (or the frame's claimed length, if larger) to the end of the file is
// zero, it is a torn tail. Replay stops reading the file there, reports
// it (FileReport.Torn) and goes on with the next file; the owner truncates
// it at its next Open. Otherwise it is a *CorruptionError. A frame whose
// checksum matches but whose payload does not decode, or whose sequence
// number is not the next one, is corruption too. A file whose header is all
// zero or cut short holds no record (FileReport.Unused); a header with a
// bad checksum is corruption at offset 0.
//
// # Replay
//
// Replay reads a position's file and every later file of the prefix, each
// once, and hands every record to the callback; the caller filters by
// tablet id. ReplayTablets recovers several tablets of one dead tserver
// with one read of each file.
package wal
