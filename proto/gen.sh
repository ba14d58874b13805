#!/usr/bin/env bash
# Regenerates every *.pb.go under proto/ from the .proto files beside them.
# protoc comes from Debian's protobuf-compiler; the Go plugins are the
# versions pinned by go.mod's tool directives, built here from the module
# cache, so the output is byte for byte the committed code.
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc
go build -o "$bin/protoc-gen-go-vtproto" github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto
mapfile -t protos < <(find . -name '*.proto' -printf '%P\n' | LC_ALL=C sort)
protoc -I . \
	--plugin=protoc-gen-go="$bin/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"${protos[@]}"
# The wire messages (bighivepb) also get hand-rolled marshal, unmarshal and
# size methods (*_vtproto.pb.go), which internal/wirecodec uses in place of
# protobuf's reflection-driven code on every RPC.
mapfile -t wire < <(printf '%s\n' "${protos[@]}" | grep '^bighivepb/')
protoc -I . \
	--plugin=protoc-gen-go-vtproto="$bin/protoc-gen-go-vtproto" \
	--go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+unmarshal_unsafe+size \
	"${wire[@]}"
