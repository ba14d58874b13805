package tserver

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"bighive/internal/flatrows"
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
