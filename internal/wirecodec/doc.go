// Package wirecodec is the protobuf codec of every Bighive gRPC connection
// and server: gRPC's own proto codec, with buffers that are not zeroed.
//
// gRPC's default codec marshals each message into a buffer from its
// default pool, and its receive path copies a message split over frames
// into one buffer from the connection's pool; both pools clear the whole
// buffer (up to a power of two above the message's size) before handing
// it out. On Bighive's batch stream, where a message holds many results of
// 1 000-byte values, that clearing was 5 % of the client's and of the
// tserver's CPU under Gets.
//
// Invariants:
//   - Every buffer from Pool is written in full before it is read:
//     Marshal appends into it from length 0 and gRPC's frame reader and
//     MaterializeToBuffer copy into its whole length. That is what makes
//     skipping the clearing safe; a caller that does not write a buffer
//     whole must not take it from Pool.
//   - A received buffer that a message aliases (AliasField) is never
//     freed back to Pool: it lives as long as the message's bytes do, and
//     the garbage collector takes it. A message received in several
//     buffers (frames) is first copied into one from internal/rawalloc,
//     not from Pool; the frames go back to Pool.
//   - The codec is named "proto" and produces the same bytes as gRPC's:
//     peers (the official Cloud Bigtable clients among them) see no
//     difference.
package wirecodec
