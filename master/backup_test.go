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
