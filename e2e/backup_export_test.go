package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// scanAll reads every row of table as key → value of cf:q.
func scanAll(t *testing.T, ctx context.Context, cl *client.Client, table string) map[string]string {
	t.Helper()
	tbl, err := cl.Open(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
		if v, ok := r.Value("cf", "q"); ok {
			got[r.Key] = string(v)
		}
		return true
	}); err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	return got
}

// TestBackupExportImportProcesses: on clusters of real processes, each with
// its own shared root, a backup is exported from the first after one of its
// tservers was SIGKILLed (the export reads the dead tserver's files through
// the live ones, and a file first tried on the dead one goes to the next),
// imported into the second, and restored there with every row the source
// held at the backup.
func TestBackupExportImportProcesses(t *testing.T) {
	skipShort(t, "backup export and import across clusters")
	src, scl := startCluster(t, cluster.Options{TServers: 3})
	dst, dcl := startCluster(t, cluster.Options{TServers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, src, scl, "orders", 6)
	want := map[string]string{}
	for i := 0; i < 3000; i += 3 {
		if err := tbl.Put(ctx, rowKey(i), "cf", "q", value(i)); err != nil {
			t.Fatal(err)
		}
		want[rowKey(i)] = string(value(i))
	}
	if _, err := scl.CreateBackup(ctx, "orders", "b", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(ctx, rowKey(1), "cf", "q", []byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := src.KillTServer(0); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "export")
	res, err := scl.ExportBackup(ctx, "b", dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tablets != 6 || res.Entries != int64(len(want)) {
		t.Fatalf("export %+v, want 6 tablets and %d entries", res, len(want))
	}
	imp, err := dcl.ImportBackup(ctx, dir, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if imp.Backup != "b" || imp.Entries != res.Entries {
		t.Fatalf("import %+v of export %+v", imp, res)
	}
	if _, err := dcl.RestoreTable(ctx, "b", "orders"); err != nil {
		t.Fatal(err)
	}
	if err := dst.WaitServing(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	got := scanAll(t, ctx, dcl, "orders")
	if len(got) != len(want) {
		t.Fatalf("restored %d rows, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("row %s = %q, want %q", k, got[k], v)
		}
	}
}
