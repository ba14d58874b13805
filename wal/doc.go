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
//     acknowledged.
//  2. Sequence numbers start at 1 and increase by one per record, across
//     files and restarts; within a file they are contiguous from the
//     header's FirstSeq. Records of later files have higher numbers.
//  3. Every header and record is checksummed (CRC-32C). Replay tells a torn
//     tail (what a crash leaves: the last flush cut off) from corruption
//     (anything else), and reports corruption as a *CorruptionError with
//     file and offset, never skipping it.
//  4. One record is one row mutation: replay hands over all of it or none.
//     Replaying twice hands over the same records (applying them is
//     idempotent because cell timestamps are in the record).
//  5. DeleteBefore removes only files wholly before the position it is
//     given, never the named file.
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
// record, written alone). The log starts a file only after every flush of
// the previous file is durable, so only the newest file of a prefix that
// has a header can end torn. So at the first frame of a file that is not a
// whole valid record (checksum or length wrong, cut off by the end of the
// file, or a zero header with data after it), it is a torn tail only if
//
//   - the file is the newest file of its prefix with a header, and
//   - every byte past the window to the end of the file is zero. The window
//     is maxFlush bytes from the frame, or the frame's claimed length if
//     larger. A claimed length may be the damage itself: it widens the
//     window only if no valid frame (good checksum, holding the sequence
//     number after the one in the 8 bytes before it, above the expected
//     one) lies inside it, since a lone large record holds no frame of
//     the log's making. A frame cut off by the end of the file is judged
//     the same way. (A cell value crafted to hold such a frame can make a
//     large record torn by a crash read as corruption: the log then
//     refuses to open rather than drop anything.)
//
// Replay stops there and reports it (FileReport.Torn); the owner
// truncates it at its next Open. Everything else is a *CorruptionError
// naming the file and the offset of the bad frame, and Replay, SplitLog
// and Open fail with it; Open never truncates it. Corruption too: a torn
// tail in a file that is not the newest (at its bad frame), a header
// whose FirstSeq is not the last sequence number of the previous file + 1
// (at offset 0 of the later file), a frame whose checksum matches but
// whose payload does not decode or whose sequence number is not the next
// one, and a header with a bad checksum (offset 0). A file whose header is
// all zero or cut short holds no record (FileReport.Unused) and is
// skipped. Open reads only the newest file (the one it continues); damage
// in older files stays in place for replay and log splitting to report.
//
// Single-file logs (split logs, CreateSingle) follow the same rule: their
// header's maxFlush (SplitLogMaxFlush) bounds the bytes written and not
// yet synced at any time, or one larger record alone.
//
// # Appends, contexts and failure
//
// An Append's context only bounds its wait to be queued (or, for a
// single-file log, to be written): ended before that, the record is never
// written. A record handed to the group commit is waited for whatever the
// context does, and Append returns its fate: nil (durable) or the log's
// failure. Any I/O error fails the log for good (ErrFailed, sticky): every
// later Append fails, Err returns the cause and Failed is closed, before
// the failing batch's appenders are released.
//
// AppendBatch (and SingleFile.AppendBatch) appends several records of one
// tablet with one call: they are queued together (one group commit unless
// they pass MaxBatchBytes or the file rolls; for a single-file log, one
// sync, or one per window it fills) and the caller waits once per batch.
// Each record has its own outcome, with Append's meaning; the context
// rule holds per record (those queued before it ended are waited for).
//
// # Replay
//
// Replay reads a position's file and every later file of the prefix, each
// once, and hands every record to the callback; the caller filters by
// tablet id. ReplayTablets recovers several tablets of one dead tserver
// with one read of each file.
package wal
