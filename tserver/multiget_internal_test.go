package tserver

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
)

// TestGroupReads checks which reads share a multi-get: only those of one
// tablet and epoch with equal filters, where a nil filter and an empty
// one differ and two equal filters in different messages are one.
func TestGroupReads(t *testing.T) {
	read := func(id uint64, tablet string, epoch int64, f *pb.ReadFilter, rowFilter []byte) *pb.BatchCommandsRequest_Command {
		return &pb.BatchCommandsRequest_Command{Id: id, Command: &pb.BatchCommandsRequest_Command_ReadRow{
			ReadRow: &pb.ReadRowRequest{TabletId: tablet, Epoch: epoch, RowKey: []byte("r"), Filter: f, RowFilter: rowFilter}}}
	}
	fam := func(names ...string) *pb.ReadFilter { return &pb.ReadFilter{Families: names} }
	tests := []struct {
		name string
		cmds []*pb.BatchCommandsRequest_Command
		want [][]uint64 // ids of each group, in order
	}{
		{"no filters, one tablet", []*pb.BatchCommandsRequest_Command{read(1, "t", 1, nil, nil), read(2, "t", 1, nil, nil)}, [][]uint64{{1, 2}}},
		{"tablets and epochs", []*pb.BatchCommandsRequest_Command{read(1, "t", 1, nil, nil), read(2, "u", 1, nil, nil), read(3, "t", 2, nil, nil), read(4, "t", 1, nil, nil)}, [][]uint64{{1, 4}, {2}, {3}}},
		{"nil and empty filter", []*pb.BatchCommandsRequest_Command{read(1, "t", 1, nil, nil), read(2, "t", 1, &pb.ReadFilter{}, nil)}, [][]uint64{{1}, {2}}},
		{"equal filters in two messages", []*pb.BatchCommandsRequest_Command{read(1, "t", 1, fam("a"), nil), read(2, "t", 1, fam("a"), nil), read(3, "t", 1, fam("b"), nil)}, [][]uint64{{1, 2}, {3}}},
		{"row filters", []*pb.BatchCommandsRequest_Command{read(1, "t", 1, nil, []byte{1}), read(2, "t", 1, nil, []byte{1}), read(3, "t", 1, nil, nil)}, [][]uint64{{1, 2}, {3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			groups := groupReads(tc.cmds)
			var got [][]uint64
			for _, g := range groups {
				var ids []uint64
				for _, c := range g.cmds {
					ids = append(ids, c.Id)
				}
				got = append(got, ids)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("groups %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSameFilter checks sameFilter against proto.Equal, which it stands
// in for, on filters that differ in each field and on equal ones.
func TestSameFilter(t *testing.T) {
	col := func(f, q string) *pb.Column { return &pb.Column{Family: f, Qualifier: []byte(q)} }
	filters := []*pb.ReadFilter{
		{},
		{Families: []string{"a"}},
		{Families: []string{"a", "b"}},
		{Families: []string{"b", "a"}},
		{Columns: []*pb.Column{col("a", "q")}},
		{Columns: []*pb.Column{col("a", "r")}},
		{Columns: []*pb.Column{col("b", "q")}},
		{Columns: []*pb.Column{col("a", "q"), col("a", "r")}},
		{Columns: []*pb.Column{col("a", "")}},
		{TimeRange: &pb.TimestampRange{}},
		{TimeRange: &pb.TimestampRange{StartMicros: 1}},
		{TimeRange: &pb.TimestampRange{EndMicros: 1}},
		{MaxVersions: 1},
		{MaxVersions: 2},
		{Families: []string{"a"}, Columns: []*pb.Column{col("a", "q")}, TimeRange: &pb.TimestampRange{StartMicros: 1, EndMicros: 9}, MaxVersions: 1},
	}
	for i, a := range filters {
		for j, b := range filters {
			// A copy, so equal filters are never the same pointer.
			b = proto.Clone(b).(*pb.ReadFilter)
			if got, want := sameFilter(a, b), proto.Equal(a, b); got != want {
				t.Errorf("sameFilter(%d %v, %d %v) = %v, proto.Equal says %v", i, a, j, b, got, want)
			}
		}
	}
}
