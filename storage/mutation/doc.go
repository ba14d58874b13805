// Package mutation holds Bighive's data-model types shared by the write path:
// the operations of one row mutation, as the WAL logs them and the engine
// applies them, and their compact binary encoding.
//
// A RowMutation is atomic: the WAL logs it as one record and the engine
// applies all of its ops or none (docs/design.md 'Data model').
//
// Encoding (little-endian, uvarint = unsigned LEB128; it must not change
// without a new format version in the files that embed it):
//
//	row      := version:u8 uvarint(seq) uvarint(len(key)) key uvarint(nops) op*
//	op       := kind:u8 uvarint(len(family)) family uvarint(len(qual)) qual
//	            ts:varint end:varint uvarint(len(value)) value
//
// version is EncodingVersion (1), or MergeVersion (2) for a mutation with a
// MergeCell op (kind 5, an aggregate family's operand: an 8-byte
// big-endian int64 value), the only difference; seq is RowMutation.Seq, the tablet's
// write sequence of the first op (op i has seq+i). Decode rejects any other version with ErrVersion, naming
// the version it found. It checks every length against the remaining
// bytes and never panics on garbage; it returns ErrMalformed.
package mutation
