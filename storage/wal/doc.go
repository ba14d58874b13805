// Package wal is Bighive's write-ahead log: one log per tserver, shared by
// all its tablets (so a tserver with many tablets still makes one stream of
// appends), group-committed: concurrent appends share one write and one
// fdatasync (docs/design.md 'Write path').
//
// # Files
//
//	<root>/wal/<prefix>/<timestamp>.log
//	<root>/wal/<prefix>/prepared-<n>.tmp     the next file, being prepared
//	<root>/wal/<prefix>/recycle-<n>.tmp      a retired file kept for reuse
//
// prefix is the tserver's host:port made file-name safe by FormatPrefix;
// timestamp is the file's creation time in µs, 20 zero-padded decimal
// digits (FormatFileName), so names sort in creation order. A log starts a
// new file at every Open and every Roll, and when a file is full
// (Options.FileSize). File timestamps are strictly increasing per prefix,
// across restarts and backward clock steps: a new timestamp is
// max(clock, newest existing + 1). A log position (Position) is
// (prefix, file timestamp); replaying from it reads that file and every
// later file of the prefix. A file's timestamp is also its log number
// (version 2): unique per prefix over the tserver's whole life, since
// timestamps only grow. A recycled file gets a new name and a new number,
// larger than every number its earlier lives wrote: files are kept for
// reuse only within one run (Open removes them), and every timestamp a
// run hands out is larger than those of the files it found and made.
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
//     given, never the named file. A file it keeps for recycling leaves
//     the log (its name) exactly as a removed one does.
//  6. No record of a file's earlier life is ever replayed: every
//     version-2 frame carries its file's log number, in the checksum.
//
// # Durability order
//
// One flusher goroutine writes batches in sequence order. For each batch:
// one pwritev of [header of a new file] + records at the end of the file,
// one fdatasync, and, for the first batch of a file, one fsync of the
// directory; then every appender of the batch is released. The next batch
// forms while that runs. A lone appender waits for no timer; but when a
// batch released at least 4 appenders and the next holds fewer than half
// as many, the flusher waits up to about one write and sync (50 µs to 2
// ms) for them to come back, so that a straggler is not synced alone while
// they do. Files are prepared in the
// background and renamed to their final name when the flusher starts
// them, so a flush never allocates blocks (except in a file the preparer
// had no time for, or a recycled one smaller than FileSize: those grow).
// A finished file is truncated to its data in the background, unless
// recycling is on (see below).
//
// # Recycling
//
// Like RocksDB's recycle_log_file_num: up to Options.RecycleFiles
// (default 4; negative: no recycling) files that DeleteBefore retires are renamed to
// recycle-<n>.tmp instead of being removed, and the directory synced.
// The preparer then makes the next file from one of them rather than
// zero-filling a new one: it zeroes the first 4 KiB (the old header, so
// that a crash before the new header is durable leaves a file that reads
// as unused) and syncs it. With recycling on, finished files keep their
// prepared size (they are not truncated to their data), so a file rolled
// long before it was full is reused without zeroing; a kept file smaller
// than FileSize (one created unprepared) grows as it is written. The flusher
// renames it to the next file's name and writes a header with the
// recycled flag; the records then overwrite the old ones in place, and
// the old frames stay after the live data. When no kept file is there,
// the next file is a new one prepared as Options.Prealloc says (written
// with zeros and synced by default). Kept files do not survive a
// restart: Open removes them with prepared files.
//
// # Format (version 2, little-endian; these layouts must not change
// without a new Version)
//
// File header, at offset 0:
//
//	+---------+---------+--------+----------+---------+----------+---------+--------+--------+
//	| magic   | version | plen   | maxFlush | fileTS  | firstSeq | flags   | prefix | crc    |
//	| 8 bytes | u16 = 2 | u16    | u32      | i64 µs  | u64      | u32     | plen   | u32    |
//	+---------+---------+--------+----------+---------+----------+---------+--------+--------+
//	magic = "BHIVEWAL"; crc = CRC-32C (Castagnoli) of all header bytes before it;
//	maxFlush bounds the bytes of one flush (MaxBatchBytes + header), for torn-tail detection;
//	flags: bit 0 = recycled (the bytes after the data are an earlier life's frames); other bits 0.
//
// Records follow the header back to back (flushes are not padded: padding
// to 4 KiB measured slower here, docs/performance.md, "Write-ahead log"):
//
//	+----------+----------+------------+------------------------------------+
//	| length L | crc      | log number | payload (L bytes)                  |
//	| u32      | u32      | u64        |                                    |
//	+----------+----------+------------+------------------------------------+
//	log number = the file's fileTS;
//	crc = CRC-32C of the 4 length bytes, the payload, then the 8 log-number bytes,
//	      XOR 0xa282ead8 (so that no version-1 frame checks as version 2).
//
//	payload := timestamp:i64(µs) uvarint(len(tablet)) tablet mutation seq:u64
//
// The sequence number comes last in the payload and the log number last
// in the checksum, so that appenders checksum everything else before
// they take the log's lock, and only those 16 bytes under it.
//
// mutation is the bighive/storage/mutation encoding of the RowMutation
// (row key, then each op: kind, family, qualifier, cell timestamp, delete
// range end, value); its first byte is that encoding's version, 2 for a
// mutation holding an aggregate operand (MergeCell) and 1 otherwise.
//
// A frame header of 16 zero bytes ends the data of a new file: new files
// are pre-zeroed (or grow), and the rest of the file is zero. L is at most
// MaxRecordBytes.
//
// Version 1, still read (files of older logs; child logs made before;
// recovery files keep its frames): the header has no flags field (32 bytes
// before the prefix instead of 36), and a frame is length u32 | crc u32 |
// payload, crc = CRC-32C of the length bytes and the payload, unmasked. A
// frame header of 8 zero bytes ends the data. Version-1 files are never
// written, and are judged by the rules for new files below.
//
// # Torn tails and corruption
//
// A crash can damage only the last flush, which starts at or before the
// first bad frame and is at most maxFlush bytes long (or one larger
// record, written alone). The log starts a file only after every flush of
// the previous file is durable, so only the newest file of a prefix that
// has a header can end torn. Replay reads whole records of the file's log
// number; the first frame that is not one decides, by the file's kind.
//
// A new file (not recycled; every version-1 file): the frame is a zero
// header and everything after it is zero: the data ends there. Otherwise
// (checksum or length wrong, a frame of another log number, cut off by
// the end of the file, or a zero header with data after it), it is a
// torn tail only if
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
// A recycled file: past its data lie the frames of earlier lives, so the
// bytes there are not zero, and a clean end usually falls inside an old
// frame. What tells them apart is the log number: no earlier life wrote
// this file's number, so a "live frame" (good checksum, this file's log
// number) can only be this life's. Dead bytes are bytes where no live
// frame starts (found by searching for the number's 8 bytes, checksumming
// only there; after checksumming a few times the file's size the search
// gives up and counts a live frame, so crafted values make the log refuse
// to open rather than drop anything). At the first frame that is not a
// whole live record:
//
//   - End: its log-number field is not this file's (a stale frame with a
//     good checksum, the inside of one, or zeros) and everything after it
//     is dead. The data ends there, cleanly: the stale frame is the
//     previous life's, like the zero header of a new file.
//   - Torn tail: otherwise (its log number is this file's but the checksum
//     or length is wrong, or it is cut off; or live frames follow it
//     within the window), if everything from the window on is dead, with
//     the window as above (maxFlush, or a claimed length that holds no
//     live frame). Those live frames inside the window are what is left
//     of the unacknowledged last flush.
//   - Corruption: a live frame starts past the window. A checksum failure
//     in the middle of a live frame is corruption unless it lies within
//     the last flush's window of the end of the live data.
//
// In both kinds, replay stops at a torn tail and reports it
// (FileReport.Torn; TornBytes counts to the last non-zero byte, within the
// window for a recycled file); the owner truncates it at its next Open,
// which also cuts a recycled newest file's stale frames off. A file whose
// header is zero but which holds other bytes (a recycled file whose first
// flush a crash cut off) is emptied by the owner's next Open. Everything
// else is a *CorruptionError naming the file and the offset of the bad
// frame, and Replay, SplitLog and Open fail with it; Open never truncates
// it. Corruption too: a torn tail in a file that is not the newest (at its
// bad frame), a header whose FirstSeq is not the last sequence number of
// the previous file + 1 (at offset 0 of the later file), a frame whose
// checksum matches but whose payload does not decode or whose sequence
// number is not the next one, and a header with a bad checksum or unknown
// version or flags (offset 0). A file whose header is all zero or cut
// short holds no record (FileReport.Unused) and is skipped. Open reads
// only the newest file (the one it continues); damage in older files
// stays in place for replay and log splitting to report.
//
// Single-file logs (child logs, CreateSingle) are new files of the same
// format: their header's maxFlush (ChildLogMaxFlush) bounds the bytes
// written and not yet synced at any time, or one larger record alone.
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
