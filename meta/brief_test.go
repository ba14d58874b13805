package meta

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
)

// The brief reads what proto.Unmarshal reads, for every field it keeps,
// whatever else the record holds; garbage is a corruption error.
func TestParseBrief(t *testing.T) {
	cases := []*pb.TabletMeta{
		{TabletId: "t1", Table: "a"},
		{TabletId: "t2", Table: "b", State: pb.TabletState_TABLET_STATE_SERVING, TserverUuid: "ts1", Epoch: 7,
			Range:        &pb.RowRange{StartRow: []byte("k"), EndRow: []byte("z")},
			LogPositions: []*pb.LogPosition{{Prefix: "p", FileTimestamp: 3}}, RecoveryFiles: []string{"r"}},
		{TabletId: "t3", Table: "c", State: pb.TabletState_TABLET_STATE_UNASSIGNED, Epoch: 1 << 40},
	}
	for _, want := range cases {
		v, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var b Brief
		if err := parseBrief(v, &b); err != nil {
			t.Fatalf("%s: %v", want.TabletId, err)
		}
		if b != (Brief{Table: want.Table, State: want.State, Tserver: want.TserverUuid, Epoch: want.Epoch}) {
			t.Errorf("%s: brief %+v, want the record's %v", want.TabletId, b, want)
		}
	}
	var b Brief
	if err := parseBrief([]byte{0x12, 0x7f, 'x'}, &b); err == nil {
		t.Errorf("a truncated record parsed: %+v, %v", b, err)
	}
	if err := parseBrief(nil, &b); err == nil {
		t.Error("an empty record (no table) parsed")
	}
}
