// Package proto holds Bighive's protocol buffer definitions and the Go code
// generated from them, committed:
//
//   - bighivepb (package bighive.v1): the public API, the master and tserver
//     gRPC services and their messages;
//   - storagepb (package bighive.storage.v1): on-disk records of the storage
//     packages (block store metadata, instance files) and the master's raft
//     commands. Field numbers there are part of on-disk formats and must not
//     change.
//
// bighivepb also has *_vtproto.pb.go: marshal, unmarshal and size methods
// generated per message, which internal/wirecodec uses on the wire.
//
// Regenerate with `go generate ./proto/...` (needs protoc from Debian's
// protobuf-compiler; the Go plugins are pinned in go.mod).
package proto

//go:generate bash gen.sh
