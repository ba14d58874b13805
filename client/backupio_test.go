package client_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet/backupfile"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
)

// allCells reads every cell of table, every version, as one line per cell.
func allCells(t *testing.T, cl *client.Client, table string) []string {
	t.Helper()
	ctx := ctxT(t)
	tbl, err := cl.Open(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = tbl.Scan(ctx, "", "", func(r client.Row) bool {
		for _, c := range r.Cells {
			out = append(out, fmt.Sprintf("%s %s:%s @%d = %q", r.Key, c.Family, c.Qualifier, c.Timestamp, c.Value))
		}
		return true
	})
	if err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	return out
}

// TestExportImportAcrossClusters: a backup exported from one cluster (by
// the tservers streaming its files' entries, nothing read from the shared
// root) and imported into a second, with its own data directories, restores
// to a table whose every cell, every version, equals the source's at the
// backup, at the same split points; the import's files live in the second
// cluster's stores and survive the export directory's removal and a GC
// pass. A second import of one export, a corrupt data file and a manifest
// of another format version are refused, the latter two naming the file.
func TestExportImportAcrossClusters(t *testing.T) {
	t.Parallel()
	src := inproc.Start(t, inproc.Options{TServers: 2})
	dst := inproc.Start(t, inproc.Options{TServers: 2})
	ctx := ctxT(t)
	scl, dcl := src.Client(), dst.Client()
	spec := client.TableSpec{Name: "orders", SplitKeys: []string{"row100", "row200"}, Families: []client.FamilySpec{
		{Name: "cf", MaxVersions: 3}, {Name: "z", Compression: client.CompressionZstd}}}
	if err := src.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	tbl, err := scl.Open(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	write := func(from, to int, tag string) {
		for i := from; i < to; i++ {
			m := client.NewMutation()
			m.Set("cf", "v", int64(1000+i), []byte(fmt.Sprintf("%s-%d", tag, i)))
			m.Set("z", fmt.Sprintf("q%d", i%5), int64(2000+i), bytes.Repeat([]byte(tag), i%40))
			if err := tbl.Apply(ctx, rowKey(i), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 300, "a")
	if err := src.Checkpoint(ctx); err != nil { // a second file per tablet, and versions across files
		t.Fatal(err)
	}
	write(0, 150, "b")
	for i := 20; i < 40; i++ { // tombstones the export must carry
		m := client.NewMutation()
		m.DeleteRow()
		if err := tbl.Apply(ctx, rowKey(i), m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := scl.CreateBackup(ctx, "orders", "b1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := allCells(t, scl, "orders")
	write(0, 10, "after") // not in the backup

	dir := filepath.Join(t.TempDir(), "export")
	res, err := scl.ExportBackup(ctx, "b1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backup != "b1" || res.Tablets != 3 || res.Files < 3 || res.Entries == 0 {
		t.Fatalf("export %+v", res)
	}
	if _, err := scl.ExportBackup(ctx, "b1", dir); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second export into one directory: %v, want AlreadyExists", err)
	}

	expires := time.Now().Add(2 * time.Hour).Truncate(time.Microsecond)
	imp, err := dcl.ImportBackup(ctx, dir, "orders-in", expires)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Files != res.Files || imp.Entries != res.Entries {
		t.Fatalf("import %+v of export %+v", imp, res)
	}
	info, err := dcl.GetBackup(ctx, "orders-in")
	if err != nil || !info.Ready || info.SourceTable != "orders" || !info.Expires.Equal(expires) || fmt.Sprint(info.SplitKeys) != "[row100 row200]" {
		t.Fatalf("imported backup %+v %v", info, err)
	}
	if _, err := dcl.ImportBackup(ctx, dir, "orders-in", expires); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second import under one name: %v, want AlreadyExists", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, i := range dst.Running() {
		if _, err := dst.TServer(i).CollectOrphans(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dcl.RestoreTable(ctx, "orders-in", "orders"); err != nil {
		t.Fatal(err)
	}
	if err := dst.WaitServing(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	got := allCells(t, dcl, "orders")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := 0; i < len(got) && i < len(want); i++ {
			if got[i] != want[i] {
				t.Errorf("first difference at cell %d: %s, want %s", i, got[i], want[i])
				break
			}
		}
		t.Fatalf("restored table has %d cells, the source had %d at the backup", len(got), len(want))
	}
	ti, err := dcl.Tablets(ctx, "orders")
	if err != nil || len(ti) != 3 || ti[1].StartRow != "row100" || ti[2].StartRow != "row200" {
		t.Fatalf("restored tablets %+v %v", ti, err)
	}
	tables, err := dcl.DescribeTables(ctx)
	if err != nil || len(tables) != 1 || len(tables[0].Families) != 2 || tables[0].Families[1].Compression != client.CompressionZstd {
		t.Fatalf("restored schema %+v %v", tables, err)
	}

	// Damage: a flipped byte in a data file; a manifest of a later version.
	damaged := func(t *testing.T, edit func(dir string)) string {
		d := filepath.Join(t.TempDir(), "export")
		if _, err := scl.ExportBackup(ctx, "b1", d); err != nil {
			t.Fatal(err)
		}
		edit(d)
		return d
	}
	t.Run("corrupt data file", func(t *testing.T) {
		var path string
		d := damaged(t, func(d string) {
			path = filepath.Join(d, backupfile.DataPath(1, 0))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		_, err := dcl.ImportBackup(ctx, d, "bad", expires)
		if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "at offset") {
			t.Fatalf("import of a corrupt export: %v, want DataLoss naming %s and an offset", err, path)
		}
		if _, err := dcl.GetBackup(ctx, "bad"); status.Code(err) != codes.NotFound {
			t.Fatalf("the failed import's backup: %v, want NotFound (deleted)", err)
		}
	})
	t.Run("unknown version", func(t *testing.T) {
		d := damaged(t, func(d string) {
			path := filepath.Join(d, backupfile.ManifestName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(b[8:], backupfile.FormatVersion+1)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		_, err := dcl.ImportBackup(ctx, d, "bad2", expires)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "format version 2") {
			t.Fatalf("import of a later version: %v", err)
		}
	})
	t.Run("copy outlives its source", func(t *testing.T) {
		if _, err := scl.CopyBackup(ctx, "b1", "b1-copy", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := scl.DeleteBackup(ctx, "b1"); err != nil {
			t.Fatal(err)
		}
		if err := scl.DeleteTable(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		// Once no tserver holds the deleted table's tablets, an orphan pass
		// keeps only what metadata names: the copy's files.
		for _, i := range src.Running() {
			wait.ForCtx(t, ctx, "the deleted table's tablets dropped", func() error {
				st, err := src.TServer(i).Status(ctx, &pb.StatusRequest{})
				if err == nil && len(st.Tablets) > 0 {
					err = fmt.Errorf("tserver %d holds %d tablets", i, len(st.Tablets))
				}
				return err
			})
			wait.ForCtx(t, ctx, "an orphan pass", func() error { _, err := src.TServer(i).CollectOrphans(ctx, 0); return err })
		}
		if _, err := scl.RestoreTable(ctx, "b1-copy", "again"); err != nil {
			t.Fatal(err)
		}
		if err := src.WaitServing(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		if got := allCells(t, scl, "again"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("table restored from the copy has %d cells, want %d", len(got), len(want))
		}
		if _, err := scl.CopyBackup(ctx, "b1", "b1-copy2", time.Now().Add(time.Hour)); status.Code(err) != codes.NotFound {
			t.Fatalf("copy of a deleted backup: %v, want NotFound", err)
		}
	})
	t.Run("no manifest", func(t *testing.T) {
		_, err := dcl.ImportBackup(ctx, t.TempDir(), "bad3", expires)
		if status.Code(err) != codes.NotFound {
			t.Fatalf("import of an empty directory: %v, want NotFound", err)
		}
	})
}
