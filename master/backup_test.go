package master

import (
	"fmt"
	"testing"
	"time"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
	"bighive/testkit/wait"
)

// TestBackupExpiry: the leader's periodic pass deletes the backups whose
// expiry time passed, and only those: one whose time UpdateBackup moved
// on stays.
func TestBackupExpiry(t *testing.T) {
	c := startCluster(t, 1, func(cfg *Config) { cfg.BackupExpiryInterval = 20 * time.Millisecond })
	m := c.masters[c.leader(10*time.Second)]
	ctx := ctxT(t, 30*time.Second)
	if _, err := m.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("t", "cf")}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := m.view(func(r *meta.Reader) error {
		ts, err := r.TableTablets("t", nil, 0)
		for _, tm := range ts {
			ids = append(ids, tm.TabletId)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// Recorded directly: the flushes CreateBackup runs first need tservers.
	for name, expire := range map[string]time.Duration{"soon": 300 * time.Millisecond, "later": time.Hour, "extended": 300 * time.Millisecond} {
		if _, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_CreateBackup{CreateBackup: &spb.MetaCreateBackup{
			Name: name, Table: "t", CreateTimeMicros: now.UnixMicro(), ExpireTimeMicros: now.Add(expire).UnixMicro(), Flushed: ids}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.UpdateBackup(ctx, &pb.UpdateBackupRequest{Name: "extended", ExpireTimeMicros: now.Add(time.Hour).UnixMicro()}); err != nil {
		t.Fatal(err)
	}
	names := func() string {
		resp, err := m.ListBackups(ctx, &pb.ListBackupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range resp.Backups {
			out = append(out, b.Name)
		}
		return fmt.Sprint(out)
	}
	wait.For(t, 10*time.Second, "the expired backup deleted", func() error {
		if got := names(); got != "[extended later]" {
			return fmt.Errorf("backups %s", got)
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond) // a few more passes
	if got := names(); got != "[extended later]" {
		t.Fatalf("backups %s after more passes, want the unexpired ones", got)
	}
}

// TestBackupSpace: a backup's exclusive bytes are those of the distinct
// files no tablet and no other backup names; the rest of its files are
// shared. A file named twice within one backup counts once.
func TestBackupSpace(t *testing.T) {
	file := func(store string, footer uint64, size int64) *pb.TSFileRef {
		return &pb.TSFileRef{BlockStoreUuid: store, FooterBlock: footer, SizeBytes: size}
	}
	backup := func(name string, tablets ...[]*pb.TSFileRef) *pb.BackupMeta {
		b := &pb.BackupMeta{Name: name}
		for _, fs := range tablets {
			b.Tablets = append(b.Tablets, &pb.BackupTablet{Tsfiles: fs})
		}
		return b
	}
	a1, a2, a3 := file("a", 1, 100), file("a", 2, 20), file("a", 3, 3)
	b1 := file("b", 1, 1000) // same footer as a1, another store: another file
	for _, tc := range []struct {
		name    string
		live    []*pb.TSFileRef
		backups []*pb.BackupMeta
		want    map[string][2]int64 // exclusive, shared
	}{
		{"table unchanged: all shared with it", []*pb.TSFileRef{a1, a2}, []*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1}, []*pb.TSFileRef{a2})},
			map[string][2]int64{"x": {0, 120}}},
		{"table deleted: all its own", nil, []*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1, a2})},
			map[string][2]int64{"x": {120, 0}}},
		{"table compacted: the replaced files are its own", []*pb.TSFileRef{a3}, []*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1, a2})},
			map[string][2]int64{"x": {120, 0}}},
		{"two backups of a deleted table share what both name", nil,
			[]*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1, a2}), backup("y", []*pb.TSFileRef{a2, a3})},
			map[string][2]int64{"x": {100, 20}, "y": {3, 20}}},
		{"a file in two tablets of one backup counts once", nil, []*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1}, []*pb.TSFileRef{a1, a2})},
			map[string][2]int64{"x": {120, 0}}},
		{"files are named by store and footer", []*pb.TSFileRef{a1}, []*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1, b1})},
			map[string][2]int64{"x": {1000, 100}}},
		{"a restored table shares the backup's files", []*pb.TSFileRef{a2}, []*pb.BackupMeta{backup("x", []*pb.TSFileRef{a1, a2})},
			map[string][2]int64{"x": {100, 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := map[fileKey]bool{}
			for _, f := range tc.live {
				live[fileKey{f.BlockStoreUuid, f.FooterBlock}] = true
			}
			setBackupSpace(tc.backups, live, nil)
			for _, b := range tc.backups {
				if got := [2]int64{b.ExclusiveBytes, b.SharedBytes}; got != tc.want[b.Name] {
					t.Errorf("backup %s: exclusive, shared = %v, want %v", b.Name, got, tc.want[b.Name])
				}
			}
		})
	}
}
