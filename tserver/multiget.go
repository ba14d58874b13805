package tserver

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
)

// readGroup is the ReadRow commands of one batch message that one
// multi-get answers: the same tablet, epoch and selection.
type readGroup struct {
	first *pb.ReadRowRequest // the selection of every command of the group
	cmds  []*pb.BatchCommandsRequest_Command
}

// groupReads sorts a message's ReadRow commands into groups of the same
// tablet, epoch, filter and row filter, in order of first appearance.
func groupReads(cmds []*pb.BatchCommandsRequest_Command) []*readGroup {
	var groups []*readGroup
	for _, c := range cmds {
		req := c.GetReadRow()
		var g *readGroup
		for _, h := range groups {
			if sameSelection(h.first, req) {
				g = h
				break
			}
		}
		if g == nil {
			g = &readGroup{first: req}
			groups = append(groups, g)
		}
		g.cmds = append(g.cmds, c)
	}
	return groups
}

// sameSelection reports whether two reads can share one multi-get: same
// tablet, epoch and filters. Most reads have no filter: two nil filters
// are equal without proto.Equal's reflection (5 % of the tserver's CPU
// under Gets), a nil and a set one are not (as proto.Equal has it).
func sameSelection(a, b *pb.ReadRowRequest) bool {
	if a.TabletId != b.TabletId || a.Epoch != b.Epoch || !bytes.Equal(a.RowFilter, b.RowFilter) {
		return false
	}
	switch {
	case a.Filter == b.Filter:
		return true
	case a.Filter == nil || b.Filter == nil:
		return false
	}
	return sameFilter(a.Filter, b.Filter)
}

// sameFilter is proto.Equal for two ReadFilters, without its reflection
// (unknown fields aside, which the tserver ignores).
func sameFilter(a, b *pb.ReadFilter) bool {
	if !slices.Equal(a.Families, b.Families) || len(a.Columns) != len(b.Columns) || a.MaxVersions != b.MaxVersions {
		return false
	}
	for i, c := range a.Columns {
		d := b.Columns[i]
		if c.GetFamily() != d.GetFamily() || !bytes.Equal(c.GetQualifier(), d.GetQualifier()) {
			return false
		}
	}
	ta, tb := a.TimeRange, b.TimeRange
	if (ta == nil) != (tb == nil) {
		return false
	}
	return ta == nil || (ta.StartMicros == tb.StartMicros && ta.EndMicros == tb.EndMicros)
}

// readRows answers a group's ReadRow commands with one multi-get, each
// with the response or status its unary ReadRow would have returned.
func (s *Server) readRows(ctx context.Context, g *readGroup, emit func(*batchResult)) {
	fail := func(cmds []*pb.BatchCommandsRequest_Command, err error) {
		st := resultStatus(err)
		for _, c := range cmds {
			emit(&batchResult{Id: c.Id, Status: st})
		}
	}
	// The checks of ReadRow, in its order.
	cmds := make([]*pb.BatchCommandsRequest_Command, 0, len(g.cmds))
	for _, c := range g.cmds {
		if len(c.GetReadRow().RowKey) == 0 {
			fail([]*pb.BatchCommandsRequest_Command{c}, apierr.InvalidArgument("row key is empty"))
			continue
		}
		cmds = append(cmds, c)
	}
	if len(cmds) == 0 {
		return
	}
	opts, err := readOptions(g.first.Filter, g.first.RowFilter)
	if err != nil {
		fail(cmds, err)
		return
	}
	r, err := s.serving(g.first.TabletId, g.first.Epoch)
	if err != nil {
		fail(cmds, err)
		return
	}
	if err := checkFamilies(r, &opts); err != nil {
		fail(cmds, err)
		return
	}
	rows := make([][]byte, 0, len(cmds))
	in := cmds[:0]
	for _, c := range cmds {
		key := c.GetReadRow().RowKey
		if !r.Contains(key) {
			// What Replica.Get returns for it.
			fail([]*pb.BatchCommandsRequest_Command{c}, s.tabletErr(r, fmt.Errorf("%w: row %q is outside tablet %s", rp.ErrWrongTablet, key, r.ID())))
			continue
		}
		rows, in = append(rows, key), append(in, c)
	}
	if len(rows) == 0 {
		return
	}
	resps := make([]*pb.ReadRowResponse, len(rows))
	err = r.GetRows(ctx, rows, opts, func(i int, row tablet.Row) bool {
		resps[i] = readRowResponse(rows[i], row)
		return true
	})
	if err != nil {
		fail(in, s.tabletErr(r, err))
		return
	}
	for i, c := range in {
		resp := resps[i]
		if resp == nil {
			resp = &pb.ReadRowResponse{Row: &pb.Row{Key: rows[i]}}
		}
		emit(&batchResult{Id: c.Id, ReadRow: resp})
	}
}

// readRowResponse is ReadRow's answer for a row found: its cells, or
// chunked when they are too large for one message.
func readRowResponse(key []byte, row tablet.Row) *pb.ReadRowResponse {
	size := len(row.Key)
	for _, c := range row.Cells {
		size += cellSize(c)
	}
	if size > maxReadRowBytes {
		return &pb.ReadRowResponse{Row: &pb.Row{Key: key}, Chunked: true}
	}
	return &pb.ReadRowResponse{Row: rowToPB(row)}
}

// pointRows returns the rows of ranges when every one is a single row
// [k, k+"\x00"), which a multi-get reads.
func pointRows(ranges []tablet.KeyRange) ([][]byte, bool) {
	rows := make([][]byte, 0, len(ranges))
	for _, kr := range ranges {
		n := len(kr.Start)
		if len(kr.End) != n+1 || kr.End[n] != 0 || !bytes.Equal(kr.Start, kr.End[:n]) {
			return nil, false
		}
		rows = append(rows, kr.Start)
	}
	return rows, true
}

// clipRows drops the rows outside r's range.
func clipRows(r *rp.Replica, rows [][]byte) [][]byte {
	out := rows[:0]
	for _, row := range rows {
		if r.Contains(row) {
			out = append(out, row)
		}
	}
	return out
}
