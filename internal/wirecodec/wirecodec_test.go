package wirecodec

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
)

// message returns a batch response of n results with values of size
// bytes, each byte of value i set to fill+i.
func message(n, size int, fill byte) *pb.BatchCommandsResponse {
	m := &pb.BatchCommandsResponse{}
	for i := range n {
		m.Results = append(m.Results, &pb.BatchCommandsResponse_Result{
			Id:      uint64(i + 1),
			ReadRow: &pb.ReadRowResponse{Row: &pb.Row{Key: []byte{byte(i)}, Cells: []*pb.Cell{{Family: "f", Qualifier: []byte("q"), Value: bytes.Repeat([]byte{fill + byte(i)}, size)}}}},
		})
	}
	return m
}

// TestCodecMatchesProto marshals messages of every size class, large ones
// first so that smaller ones reuse dirty buffers, and checks the bytes are
// proto.Marshal's and that they decode back, from one buffer and from the
// bytes split into pieces as frames split them.
func TestCodecMatchesProto(t *testing.T) {
	cases := []struct {
		name    string
		n, size int
	}{
		{"4 MiB", 4, 1 << 20},
		{"100 KiB", 100, 1000},
		{"33 KiB", 33, 1000},
		{"5 KiB", 5, 1000},
		{"one small", 1, 10},
		{"empty", 0, 0},
	}
	var c Codec
	for round := range 3 { // again: the later rounds get pooled buffers
		for _, tc := range cases {
			m := message(tc.n, tc.size, byte(round))
			want, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Marshal(m)
			if err != nil {
				t.Fatalf("round %d, %s: marshal: %v", round, tc.name, err)
			}
			if b := got.Materialize(); !bytes.Equal(b, want) {
				t.Fatalf("round %d, %s: marshal gave %d bytes, not proto.Marshal's %d (or differ)", round, tc.name, len(b), len(want))
			}
			for _, pieces := range []int{1, 3} {
				var in mem.BufferSlice
				step := max(1, len(want)/pieces)
				for off := 0; off < len(want); off += step {
					in = append(in, mem.SliceBuffer(want[off:min(len(want), off+step)]))
				}
				back := &pb.BatchCommandsResponse{}
				if err := c.Unmarshal(in, back); err != nil {
					t.Fatalf("round %d, %s, %d pieces: unmarshal: %v", round, tc.name, pieces, err)
				}
				if !proto.Equal(back, m) {
					t.Fatalf("round %d, %s, %d pieces: unmarshal gave another message", round, tc.name, pieces)
				}
			}
			got.Free()
		}
	}
}

func TestCodecRefusesNonProto(t *testing.T) {
	var c Codec
	if _, err := c.Marshal("not a message"); err == nil {
		t.Fatal("Marshal of a string: no error")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{1})}, new(int)); err == nil {
		t.Fatal("Unmarshal into an int: no error")
	}
}

// TestPoolSizes checks that Get returns the length asked for and a
// buffer of its size class, and that Put keeps only the pool's buffers.
func TestPoolSizes(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, 4096, 4097, 1 << 22, 1<<22 + 1} {
		b := Pool.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		c, pooled := class(n)
		if pooled && cap(*b) != 1<<(c+minShift) {
			t.Fatalf("Get(%d): capacity %d, not its class's %d", n, cap(*b), 1<<(c+minShift))
		}
		if !pooled && cap(*b) != n {
			t.Fatalf("Get(%d) over the largest class: capacity %d", n, cap(*b))
		}
		Pool.Put(b)
	}
	odd := make([]byte, 300)
	Pool.Put(&odd) // not a class size: dropped, not handed out as 512
	for range 10 {
		if b := Pool.Get(400); cap(*b) == 300 {
			t.Fatal("Put of a 300-byte buffer: Get(400) returned it")
		}
	}
}

// TestEncoded checks that an Encoded message is sent as its buffers are,
// with no copy, and only once.
func TestEncoded(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 5000)
	e := &Encoded{Data: mem.BufferSlice{mem.SliceBuffer([]byte("head")), mem.SliceBuffer(body)}}
	var c Codec
	got, err := c.Marshal(e)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if len(got) != 2 || string(got[0].ReadOnlyData()) != "head" || &got[1].ReadOnlyData()[0] != &body[0] {
		t.Fatalf("Marshal gave %d buffers, not the two it was given", len(got))
	}
	if _, err := c.Marshal(e); err == nil {
		t.Fatal("a second Marshal of the same Encoded: no error")
	}
}
