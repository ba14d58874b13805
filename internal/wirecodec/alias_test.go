package wirecodec

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "bighive/proto/bighivepb"
)

// within reports whether p points into b.
func within(p unsafe.Pointer, b []byte) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return uintptr(p) >= start && uintptr(p) < start+uintptr(len(b))
}

// TestAlias checks that a message of an aliased type decodes as
// proto.Unmarshal decodes it, and that its bytes and strings are the
// received buffer's, not copies; received in frames, they are copied
// together once and share no frame's memory (gRPC reuses frames).
func TestAlias(t *testing.T) {
	Alias(&pb.ScanRowsResponse{})
	Alias(&pb.BatchCommandsRequest{})
	chunk := bytes.Repeat([]byte("row"), 5000)
	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := &pb.BatchCommandsRequest{Commands: []*pb.BatchCommandsRequest_Command{{Id: 7, Command: &pb.BatchCommandsRequest_Command_MutateRow{MutateRow: &pb.MutateRowRequest{
		TabletId: "tablet-1", Row: &pb.RowMutation{RowKey: []byte("row"), Mutations: []*pb.Mutation{{Mutation: &pb.Mutation_SetCell_{SetCell: &pb.Mutation_SetCell{Family: "cf", Qualifier: []byte("q"), Value: bytes.Repeat([]byte("v"), 1000)}}}}},
	}}}}}
	tests := []struct {
		name    string
		wire    []byte
		fresh   func() proto.Message
		aliased func(proto.Message) []unsafe.Pointer // the fields that must alias the buffer
	}{
		{"chunk", enc(&pb.ScanRowsResponse{Chunk: chunk, LastRowContinues: true}), func() proto.Message { return &pb.ScanRowsResponse{} },
			func(m proto.Message) []unsafe.Pointer {
				return []unsafe.Pointer{unsafe.Pointer(unsafe.SliceData(m.(*pb.ScanRowsResponse).Chunk))}
			}},
		{"chunk twice: the last wins", append(enc(&pb.ScanRowsResponse{Chunk: []byte("old")}), enc(&pb.ScanRowsResponse{Chunk: chunk})...), func() proto.Message { return &pb.ScanRowsResponse{} },
			func(m proto.Message) []unsafe.Pointer {
				return []unsafe.Pointer{unsafe.Pointer(unsafe.SliceData(m.(*pb.ScanRowsResponse).Chunk))}
			}},
		{"a Put", enc(put), func() proto.Message { return &pb.BatchCommandsRequest{} },
			func(m proto.Message) []unsafe.Pointer {
				mr := m.(*pb.BatchCommandsRequest).Commands[0].GetMutateRow()
				sc := mr.Row.Mutations[0].GetSetCell()
				return []unsafe.Pointer{unsafe.Pointer(unsafe.StringData(mr.TabletId)), unsafe.Pointer(unsafe.SliceData(mr.Row.RowKey)),
					unsafe.Pointer(unsafe.StringData(sc.Family)), unsafe.Pointer(unsafe.SliceData(sc.Value))}
			}},
		{"empty", nil, func() proto.Message { return &pb.ScanRowsResponse{} }, nil},
	}
	var c Codec
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.fresh()
			if err := proto.Unmarshal(tc.wire, want); err != nil {
				t.Fatalf("proto.Unmarshal: %v", err)
			}
			got := tc.fresh()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.wire)}, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("Unmarshal gave %v, proto.Unmarshal %v", got, want)
			}
			if tc.aliased != nil {
				for i, p := range tc.aliased(got) {
					if !within(p, tc.wire) {
						t.Fatalf("field %d was copied, not left in the received buffer", i)
					}
				}
			}
			frames := mem.BufferSlice{mem.SliceBuffer(tc.wire[:len(tc.wire)/3]), mem.SliceBuffer(tc.wire[len(tc.wire)/3 : 2*len(tc.wire)/3]), mem.SliceBuffer(tc.wire[2*len(tc.wire)/3:])}
			split := tc.fresh()
			if err := c.Unmarshal(frames, split); err != nil {
				t.Fatalf("Unmarshal of frames: %v", err)
			}
			if !proto.Equal(split, want) {
				t.Fatalf("Unmarshal of frames gave %v, proto.Unmarshal %v", split, want)
			}
			if tc.aliased != nil {
				for i, p := range tc.aliased(split) {
					if within(p, tc.wire) {
						t.Fatalf("field %d of a message in frames aliases a frame", i)
					}
				}
			}
		})
	}
}

// TestAliasMalformed checks that bad input is an error, never a panic.
func TestAliasMalformed(t *testing.T) {
	Alias(&pb.ScanRowsResponse{})
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

func TestAliasRefusesTypesWithoutGeneratedCode(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Alias of a message without generated methods: no panic")
		}
	}()
	Alias(&wrapperspb.BytesValue{})
}
