package client

import (
	"context"
	"unsafe"

	"bighive/internal/apierr"
	"bighive/internal/flatrows"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
)

// A scan's flat chunk is left in the buffer its message was received in:
// the rows decodeFlat makes alias it (their values), so copying it out of
// the message first was one more copy of every scanned byte.
func init() { wirecodec.Alias(&pb.ScanRowsResponse{}) }

// scanChunk is one ScanRows message, decoded: its rows (a row with no
// cells is kept: the merging of a cut row needs its key), whether the last
// one continues in the next message, or the error that ended the stream.
type scanChunk struct {
	rows      []Row
	continues bool
	stats     *pb.ScanStats // what the scan examined since the last message, if asked
	err       error
}

// prefetch receives and decodes the stream's messages on its own
// goroutine, one message ahead of the caller: the next chunk arrives and
// is decoded while the caller's fn consumes the current one. It stops at
// the stream's end (the last chunk carries io.EOF) or when ctx is done.
//
// The first message is received on the caller's goroutine, before the
// prefetching one starts: a scan of one message (a short range, a row
// list) then costs no hand-over between goroutines but the one that
// overlaps its consumption.
func prefetch(ctx context.Context, addr string, recv func() (*pb.ScanRowsResponse, error), received func()) <-chan scanChunk {
	next := func() scanChunk {
		resp, err := recv()
		if err != nil {
			return scanChunk{err: err}
		}
		received()
		rows, err := decodeChunk(resp)
		if err != nil {
			return scanChunk{err: apierr.Unavailable("tserver %s: scan message: %v", addr, err)}
		}
		return scanChunk{rows: rows, continues: resp.LastRowContinues, stats: resp.Stats}
	}
	out := make(chan scanChunk, 2)
	first := next()
	out <- first
	if first.err != nil {
		close(out)
		return out
	}
	go func() {
		defer close(out)
		for {
			ch := next()
			select {
			case out <- ch:
			case <-ctx.Done():
				return
			}
			if ch.err != nil {
				return
			}
		}
	}()
	return out
}

// decodeChunk returns the rows of a message, flat or not.
func decodeChunk(resp *pb.ScanRowsResponse) ([]Row, error) {
	if len(resp.Chunk) == 0 {
		rows := make([]Row, len(resp.Rows))
		for i, pr := range resp.Rows {
			rows[i] = rowFromProto(pr)
		}
		return rows, nil
	}
	return decodeFlat(resp.Chunk)
}

// decodeFlat decodes a flat chunk in one pass, with a few allocations
// for all of its rows: one []Row and one []Cell, sized from the first
// row's share of the chunk (append grows them if later rows are smaller). Keys,
// families, qualifiers and values alias chunk: the chunk is the
// message's own buffer, never written again (wirecodec.Alias), so
// the strings taken over it never change. A value is capped at its end,
// so appending to it cannot reach the bytes after it. Labels (rare) are
// copied.
func decodeFlat(chunk []byte) ([]Row, error) {
	var (
		rd    flatrows.Reader
		rows  []Row
		cells []Cell
	)
	rd.Reset(chunk)
	var lastFam []byte
	fam := ""
	for {
		key, n, ok := rd.NextRow()
		if !ok {
			break
		}
		r := Row{Key: alias(key)}
		start := len(cells)
		for i := 0; i < n; i++ {
			c, ok := rd.NextCell()
			if !ok {
				break
			}
			if lastFam == nil || string(c.Family) != string(lastFam) {
				fam, lastFam = alias(c.Family), c.Family
			}
			cl := Cell{Family: fam, Qualifier: alias(c.Qualifier), Timestamp: c.Timestamp, Value: c.Value}
			for j := 0; j < c.Labels; j++ {
				l, _ := rd.NextLabel()
				cl.Labels = append(cl.Labels, string(l))
			}
			cells = append(cells, cl)
		}
		if len(cells) > start {
			r.Cells = cells[start:len(cells):len(cells)]
		}
		if rows == nil {
			// The first row: room for as many rows of its size as the
			// chunk holds. (Its cells keep the array they are in.)
			est := len(chunk)/max(rd.Offset(), 1) + 1
			rows = make([]Row, 0, est)
			cells = make([]Cell, 0, est*len(r.Cells))
		}
		rows = append(rows, r)
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// alias returns b as a string sharing its bytes; b must never be written
// again (decodeFlat's chunk).
func alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
