// Package bighivepb is the Go code generated from Bighive's public API
// (protobuf package bighive.v1): the Master and TServer gRPC services and
// their messages. The .proto files beside it are the source; never edit the
// .pb.go files by hand — run `go generate ./proto/...`.
//
// Wire compatibility: field numbers and enum values must not change; add
// fields, never renumber or reuse them.
package bighivepb
