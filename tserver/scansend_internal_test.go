package tserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"bighive/internal/flatrows"
	"bighive/internal/limits"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet"
)

// capturedStream is a scan's server stream that keeps the wire bytes of
// what is sent: an Encoded message's buffers as they are, any other
// message marshalled.
type capturedStream struct {
	grpc.ServerStream
	wire [][]byte
}

func (s *capturedStream) Send(m *pb.ScanRowsResponse) error { return s.SendMsg(m) }

func (s *capturedStream) SendMsg(m any) error {
	switch m := m.(type) {
	case *pb.ScanRowsResponse:
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		s.wire = append(s.wire, b)
	case *wirecodec.Encoded:
		data, err := wirecodec.Codec{}.Marshal(m)
		if err != nil {
			return err
		}
		s.wire = append(s.wire, data.Materialize())
		data.Free()
	default:
		return fmt.Errorf("sent a %T", m)
	}
	return nil
}

// TestScanSenderEncodesFlat checks that a flat scan's messages, sent
// encoded, decode (proto.Unmarshal) to the rows sent, each message's
// continuation flag and stats, whatever the message size.
func TestScanSenderEncodesFlat(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 3000)
	for _, stats := range []bool{false, true} {
		t.Run(fmt.Sprintf("stats=%v", stats), func(t *testing.T) {
			st := &capturedStream{}
			o := newScanSender(st, true)
			if stats {
				o.stats = &tablet.ReadStats{}
			}
			const rows = 2000 // about 6 MB: several messages of each bound
			for i := 0; i < rows; i++ {
				cells := []tablet.Cell{{Family: "cf", Qualifier: []byte("q"), Timestamp: int64(i), Value: value}}
				if i == 777 {
					// A row larger than a message: cut between its cells.
					for j := 0; j < 600; j++ {
						cells = append(cells, tablet.Cell{Family: "cf", Qualifier: []byte(fmt.Sprintf("q%04d", j)), Value: value})
					}
				}
				if o.stats != nil {
					o.stats.Rows++
					o.stats.Cells += int64(len(cells))
				}
				if !o.row(tablet.Row{Key: []byte(fmt.Sprintf("row%05d", i)), Cells: cells}) {
					t.Fatalf("row %d: %v", i, o.err)
				}
			}
			if err := o.flush(false); err != nil {
				t.Fatal(err)
			}
			if len(st.wire) < 4 {
				t.Fatalf("%d messages, want several", len(st.wire))
			}
			var gotRows, gotCells, seenRows, seenCells int64
			cuts := 0
			lastKey := ""
			for i, w := range st.wire {
				var m pb.ScanRowsResponse
				if err := proto.Unmarshal(w, &m); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if m.LastRowContinues {
					cuts++
				}
				if stats != (m.Stats != nil) {
					t.Fatalf("message %d: stats %v, asked %v", i, m.Stats, stats)
				}
				seenRows += m.Stats.GetRowsSeen()
				seenCells += m.Stats.GetCellsSeen()
				rd := flatrows.NewReader(m.Chunk)
				for {
					key, n, ok := rd.NextRow()
					if !ok {
						break
					}
					if string(key) != lastKey {
						// A cut row's parts share their key.
						gotRows++
						lastKey = string(key)
					}
					for j := 0; j < n; j++ {
						c, ok := rd.NextCell()
						if !ok || !bytes.Equal(c.Value, value) {
							t.Fatalf("message %d: cell %d of row %q is not the value sent", i, j, key)
						}
						gotCells++
					}
				}
				if err := rd.Err(); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			if gotRows != rows || gotCells != rows+600 {
				t.Fatalf("decoded %d rows and %d cells, sent %d and %d", gotRows, gotCells, rows, rows+600)
			}
			if cuts == 0 {
				t.Fatal("the large row was not cut across messages")
			}
			if stats && (seenRows != rows || seenCells != rows+600) {
				t.Fatalf("stats say %d rows and %d cells, sent %d and %d", seenRows, seenCells, rows, rows+600)
			}
		})
	}
}

// floorScanServer streams n flat scan messages of one chunk each, sent
// encoded as scanSender sends them, and does nothing else.
type floorScanServer struct {
	pb.UnimplementedTServerServer
	chunk []byte
	n     int
}

func (s *floorScanServer) ScanRows(_ *pb.ScanRowsRequest, st grpc.ServerStreamingServer[pb.ScanRowsResponse]) error {
	head := protowire.AppendVarint(protowire.AppendTag(nil, chunkField, protowire.BytesType), uint64(len(s.chunk)))
	for i := 0; i < s.n; i++ {
		// The chunk's buffer is never freed (a SliceBuffer): sent again.
		msg := &wirecodec.Encoded{Data: mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(s.chunk)}}
		if err := st.SendMsg(msg); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkScanStreamFloor measures the gRPC stream alone, the ceiling
// of what a scan can deliver: a server sending 1 MiB flat messages as
// scanSender does and a client receiving them as the client library does
// (wirecodec, Bighive's dial and server options), over loopback in this
// process, neither doing anything else. It reports MB/s and the CPU of
// both ends together per 1 000 bytes (getrusage of the process):
//
//	go test ./tserver -run '^$' -bench ScanStreamFloor -benchtime 4000x -count 3
func BenchmarkScanStreamFloor(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(limits.GRPCServerOptions()...)
	chunk := bytes.Repeat([]byte("v"), 1<<20)
	fs := &floorScanServer{chunk: chunk, n: b.N}
	pb.RegisterTServerServer(srv, fs)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), limits.GRPCDialOptions(insecure.NewCredentials())...)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	wirecodec.Alias(&pb.ScanRowsResponse{}) // as the client library does
	b.SetBytes(int64(len(chunk)))
	cpu0 := processCPU(b)
	b.ResetTimer()
	st, err := pb.NewTServerClient(conn).ScanRows(context.Background(), &pb.ScanRowsRequest{})
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		total += len(m.Chunk)
	}
	b.StopTimer()
	if total != b.N*len(chunk) {
		b.Fatalf("received %d bytes, sent %d", total, b.N*len(chunk))
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/1e3/(float64(total)/1000), "cpu-µs/KB")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
