package meta

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

type testFSM struct {
	*FSM
	t     *testing.T
	index uint64
}

func openTestFSM(t *testing.T) *testFSM {
	t.Helper()
	f, err := OpenFSM(nil, filepath.Join(t.TempDir(), "meta.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return &testFSM{FSM: f, t: t}
}

// apply applies cmd as the next raft entry.
func (f *testFSM) apply(cmd *spb.MetaCommand) *Result {
	f.t.Helper()
	f.index++
	data, err := proto.Marshal(cmd)
	if err != nil {
		f.t.Fatal(err)
	}
	res, _ := f.Apply(&raft.Log{Index: f.index, Type: raft.LogCommand, Data: data}).(*Result)
	if res == nil {
		f.t.Fatalf("entry %d: no result", f.index)
	}
	return res
}

func (f *testFSM) mustApply(cmd *spb.MetaCommand) *Result {
	f.t.Helper()
	res := f.apply(cmd)
	if res.Err != nil {
		f.t.Fatalf("apply %v: %v", cmd, res.Err)
	}
	return res
}

func (f *testFSM) tablet(id string) *pb.TabletMeta {
	f.t.Helper()
	var t *pb.TabletMeta
	if err := f.View(func(r *Reader) (err error) { t, err = r.Tablet(id); return err }); err != nil {
		f.t.Fatal(err)
	}
	return t
}

// dump renders every bucket but the applied index, to compare states.
func (f *testFSM) dump() string {
	f.t.Helper()
	var b bytes.Buffer
	f.mu.RLock()
	defer f.mu.RUnlock()
	err := f.db.View(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				if !bytes.Equal(name, bucketMeta) || !bytes.Equal(k, keyApplied) {
					fmt.Fprintf(&b, "%s/%q=%x\n", name, k, v)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return b.String()
}

func createCmd(name string, keys ...string) *spb.MetaCommand {
	var ks [][]byte
	for _, k := range keys {
		ks = append(ks, []byte(k))
	}
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_CreateTable{CreateTable: &spb.MetaCreateTable{
		Schema:    &pb.TableSchema{Name: name, Families: []*pb.FamilySpec{{Name: "cf", MaxVersions: 3}}},
		SplitKeys: ks,
	}}}
}

func registerCmd(uuid string, inc int64) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_RegisterTserver{RegisterTserver: &spb.MetaRegisterTServer{
		Tserver: &spb.MetaTServer{Uuid: uuid, Address: uuid + ":1", Incarnation: inc, WalPrefix: uuid + "_1", BlockStoreUuid: "bs-" + uuid}}}}
}

func assignCmd(items ...*spb.MetaAssign_Item) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_Assign{Assign: &spb.MetaAssign{Items: items}}}
}

func loadCmd(id string, epoch int64, ts string, prefix string, stamp int64) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_TabletLoad{TabletLoad: &spb.MetaTabletLoad{
		TabletId: id, Epoch: epoch, TserverUuid: ts, Position: &pb.LogPosition{Prefix: prefix, FileTimestamp: stamp}}}}
}

func TestCreateTableAndLocations(t *testing.T) {
	f := openTestFSM(t)
	res := f.mustApply(createCmd("users", "g", "p", "w"))
	if len(res.Tablets) != 4 {
		t.Fatalf("got %d tablets, want 4", len(res.Tablets))
	}
	f.mustApply(createCmd("other", "m"))
	tests := []struct {
		start string
		limit int
		want  []string // start rows
	}{
		{"", 0, []string{"", "g", "p", "w"}},
		{"a", 0, []string{"", "g", "p", "w"}},
		{"g", 2, []string{"g", "p"}},
		{"h", 1, []string{"g"}},
		{"zzz", 0, []string{"w"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.start, tc.limit), func(t *testing.T) {
			var got []*pb.TabletMeta
			err := f.View(func(r *Reader) (err error) {
				got, err = r.TableTablets("users", []byte(tc.start), tc.limit)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var starts []string
			for _, tm := range got {
				if tm.Table != "users" || tm.State != pb.TabletState_TABLET_STATE_UNASSIGNED {
					t.Errorf("tablet %v", tm)
				}
				starts = append(starts, string(tm.Range.GetStartRow()))
			}
			if fmt.Sprint(starts) != fmt.Sprint(tc.want) {
				t.Errorf("start rows %q, want %q", starts, tc.want)
			}
		})
	}
	_ = f.View(func(r *Reader) error {
		if n := len(r.TabletIDsOf("")); n != 6 {
			t.Errorf("%d unassigned tablets, want 6", n)
		}
		if n := r.TabletCount("users"); n != 4 {
			t.Errorf("TabletCount = %d", n)
		}
		return nil
	})
}

func TestCommandErrors(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t1", "m"))
	f.mustApply(registerCmd("ts1", 1))
	fam := func(name string) *spb.MetaCommand {
		return &spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{Table: "t1", Family: &pb.FamilySpec{Name: name}}}}
	}
	// A table without families is valid (Cloud Bigtable clients add them
	// after creating the table).
	noFam := createCmd("nofam")
	noFam.GetCreateTable().Schema.Families = nil
	f.mustApply(noFam)
	dupFam := createCmd("dupfam")
	dupFam.GetCreateTable().Schema.Families = append(dupFam.GetCreateTable().Schema.Families, &pb.FamilySpec{Name: "cf"})
	tests := []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"bad table name", createCmd("a b"), codes.InvalidArgument},
		{"empty table name", createCmd(""), codes.InvalidArgument},
		{"duplicate family", dupFam, codes.InvalidArgument},
		{"unsorted keys", createCmd("u", "b", "a"), codes.InvalidArgument},
		{"duplicate keys", createCmd("u", "a", "a"), codes.InvalidArgument},
		{"empty key", createCmd("u", ""), codes.InvalidArgument},
		{"exists", createCmd("t1"), codes.AlreadyExists},
		{"delete missing", &spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteTable{DeleteTable: &spb.MetaDeleteTable{Name: "nope"}}}, codes.NotFound},
		{"family exists", fam("cf"), codes.AlreadyExists},
		{"family bad name", fam("x/y"), codes.InvalidArgument},
		{"load unknown tablet", loadCmd("t0000000000000099", 1, "ts1", "p", 1), codes.NotFound},
		{"load unassigned", loadCmd(FormatTabletID(1), 0, "ts1", "p", 1), codes.FailedPrecondition},
		{"allocate zero", &spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{}}}, codes.InvalidArgument},
		{"empty command", &spb.MetaCommand{}, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.dump()
			res := f.apply(tc.cmd)
			if got := apierr.CodeOf(res.Err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, res.Err, tc.want)
			}
			if after := f.dump(); after != before {
				t.Errorf("a refused command changed the state:\n%s\n→\n%s", before, after)
			}
		})
	}
}

func TestAssignLoadCheckpointFencing(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	f.mustApply(registerCmd("b", 1))
	t1, t2 := FormatTabletID(1), FormatTabletID(2)
	res := f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"},
		&spb.MetaAssign_Item{TabletId: t1, ExpectedEpoch: 0, TserverUuid: "b"})) // stale: skipped
	if res.Applied != 2 {
		t.Fatalf("applied %d, want 2", res.Applied)
	}
	if tm := f.tablet(t1); tm.Epoch != 1 || tm.TserverUuid != "a" || tm.State != pb.TabletState_TABLET_STATE_ASSIGNED {
		t.Fatalf("after assign: %v", tm)
	}
	f.mustApply(loadCmd(t1, 1, "a", "a_1", 100))
	f.mustApply(loadCmd(t1, 1, "a", "a_1", 100)) // duplicate position: not added twice
	if tm := f.tablet(t1); len(tm.LogPositions) != 1 || tm.State != pb.TabletState_TABLET_STATE_SERVING {
		t.Fatalf("after load: %v", tm)
	}
	if c := apierr.CodeOf(f.apply(loadCmd(t1, 1, "b", "b_1", 5)).Err); c != codes.FailedPrecondition {
		t.Fatalf("load by non-owner: %v", c)
	}

	// The owner dies; b takes t1 at epoch 2.
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Unassign{Unassign: &spb.MetaUnassign{Items: []*spb.MetaUnassign_Item{
		{TabletId: t1, ExpectedEpoch: 1, ExpectedTserver: "a"}}}}})
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, ExpectedEpoch: 1, TserverUuid: "b"}))
	f.mustApply(loadCmd(t1, 2, "b", "b_1", 200))
	if tm := f.tablet(t1); len(tm.LogPositions) != 2 {
		t.Fatalf("double failover must keep both positions: %v", tm.LogPositions)
	}

	ck := func(ts string, reps ...*pb.CheckpointReport) *Result {
		return f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: ts, Reports: reps}}})
	}
	newPos := []*pb.LogPosition{{Prefix: "b_1", FileTimestamp: 300}}
	files := []*pb.TSFileRef{{BlockStoreUuid: "bs-b", FooterBlock: 7, Blocks: []uint64{5, 6, 7}}}
	res = ck("a", &pb.CheckpointReport{TabletId: t1, Epoch: 1, LogPositions: newPos}, // the old owner, stale
		&pb.CheckpointReport{TabletId: t2, Epoch: 1, LogPositions: newPos}) // a still owns t2
	if c := apierr.CodeOf(res.Statuses[0]); c != codes.FailedPrecondition {
		t.Errorf("stale checkpoint: %v", res.Statuses[0])
	}
	if res.Statuses[1] != nil {
		t.Errorf("good checkpoint refused: %v", res.Statuses[1])
	}
	if tm := f.tablet(t1); len(tm.LogPositions) != 2 {
		t.Errorf("stale checkpoint changed the tablet: %v", tm)
	}
	res = ck("b", &pb.CheckpointReport{TabletId: t1, Epoch: 2, LogPositions: newPos, Tsfiles: files},
		&pb.CheckpointReport{TabletId: t1, Epoch: 1}, &pb.CheckpointReport{TabletId: "t00000000000000ff", Epoch: 1})
	if res.Statuses[0] != nil || apierr.CodeOf(res.Statuses[1]) != codes.FailedPrecondition || apierr.CodeOf(res.Statuses[2]) != codes.NotFound {
		t.Errorf("statuses %v", res.Statuses)
	}
	if tm := f.tablet(t1); !proto.Equal(tm.LogPositions[0], newPos[0]) || len(tm.LogPositions) != 1 || len(tm.Tsfiles) != 1 {
		t.Errorf("checkpoint did not replace the lists: %v", tm)
	}
	_ = f.View(func(r *Reader) error {
		blocks, pos, err := r.GCReferences("bs-b", "b_1")
		if err != nil || fmt.Sprint(blocks) != "[5 6 7]" || len(pos) != 1 || pos[0].FileTimestamp != 300 {
			t.Errorf("GCReferences = %v %v %v", blocks, pos, err)
		}
		blocks, pos, _ = r.GCReferences("bs-a", "a_1")
		if len(blocks) != 0 || len(pos) != 1 { // t2 still names a_1? it was checkpointed to b_1
			t.Logf("a refs: %v %v", blocks, pos)
		}
		return nil
	})
}

func TestRegisterNewIncarnationFreesTablets(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: FormatTabletID(1), TserverUuid: "a"}))
	if res := f.mustApply(registerCmd("a", 1)); len(res.IDs) != 0 {
		t.Fatalf("same incarnation freed %v", res.IDs)
	}
	res := f.mustApply(registerCmd("a", 2))
	if len(res.IDs) != 1 || res.IDs[0] != FormatTabletID(1) {
		t.Fatalf("new incarnation freed %v", res.IDs)
	}
	if tm := f.tablet(FormatTabletID(1)); tm.State != pb.TabletState_TABLET_STATE_UNASSIGNED || tm.Epoch != 1 {
		t.Fatalf("tablet %v", tm)
	}
}

func splitCmd(parent string, epoch int64, ts string, kids ...*pb.SplitChild) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_Split{Split: &spb.MetaSplit{ParentTabletId: parent, ParentEpoch: epoch, TserverUuid: ts, Children: kids}}}
}

func TestSplitAtomic(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m")) // t1 = ["", m), t2 = [m, "")
	f.mustApply(registerCmd("a", 1))
	parent := FormatTabletID(2)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: parent, TserverUuid: "a"}))
	ids := f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{Count: 2}}}).IDs
	kid := func(id, s, e string) *pb.SplitChild {
		return &pb.SplitChild{TabletId: id, Range: &pb.RowRange{StartRow: []byte(s), EndRow: []byte(e)}}
	}
	bad := []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"stale epoch", splitCmd(parent, 0, "a", kid(ids[0], "m", "q"), kid(ids[1], "q", "")), codes.FailedPrecondition},
		{"not owner", splitCmd(parent, 1, "b", kid(ids[0], "m", "q"), kid(ids[1], "q", "")), codes.FailedPrecondition},
		{"gap", splitCmd(parent, 1, "a", kid(ids[0], "m", "q"), kid(ids[1], "r", "")), codes.InvalidArgument},
		{"wrong start", splitCmd(parent, 1, "a", kid(ids[0], "n", "q"), kid(ids[1], "q", "")), codes.InvalidArgument},
		{"bounded end", splitCmd(parent, 1, "a", kid(ids[0], "m", "q"), kid(ids[1], "q", "z")), codes.InvalidArgument},
		{"one child", splitCmd(parent, 1, "a", kid(ids[0], "m", "")), codes.InvalidArgument},
		{"unallocated id", splitCmd(parent, 1, "a", kid(ids[0], "m", "q"), kid(FormatTabletID(99), "q", "")), codes.InvalidArgument},
		{"existing id", splitCmd(parent, 1, "a", kid(ids[0], "m", "q"), kid(FormatTabletID(1), "q", "")), codes.AlreadyExists},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if c := apierr.CodeOf(f.apply(tc.cmd).Err); c != tc.want {
				t.Fatalf("code %v, want %v", c, tc.want)
			}
			if tm := f.tablet(parent); tm.Epoch != 1 {
				t.Fatalf("parent changed: %v", tm)
			}
		})
	}
	good := splitCmd(parent, 1, "a", kid(ids[0], "m", "q"), kid(ids[1], "q", ""))
	res := f.mustApply(good)
	if len(res.Tablets) != 2 {
		t.Fatalf("children %v", res.Tablets)
	}
	for _, c := range res.Tablets {
		if c.Epoch != 1 || c.TserverUuid != "a" || c.State != pb.TabletState_TABLET_STATE_ASSIGNED || c.Table != "t" {
			t.Errorf("child %v", c)
		}
	}
	_ = f.View(func(r *Reader) error {
		if _, err := r.Tablet(parent); apierr.CodeOf(err) != codes.NotFound {
			t.Errorf("parent still there: %v", err)
		}
		all, _ := r.TableTablets("t", nil, 0)
		var starts []string
		for _, tm := range all {
			starts = append(starts, string(tm.Range.GetStartRow()))
		}
		if fmt.Sprint(starts) != "[ m q]" {
			t.Errorf("ranges after split %q", starts)
		}
		if got := r.TabletIDsOf("a"); len(got) != 2 {
			t.Errorf("owner index %v", got)
		}
		return nil
	})
	// A retried report whose answer was lost gets the same children.
	if res := f.mustApply(good); len(res.Tablets) != 2 || res.Tablets[0].TabletId != ids[0] {
		t.Fatalf("retry: %v", res.Tablets)
	}
}

func TestReplayedEntriesSkipped(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t"))
	data, _ := proto.Marshal(createCmd("u"))
	// Entry 1 again (as after a restart) must not apply, even with other data.
	if res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data}); res != nil {
		t.Fatalf("replayed entry gave %v", res)
	}
	_ = f.View(func(r *Reader) error {
		if _, err := r.Table("u"); err == nil {
			t.Error("replayed entry was applied")
		}
		return nil
	})
	// Garbage in the log is refused, not a panic.
	if res := f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: []byte{0xff, 0xff}}).(*Result); res.Err == nil {
		t.Fatal("garbage applied")
	}
}

func TestApplyBatch(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: FormatTabletID(1), TserverUuid: "a"},
		&spb.MetaAssign_Item{TabletId: FormatTabletID(2), TserverUuid: "a"}))
	entry := func(i uint64, cmd *spb.MetaCommand) *raft.Log {
		data, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return &raft.Log{Index: i, Type: raft.LogCommand, Data: data}
	}
	// Make tablet 2's record garbage: its load report fails inside.
	f.mu.RLock()
	if err := f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTablets).Put([]byte(FormatTabletID(2)), []byte{0xff, 0x01})
	}); err != nil {
		t.Fatal(err)
	}
	f.mu.RUnlock()
	out := f.ApplyBatch([]*raft.Log{
		entry(10, loadCmd(FormatTabletID(1), 1, "a", "a_1", 1)),
		entry(11, createCmd("t")), // AlreadyExists
		{Index: 12, Type: raft.LogNoop},
		entry(13, loadCmd(FormatTabletID(2), 1, "a", "a_1", 1)), // corrupt record: Internal
		entry(14, createCmd("u")),
	})
	codesOf := func() []codes.Code {
		var cs []codes.Code
		for _, o := range out {
			if r, ok := o.(*Result); ok {
				cs = append(cs, apierr.CodeOf(r.Err))
			} else {
				cs = append(cs, codes.Code(99))
			}
		}
		return cs
	}
	if got := fmt.Sprint(codesOf()); got != fmt.Sprint([]codes.Code{codes.OK, codes.AlreadyExists, 99, codes.Internal, codes.OK}) {
		t.Fatalf("results %v", got)
	}
	if tm := f.tablet(FormatTabletID(1)); tm.State != pb.TabletState_TABLET_STATE_SERVING {
		t.Errorf("load in the batch not applied: %v", tm)
	}
	_ = f.View(func(r *Reader) error {
		if _, err := r.Table("u"); err != nil {
			t.Errorf("command after the failed one not applied: %v", err)
		}
		if r.AppliedIndex() != 14 {
			t.Errorf("applied index %d, want 14", r.AppliedIndex())
		}
		return nil
	})
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestSnapshotRestore(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "b", "c"))
	f.mustApply(registerCmd("a", 1))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.mustApply(createCmd("after")) // not in the snapshot
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	g := openTestFSM(t)
	g.mustApply(createCmd("gone")) // replaced by the restore
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	err = g.View(func(r *Reader) error {
		tables, err := r.Tables()
		if err != nil {
			return err
		}
		if len(tables) != 1 || tables[0].Name != "t" || r.TabletCount("t") != 3 || r.AppliedIndex() != 2 {
			t.Errorf("restored tables %v applied %d", tables, r.AppliedIndex())
		}
		if _, err := r.TServer("a"); err != nil {
			t.Error(err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A garbage snapshot is refused and the state stays.
	if err := g.Restore(io.NopCloser(bytes.NewReader([]byte("not a bolt file")))); err == nil {
		t.Fatal("garbage snapshot restored")
	}
	if g.AppliedIndex() != 2 {
		t.Fatal("state lost after a refused restore")
	}
}

func TestCorruptRecordIsAnError(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t"))
	f.mu.RLock()
	err := f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTablets).Put([]byte(FormatTabletID(1)), []byte{0xff, 0x01, 0x02})
	})
	f.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	err = f.View(func(r *Reader) error { _, err := r.Tablet(FormatTabletID(1)); return err })
	var ce *CorruptionError
	if !errorsAs(err, &ce) || ce.Bucket != "tablets" {
		t.Fatalf("got %v, want a CorruptionError", err)
	}
}

func TestTabletIDRoundTrip(t *testing.T) {
	for _, n := range []uint64{1, 255, 1 << 40} {
		got, err := ParseTabletID(FormatTabletID(n))
		if err != nil || got != n {
			t.Errorf("%d → %q → %d, %v", n, FormatTabletID(n), got, err)
		}
	}
	for _, bad := range []string{"", "t1", "x0000000000000001", "t000000000000000g"} {
		if _, err := ParseTabletID(bad); err == nil {
			t.Errorf("ParseTabletID(%q) accepted", bad)
		}
	}
}
