// Package localmeta is the local tablet metadata of a single-node tserver:
// the checkpoint.Metadata and checkpoint.References seams over one bbolt
// database. The master-backed implementation lives in tserver/; this one
// serves single-node use and tests.
//
// # Invariants
//
//   - Commit applies a batch of updates in one bbolt transaction: every
//     tablet of it changes or none does. It is durable when it returns nil
//     (bbolt fsyncs its file at commit).
//   - Commit, AddLogPosition are epoch-fenced: an update carrying another
//     epoch than the stored one changes nothing (checkpoint.ErrStaleEpoch,
//     reported per tablet in a *checkpoint.RefusedError).
//   - The coordinator calls Commit only after the TSFiles it names were
//     committed in the block store (invariant 3 in docs/design.md,
//     'metadata names only committed TSFiles'); log GC and
//     orphan collection ask LogPositions and ReferencedBlocks, so a log
//     file or block a record names is never deleted (invariant 9 there,
//     'nothing named is deleted').
//
// # File and schema, format version 2
//
//	<path>   one bbolt database (bbolt does its own file I/O: it is not
//	         behind vfs.FS)
//
//	meta     "version"   → uint64 BE (2; Open refuses another)
//	tablets  <tablet id> → record
//
//	record := crc32c(body):u32 LE  body
//	body   := protobuf bighive.storage.v1.CheckpointTablet
//	          (proto/storagepb/checkpoint.proto: tablet id, epoch, log
//	          positions (prefix, file ts), TSFiles (store UUID, footer,
//	          every block, size, entries, rows, row and timestamp bounds)
//	          newest first,
//	          data-dir group, opaque user data)
//
// A TSFile's block ids are ids inside the block store its record names:
// ids of two stores may be equal. Version 2 added the store UUID; a
// version 1 database is refused.
//
// bbolt checksums only its meta pages, so every record carries its own
// CRC-32C (invariant 7 in docs/design.md, 'every on-disk record is
// checksummed'); a record that fails it, does not parse
// or names another tablet than its key is a *CorruptionError naming the
// file and the key.
package localmeta
