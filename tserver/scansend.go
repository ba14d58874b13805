package tserver

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"bighive/internal/flatrows"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet"
)

const (
	// scanChunkBytes bounds one streamed message of a scan (up to one
	// cell more); scanChunkRows bounds its rows.
	scanChunkBytes = 1 << 20
	scanChunkRows  = 8192
	// scanFirstChunkBytes bounds a flat scan's first message: the client
	// decodes it while the next one is filled. Each next bound is twice
	// the last, up to scanChunkBytes.
	scanFirstChunkBytes = 64 << 10
)

// scanSender cuts a scan's rows into messages: repeated Row messages, or
// with flat one chunk of the flat encoding per message. A flat message is
// sent encoded (wirecodec.Encoded): its other fields and the chunk's tag
// and length in a small buffer, then the chunk's own buffer, which the
// Writer filled and gRPC frees back to wirecodec.Pool once written, so
// the chunk is not copied into a marshalled message.
type scanSender struct {
	stream pb.TServer_ScanRowsServer
	flat   bool
	err    error // the first Send failure

	rows  []*pb.Row
	w     flatrows.Writer
	wbuf  *[]byte // the Pool buffer w appends to, if any
	size  int     // bytes of the message so far
	n     int     // rows in the message so far (a cut row counts in each)
	limit int     // the byte bound of this message

	// stats, when the request asked for them, counts what the scan
	// examined; sent is what the messages so far reported (each message
	// carries the difference).
	stats *tablet.ReadStats
	sent  tablet.ReadStats
}

func newScanSender(stream pb.TServer_ScanRowsServer, flat bool) *scanSender {
	o := &scanSender{stream: stream, flat: flat, limit: scanChunkBytes}
	if flat {
		o.limit = scanFirstChunkBytes
	}
	return o
}

// row adds one row, sending the message when it is full: false once a
// Send failed. A row is cut between cells where the message would pass
// its byte bound, so no message exceeds it by more than one cell (a value
// is at most 100 MiB: such a message still fits limits.MaxRequestBytes),
// however large the row.
func (o *scanSender) row(row tablet.Row) bool {
	o.startRow(row.Key)
	cells := 0
	for _, c := range row.Cells {
		n := cellSize(c)
		if o.size+n > o.limit && cells > 0 {
			o.endRow()
			if o.flush(true) != nil {
				return false
			}
			o.startRow(row.Key)
			cells = 0
		}
		o.addCell(c)
		o.size += n
		cells++
	}
	o.endRow()
	if o.size >= o.limit || o.n >= scanChunkRows {
		return o.flush(false) == nil
	}
	return true
}

func (o *scanSender) startRow(key []byte) {
	o.n++
	o.size += len(key)
	if o.flat {
		if o.wbuf == nil {
			// Room for the message's bound and then some: it ends
			// one cell past the bound, and entries take more bytes
			// than size counts.
			o.wbuf = wirecodec.Pool.Get(o.limit + o.limit/2)
			o.w.SetBuffer((*o.wbuf)[:0])
		}
		o.w.StartRow(key)
		return
	}
	o.rows = append(o.rows, &pb.Row{Key: key})
}

func (o *scanSender) addCell(c tablet.Cell) {
	if o.flat {
		o.w.AddCell(c.Family, c.Qualifier, c.Timestamp, c.Value, c.Labels)
		return
	}
	pr := o.rows[len(o.rows)-1]
	pr.Cells = append(pr.Cells, cellToPB(c))
}

func (o *scanSender) endRow() {
	if o.flat {
		o.w.EndRow()
	}
}

// flush sends the message, if it holds a row; continues says its last
// row goes on in the next message.
func (o *scanSender) flush(continues bool) error {
	if o.n == 0 || o.err != nil {
		return o.err
	}
	resp := &pb.ScanRowsResponse{LastRowContinues: continues, Stats: o.statsDelta()}
	if ls, ok := o.stream.(*localScanStream); ok && o.flat {
		// In this process: the message takes the chunk's buffer.
		resp.Chunk = o.takeChunk()
		o.err = ls.sendOwned(resp)
	} else if o.flat {
		var msg *wirecodec.Encoded
		if msg, o.err = o.encode(resp); o.err == nil {
			o.err = o.stream.SendMsg(msg)
		}
	} else {
		resp.Rows = o.rows
		o.err = o.stream.Send(resp)
	}
	o.rows, o.size, o.n = nil, 0, 0
	o.limit = min(2*o.limit, scanChunkBytes)
	return o.err
}

// chunkField is ScanRowsResponse.chunk's field number.
var chunkField = (&pb.ScanRowsResponse{}).ProtoReflect().Descriptor().Fields().ByName("chunk").Number()

// encode returns resp (without a chunk) and the Writer's chunk as one
// encoded message, and leaves the Writer empty, with no buffer: the
// chunk's buffer goes with the message.
func (o *scanSender) encode(resp *pb.ScanRowsResponse) (*wirecodec.Encoded, error) {
	wbuf := o.wbuf
	chunk := o.takeChunk()
	head, err := proto.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("tserver: marshal a scan message's fields: %w", err)
	}
	head = protowire.AppendTag(head, chunkField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(chunk)))
	var body mem.Buffer
	if wbuf != nil && cap(chunk) == cap(*wbuf) {
		// Still the Pool buffer (no row outgrew it): gRPC gives it back.
		*wbuf = chunk
		body = mem.NewBuffer(wbuf, wirecodec.Pool)
	} else {
		body = mem.SliceBuffer(chunk)
	}
	return &wirecodec.Encoded{Data: mem.BufferSlice{mem.SliceBuffer(head), body}}, nil
}

// takeChunk returns the Writer's chunk and leaves the Writer with no
// buffer: the chunk is the caller's (never Pool's again, unless the
// caller gives it back).
func (o *scanSender) takeChunk() []byte {
	chunk := o.w.Bytes()
	o.w.SetBuffer(nil)
	o.wbuf = nil
	return chunk
}

// statsDelta is what the scan examined since the last message reported,
// nil if the request asked for no stats.
func (o *scanSender) statsDelta() *pb.ScanStats {
	if o.stats == nil {
		return nil
	}
	d := &pb.ScanStats{RowsSeen: o.stats.Rows - o.sent.Rows, CellsSeen: o.stats.Cells - o.sent.Cells}
	o.sent = *o.stats
	return d
}

// flushStats ends a scan that asked for stats: what its last message did
// not report (rows the row filter dropped after it) goes in a message of
// its own.
func (o *scanSender) flushStats() error {
	if o.err != nil || o.stats == nil || *o.stats == o.sent {
		return o.err
	}
	o.err = o.stream.Send(&pb.ScanRowsResponse{Stats: o.statsDelta()})
	return o.err
}
