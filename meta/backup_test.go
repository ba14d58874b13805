package meta

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func backupCmd(name, table string, create, expire int64, flushed ...string) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_CreateBackup{CreateBackup: &spb.MetaCreateBackup{
		Name: name, Table: table, CreateTimeMicros: create, ExpireTimeMicros: expire, Flushed: flushed}}}
}

func checkpointCmd(ts, id string, epoch int64, footers ...uint64) *spb.MetaCommand {
	var files []*pb.TSFileRef
	for _, f := range footers {
		files = append(files, &pb.TSFileRef{BlockStoreUuid: "bs-" + ts, FooterBlock: f, Blocks: []uint64{f, f + 1000}})
	}
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{TserverUuid: ts,
		Reports: []*pb.CheckpointReport{{TabletId: id, Epoch: epoch, Tsfiles: files}}}}}
}

func restoreCmd(backup, table string) *spb.MetaCommand { return restoreCmdID(backup, table, "") }

func restoreCmdID(backup, table, id string) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_RestoreTable{RestoreTable: &spb.MetaRestoreTable{Backup: backup, Table: table, RequestId: id}}}
}

func footersOf(ts []*pb.TSFileRef) string {
	var out []uint64
	for _, f := range ts {
		out = append(out, f.FooterBlock)
	}
	return fmt.Sprint(out)
}

// TestBackupRecordsTheCut: a backup records each tablet's range and files as
// the metadata holds them, only when every tablet was flushed for it; it
// keeps its blocks live for GC after its table is deleted and its tablets
// compacted; a restore makes a new table of the same files.
func TestBackupRecordsTheCut(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m")) // t1 = ["", m), t2 = [m, "")
	f.mustApply(registerCmd("a", 1))
	t1, t2 := FormatTabletID(1), FormatTabletID(2)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"}))
	f.mustApply(checkpointCmd("a", t1, 1, 10))
	f.mustApply(checkpointCmd("a", t2, 1, 20, 21))

	bad := []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"a tablet not flushed", backupCmd("b", "t", 100, 200, t1), codes.Aborted},
		{"no table", backupCmd("b", "nope", 100, 200, t1, t2), codes.NotFound},
		{"expires at creation", backupCmd("b", "t", 100, 100, t1, t2), codes.InvalidArgument},
		{"bad name", backupCmd("a/b", "t", 100, 200, t1, t2), codes.InvalidArgument},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if c := apierr.CodeOf(f.apply(tc.cmd).Err); c != tc.want {
				t.Fatalf("code %v, want %v", c, tc.want)
			}
			_ = f.View(func(r *Reader) error {
				if bs, _ := r.Backups(); len(bs) != 0 {
					t.Fatalf("a refused command recorded %v", bs)
				}
				return nil
			})
		})
	}
	res := f.mustApply(backupCmd("b", "t", 100, 200, t1, t2))
	b := res.Backup
	if b.SourceTable != "t" || b.Schema.GetName() != "t" || b.State != pb.BackupState_BACKUP_STATE_READY || len(b.Tablets) != 2 ||
		footersOf(b.Tablets[0].Tsfiles) != "[10]" || footersOf(b.Tablets[1].Tsfiles) != "[20 21]" ||
		string(b.Tablets[1].Range.GetStartRow()) != "m" {
		t.Fatalf("backup %v", b)
	}
	if c := apierr.CodeOf(f.apply(backupCmd("b", "t", 100, 200, t1, t2)).Err); c != codes.AlreadyExists {
		t.Fatalf("second backup of one name: %v", c)
	}
	// A retried call (same request id) gets the backup its first attempt made.
	withID := func(id string) *spb.MetaCommand {
		cmd := backupCmd("r", "t", 100, 200, t1, t2)
		cmd.GetCreateBackup().RequestId = id
		return cmd
	}
	first := f.mustApply(withID("req-1")).Backup
	if again := f.mustApply(withID("req-1")).Backup; again == nil || again.RequestId != "req-1" || len(again.Tablets) != len(first.Tablets) {
		t.Fatalf("retried CreateBackup answered %v", again)
	}
	if c := apierr.CodeOf(f.apply(withID("req-2")).Err); c != codes.AlreadyExists {
		t.Fatalf("another call's backup of a taken name: %v", c)
	}
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteBackup{DeleteBackup: &spb.MetaDeleteBackup{Name: "r"}}})
	// A compaction after the cut replaces t2's files; the table is then deleted.
	f.mustApply(checkpointCmd("a", t2, 1, 30))
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteTable{DeleteTable: &spb.MetaDeleteTable{Name: "t"}}})
	_ = f.View(func(r *Reader) error {
		blocks, _, err := r.GCReferences("bs-a", "")
		if err != nil || fmt.Sprint(blocks) != "[10 20 21 1010 1020 1021]" {
			t.Errorf("GCReferences after the table's deletion = %v %v, want the backup's blocks", blocks, err)
		}
		if got := r.SharedFiles("bs-a", []uint64{10, 21, 30}); fmt.Sprint(got) != "[10 21]" {
			t.Errorf("SharedFiles = %v, want the backup's files only", got)
		}
		if got := r.SharedFiles("bs-b", []uint64{10}); len(got) != 0 {
			t.Errorf("SharedFiles of another store = %v", got)
		}
		return nil
	})

	// Restore: a new table at the backup's split points, with its files.
	if c := apierr.CodeOf(f.apply(restoreCmd("nope", "r")).Err); c != codes.NotFound {
		t.Fatalf("restore of a missing backup: %v", c)
	}
	f.mustApply(createCmd("taken"))
	if c := apierr.CodeOf(f.apply(restoreCmd("b", "taken")).Err); c != codes.AlreadyExists {
		t.Fatalf("restore over a table: %v", c)
	}
	res = f.mustApply(restoreCmdID("b", "r", "req-1"))
	// A retry of that restore (same id) is answered its tablets, changing
	// nothing; another id, or none, is AlreadyExists.
	again := f.mustApply(restoreCmdID("b", "r", "req-1"))
	if len(again.Tablets) != 2 || again.Tablets[0].TabletId != res.Tablets[0].TabletId || again.Tablets[1].TabletId != res.Tablets[1].TabletId {
		t.Fatalf("a retried restore answered %v, want the tablets %v", again.Tablets, res.Tablets)
	}
	for _, id := range []string{"req-2", ""} {
		if c := apierr.CodeOf(f.apply(restoreCmdID("b", "r", id)).Err); c != codes.AlreadyExists {
			t.Fatalf("restore over the restored table with id %q: %v, want AlreadyExists", id, c)
		}
	}
	if len(res.Tablets) != 2 || footersOf(res.Tablets[0].Tsfiles) != "[10]" || footersOf(res.Tablets[1].Tsfiles) != "[20 21]" ||
		res.Tablets[0].State != pb.TabletState_TABLET_STATE_UNASSIGNED || res.Tablets[0].Table != "r" {
		t.Fatalf("restored tablets %v", res.Tablets)
	}
	_ = f.View(func(r *Reader) error {
		s, err := r.Table("r")
		if err != nil || s.Name != "r" || s.Version == 0 {
			t.Errorf("restored schema %v %v", s, err)
		}
		ts, _ := r.TableTablets("r", []byte("z"), 1)
		if len(ts) != 1 || string(ts[0].Range.GetStartRow()) != "m" {
			t.Errorf("location of row z in the restored table: %v", ts)
		}
		return nil
	})

	// Expiry: a pass that saw an older expiry time deletes nothing.
	f.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_UpdateBackup{UpdateBackup: &spb.MetaUpdateBackup{Name: "b", ExpireTimeMicros: 500}}})
	if c := apierr.CodeOf(f.apply(&spb.MetaCommand{Cmd: &spb.MetaCommand_UpdateBackup{UpdateBackup: &spb.MetaUpdateBackup{Name: "b", ExpireTimeMicros: 50}}}).Err); c != codes.InvalidArgument {
		t.Fatalf("expiry before creation: %v", c)
	}
	del := func(expiredAt int64) *spb.MetaCommand {
		return &spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteBackup{DeleteBackup: &spb.MetaDeleteBackup{Name: "b", ExpiredAtMicros: expiredAt}}}
	}
	if c := apierr.CodeOf(f.apply(del(300)).Err); c != codes.FailedPrecondition {
		t.Fatalf("expiry pass before the new expiry time: %v", c)
	}
	f.mustApply(del(500))
	if c := apierr.CodeOf(f.apply(del(0)).Err); c != codes.NotFound {
		t.Fatalf("deleting a deleted backup: %v", c)
	}
	_ = f.View(func(r *Reader) error {
		// The restored table still names the files; the backup's other blocks are free.
		blocks, _, _ := r.GCReferences("bs-a", "")
		if fmt.Sprint(blocks) != "[10 20 21 1010 1020 1021]" {
			t.Errorf("GCReferences after the backup's deletion = %v, want the restored table's blocks", blocks)
		}
		if got := r.SharedFiles("bs-a", []uint64{10, 20}); fmt.Sprint(got) != "[10 20]" {
			t.Errorf("SharedFiles after the backup's deletion = %v: a restored table may still share them", got)
		}
		return nil
	})
}

// TestCopyAndImportBackup: a copy names its source's files and is ready at
// once; an import is recorded CREATING with ranges only, refuses a restore
// until its files are added and it is marked READY, and every file it
// names is kept by GC and marked shared from the command that added it.
func TestCopyAndImportBackup(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("t", "m"))
	f.mustApply(registerCmd("a", 1))
	t1, t2 := FormatTabletID(1), FormatTabletID(2)
	f.mustApply(assignCmd(&spb.MetaAssign_Item{TabletId: t1, TserverUuid: "a"}, &spb.MetaAssign_Item{TabletId: t2, TserverUuid: "a"}))
	f.mustApply(checkpointCmd("a", t1, 1, 10))
	f.mustApply(checkpointCmd("a", t2, 1, 20))
	f.mustApply(backupCmd("b", "t", 100, 200, t1, t2))

	record := func(copyOf, name string, b *pb.BackupMeta) *spb.MetaCommand {
		if b == nil {
			b = &pb.BackupMeta{}
		}
		b.Name, b.CreateTimeMicros, b.ExpireTimeMicros = name, 300, 400
		return &spb.MetaCommand{Cmd: &spb.MetaCommand_RecordBackup{RecordBackup: &spb.MetaRecordBackup{CopyOf: copyOf, Backup: b}}}
	}
	cp := f.mustApply(record("b", "c", nil)).Backup
	if cp.State != pb.BackupState_BACKUP_STATE_READY || cp.SourceTable != "t" || footersOf(cp.Tablets[1].Tsfiles) != "[20]" || cp.CreateTimeMicros != 300 {
		t.Fatalf("copy %v", cp)
	}
	ranges := []*pb.BackupTablet{{Range: &pb.RowRange{EndRow: []byte("k")}}, {Range: &pb.RowRange{StartRow: []byte("k")}}}
	imp := &pb.BackupMeta{SourceTable: "t", Schema: &pb.TableSchema{Name: "t"}, Tablets: ranges}
	for _, tc := range []struct {
		name string
		cmd  *spb.MetaCommand
		want codes.Code
	}{
		{"copy of a missing backup", record("nope", "x", nil), codes.NotFound},
		{"copy onto a taken name", record("b", "c", nil), codes.AlreadyExists},
		{"import without a schema", record("", "x", &pb.BackupMeta{Tablets: ranges}), codes.InvalidArgument},
		{"import of a bad schema", record("", "x", &pb.BackupMeta{Schema: &pb.TableSchema{Name: "a/b"}, Tablets: ranges}), codes.InvalidArgument},
		{"import of ranges that do not tile", record("", "x", &pb.BackupMeta{Schema: &pb.TableSchema{Name: "t"}, Tablets: ranges[1:]}), codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c := apierr.CodeOf(f.apply(tc.cmd).Err); c != tc.want {
				t.Fatalf("code %v, want %v", c, tc.want)
			}
		})
	}
	if b := f.mustApply(record("", "i", imp)).Backup; b.State != pb.BackupState_BACKUP_STATE_CREATING || len(b.Tablets) != 2 || len(b.Tablets[0].Tsfiles) != 0 {
		t.Fatalf("import begun %v", b)
	}
	if c := apierr.CodeOf(f.apply(restoreCmd("i", "r")).Err); c != codes.FailedPrecondition {
		t.Fatalf("restore of an import in progress: %v", c)
	}
	if c := apierr.CodeOf(f.apply(record("i", "x", nil)).Err); c != codes.FailedPrecondition {
		t.Fatalf("copy of an import in progress: %v", c)
	}
	add := func(name string, index int32, ready bool, footers ...uint64) *spb.MetaCommand {
		var files []*pb.TSFileRef
		for _, ft := range footers {
			files = append(files, &pb.TSFileRef{BlockStoreUuid: "bs-b", FooterBlock: ft, Blocks: []uint64{ft}})
		}
		return &spb.MetaCommand{Cmd: &spb.MetaCommand_AddBackupFiles{AddBackupFiles: &spb.MetaAddBackupFiles{Name: name, Ready: ready,
			Tablets: []*spb.MetaAddBackupFiles_Tablet{{Index: index, Tsfiles: files}}}}}
	}
	if c := apierr.CodeOf(f.apply(add("i", 2, false, 7)).Err); c != codes.InvalidArgument {
		t.Fatalf("files for a tablet the import lacks: %v", c)
	}
	if c := apierr.CodeOf(f.apply(add("b", 0, false, 7)).Err); c != codes.FailedPrecondition {
		t.Fatalf("files added to a ready backup: %v", c)
	}
	f.mustApply(add("i", 0, false, 7))
	f.mustApply(add("i", 0, false, 7)) // a retry adds nothing
	// A retried begin (same request id) answers the import it began.
	withID := func(id string) *spb.MetaCommand {
		b := proto.Clone(imp).(*pb.BackupMeta)
		b.RequestId = id
		return record("", "j", b)
	}
	f.mustApply(withID("req-1"))
	if b := f.mustApply(withID("req-1")).Backup; b.State != pb.BackupState_BACKUP_STATE_CREATING {
		t.Fatalf("a retried begin answered %v", b)
	}
	if c := apierr.CodeOf(f.apply(withID("req-2")).Err); c != codes.AlreadyExists {
		t.Fatalf("another import under a taken name: %v", c)
	}
	_ = f.View(func(r *Reader) error {
		blocks, _, _ := r.GCReferences("bs-b", "")
		if fmt.Sprint(blocks) != "[7]" || fmt.Sprint(r.SharedFiles("bs-b", []uint64{7})) != "[7]" {
			t.Errorf("an imported file: GC references %v, shared %v", blocks, r.SharedFiles("bs-b", []uint64{7}))
		}
		return nil
	})
	if b := f.mustApply(add("i", 1, true, 8, 9)).Backup; b.State != pb.BackupState_BACKUP_STATE_READY || footersOf(b.Tablets[1].Tsfiles) != "[8 9]" ||
		footersOf(b.Tablets[0].Tsfiles) != "[7]" {
		t.Fatalf("import done %v", b)
	}
	ready := &spb.MetaCommand{Cmd: &spb.MetaCommand_AddBackupFiles{AddBackupFiles: &spb.MetaAddBackupFiles{Name: "i", Ready: true}}}
	if b := f.mustApply(ready).Backup; b.State != pb.BackupState_BACKUP_STATE_READY { // a retried last call
		t.Fatalf("ready again: %v", b)
	}
	res := f.mustApply(restoreCmd("i", "r"))
	if len(res.Tablets) != 2 || footersOf(res.Tablets[0].Tsfiles) != "[7]" || string(res.Tablets[1].Range.GetStartRow()) != "k" {
		t.Fatalf("restored import %v", res.Tablets)
	}
}
