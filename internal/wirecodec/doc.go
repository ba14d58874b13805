// Package wirecodec is the protobuf codec of every Bighive gRPC connection
// and server: gRPC's own proto codec, with buffers that are not zeroed, and
// Bighive's own messages (bighivepb) marshalled, unmarshalled and sized by
// the methods generated beside them (*_vtproto.pb.go) instead of by
// protobuf's reflection-driven code, which was a tenth of the tserver's
// CPU under Puts and more of the client's.
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
//     Marshal appends into it from length 0 (or, through the generated
//     methods, fills exactly the message's size from its end; a short
//     fill is an error, and the buffer goes back) and gRPC's frame reader and
//     MaterializeToBuffer copy into its whole length. That is what makes
//     skipping the clearing safe; a caller that does not write a buffer
//     whole must not take it from Pool.
//   - A received buffer that a message aliases (Alias) is never
//     freed back to Pool: it lives as long as the message's bytes do, and
//     the garbage collector takes it. A message received in several
//     buffers (frames) is first copied into one from internal/rawalloc,
//     not from Pool; the frames go back to Pool.
//   - The codec is named "proto" and produces the same bytes as gRPC's:
//     peers (the official Cloud Bigtable clients among them) see no
//     difference. Messages without generated methods (the Cloud Bigtable
//     API's, the health service's) take protobuf's own code.
//   - The generated code agrees with protobuf's on every bighivepb message
//     (TestGeneratedMatchesProto), with one difference: it does not check
//     that string fields are UTF-8. Every string of bighivepb names
//     something the receiver looks up among names it validated (a tablet,
//     a table, a family), so a malformed one is refused as unknown.
package wirecodec
