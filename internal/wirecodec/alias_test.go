package wirecodec

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "bighive/proto/bighivepb"
)

// TestAliasField checks that a message whose bytes field is aliased
// decodes as proto.Unmarshal decodes it, wherever the field is and
// however often it occurs, and that the field's bytes are the received
// buffer's, not a copy.
func TestAliasField(t *testing.T) {
	AliasField(&pb.ScanRowsResponse{}, "chunk")
	chunk := bytes.Repeat([]byte("row"), 5000)
	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rows := enc(&pb.ScanRowsResponse{Rows: []*pb.Row{{Key: []byte("k")}}, LastRowContinues: true})
	onlyChunk := enc(&pb.ScanRowsResponse{Chunk: chunk})
	tests := []struct {
		name string
		wire []byte
	}{
		{"chunk only", onlyChunk},
		{"chunk and other fields", enc(&pb.ScanRowsResponse{Chunk: chunk, LastRowContinues: true})},
		{"chunk first", append(append([]byte(nil), onlyChunk...), rows...)},
		{"chunk last", append(append([]byte(nil), rows...), onlyChunk...)},
		{"chunk in the middle", append(append(append([]byte(nil), rows[:len(rows)-2]...), onlyChunk...), rows[len(rows)-2:]...)}, // before last_row_continues (2 bytes)
		{"chunk twice: the last wins", append(enc(&pb.ScanRowsResponse{Chunk: []byte("old")}), onlyChunk...)},
		{"no chunk", rows},
		{"empty", nil},
	}
	var c Codec
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := &pb.ScanRowsResponse{}
			if err := proto.Unmarshal(tc.wire, want); err != nil {
				t.Fatalf("proto.Unmarshal: %v", err)
			}
			got := &pb.ScanRowsResponse{}
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.wire)}, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("Unmarshal gave %v, proto.Unmarshal %v", got, want)
			}
			if len(got.Chunk) > 0 {
				start := uintptr(unsafe.Pointer(unsafe.SliceData(tc.wire)))
				at := uintptr(unsafe.Pointer(unsafe.SliceData(got.Chunk)))
				if at < start || at >= start+uintptr(len(tc.wire)) {
					t.Fatal("the chunk was copied, not left in the received buffer")
				}
			}
			// Received in frames (three buffers, as gRPC hands a message
			// split over HTTP/2 frames): copied together once, the same
			// message, and the chunk no longer shares the frames'
			// memory, which gRPC reuses.
			frames := mem.BufferSlice{mem.SliceBuffer(tc.wire[:len(tc.wire)/3]), mem.SliceBuffer(tc.wire[len(tc.wire)/3 : 2*len(tc.wire)/3]), mem.SliceBuffer(tc.wire[2*len(tc.wire)/3:])}
			split := &pb.ScanRowsResponse{}
			if err := c.Unmarshal(frames, split); err != nil {
				t.Fatalf("Unmarshal of frames: %v", err)
			}
			if !proto.Equal(split, want) {
				t.Fatalf("Unmarshal of frames gave %v, proto.Unmarshal %v", split, want)
			}
			if len(split.Chunk) > 0 {
				start := uintptr(unsafe.Pointer(unsafe.SliceData(tc.wire)))
				at := uintptr(unsafe.Pointer(unsafe.SliceData(split.Chunk)))
				if at >= start && at < start+uintptr(len(tc.wire)) {
					t.Fatal("the chunk of a message in frames aliases a frame")
				}
			}
		})
	}
}

// TestAliasFieldMalformed checks that bad input is an error naming the
// offset, never a panic.
func TestAliasFieldMalformed(t *testing.T) {
	AliasField(&pb.ScanRowsResponse{}, "chunk")
	good := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("chunk"))
	for name, wire := range map[string][]byte{
		"truncated value": good[:len(good)-2],
		"bad tag":         {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"bad wire type":   {0x1f},
	} {
		var c Codec
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &pb.ScanRowsResponse{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAliasFieldRefusesOtherFields(t *testing.T) {
	for _, field := range []string{"last_row_continues", "rows", "nonexistent"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AliasField(%q): no panic", field)
				}
			}()
			AliasField(&pb.ScanRowsResponse{}, protoreflect.Name(field))
		}()
	}
}
