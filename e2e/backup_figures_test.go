package e2e_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

var backupMB = flag.Int("backup.mb", 24, "MB of values TestBackupFigures loads (README's figures: 1024)")

// TestBackupFigures measures what README's Backups section reports: the
// time to back up a freshly loaded table (its write buffers flushed by
// the backup), to back it up again unchanged, and to restore it until
// every tablet serves; and the space each backup takes (what it alone
// keeps alive, what it shares). Then it checks the restored table: every
// row, with its value. The size is -backup.mb (small in CI).
func TestBackupFigures(t *testing.T) {
	skipShort(t, "backup and restore figures")
	c, cl := startCluster(t, cluster.Options{TServers: 2, Flags: []string{"--split-threshold=-1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const tablets, valueSize, batch = 8, 1000, 100
	rows := *backupMB << 20 / valueSize
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "big", Families: []client.FamilySpec{{Name: "cf", MaxVersions: 1}},
		SplitKeys: bkSplitKeys(tablets)}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("r%05d-%09d", i*7919%100_000, i) }
	// A row's value: its index, then bytes of a generator seeded by it
	// (incompressible, as the bench's values are).
	value := func(i int) []byte {
		v := make([]byte, valueSize)
		binary.BigEndian.PutUint64(v, uint64(i))
		x := uint64(i)*0x9E3779B97F4A7C15 | 1
		for j := 8; j < valueSize; j++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v[j] = byte(x)
		}
		return v
	}

	// The load: bulk batches from 4 writers.
	loadStart := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := w * batch; lo < rows; lo += 4 * batch {
				var keys []string
				var ms []*client.Mutation
				for i := lo; i < min(lo+batch, rows); i++ {
					m := client.NewMutation()
					m.Set("cf", "v", client.ServerTime, value(i))
					keys, ms = append(keys, key(i)), append(ms, m)
				}
				rowErrs, err := tbl.ApplyBulk(ctx, keys, ms)
				if err == nil {
					for _, e := range rowErrs {
						if e != nil {
							err = e
							break
						}
					}
				}
				if err != nil {
					errs <- fmt.Errorf("bulk at row %d: %w", lo, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(loadStart)

	expire := time.Now().Add(24 * time.Hour)
	start := time.Now()
	b1, err := cl.CreateBackup(ctx, "big", "fresh", expire)
	if err != nil {
		t.Fatal(err)
	}
	fresh := time.Since(start)
	start = time.Now()
	b2, err := cl.CreateBackup(ctx, "big", "unchanged", expire)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := time.Since(start)
	if b2.Files != b1.Files || b2.Bytes != b1.Bytes {
		t.Fatalf("a backup of the unchanged table names %d files, %d bytes; the first %d files, %d bytes", b2.Files, b2.Bytes, b1.Files, b1.Bytes)
	}
	// Both share every file with the table: neither keeps a byte alive alone.
	for _, name := range []string{"fresh", "unchanged"} {
		b, err := cl.GetBackup(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if b.ExclusiveBytes != 0 || b.SharedBytes != b1.Bytes {
			t.Fatalf("backup %s of a live table: %d bytes exclusive, %d shared; want 0 and %d", name, b.ExclusiveBytes, b.SharedBytes, b1.Bytes)
		}
	}

	start = time.Now()
	if _, err := cl.RestoreTable(ctx, "unchanged", "big2"); err != nil {
		t.Fatal(err)
	}
	restoreCall := time.Since(start)
	if err := c.WaitServing(ctx, "big2"); err != nil {
		t.Fatal(err)
	}
	restored := time.Since(start)

	// Every row of the restored table, with its value.
	restoredTbl, err := cl.Open(ctx, "big2")
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, rows)
	n := 0
	scanStart := time.Now()
	var bad error
	if err := restoredTbl.Scan(ctx, "", "", func(r client.Row) bool {
		v, ok := r.Value("cf", "v")
		if !ok || len(v) != valueSize {
			bad = fmt.Errorf("row %q: value of %d bytes (present %v)", r.Key, len(v), ok)
			return false
		}
		i := int(binary.BigEndian.Uint64(v))
		if i < 0 || i >= rows || key(i) != r.Key || !bytes.Equal(v, value(i)) || seen[i] {
			bad = fmt.Errorf("row %q holds the value of row %d (or a repeat)", r.Key, i)
			return false
		}
		seen[i] = true
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if bad != nil {
		t.Fatal(bad)
	}
	if n != rows {
		t.Fatalf("restored table has %d rows, want %d", n, rows)
	}
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	t.Logf("table: %d rows of %d B (%d MiB of values) in %d tablets, loaded in %v", rows, valueSize, *backupMB, tablets, loaded.Round(time.Millisecond))
	t.Logf("backup of the freshly loaded table: %v (%d TSFiles, %.1f MiB, its buffers flushed by the backup)", fresh.Round(time.Millisecond), b1.Files, mb(b1.Bytes))
	t.Logf("backup of the unchanged table: %v; space of either: %.1f MiB exclusive, %.1f MiB shared with the table", unchanged.Round(time.Millisecond), mb(0), mb(b1.Bytes))
	t.Logf("restore: RestoreTable returned in %v, every tablet serving after %v; full scan of the restored table %v", restoreCall.Round(time.Millisecond), restored.Round(time.Millisecond), time.Since(scanStart).Round(time.Millisecond))

	// Dropping the source leaves the backups holding the files alone.
	if err := cl.DeleteTable(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	b, err := cl.GetBackup(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the source table is deleted: backup fresh keeps %.1f MiB alone, shares %.1f MiB (with backup unchanged and table big2)", mb(b.ExclusiveBytes), mb(b.SharedBytes))
	if b.ExclusiveBytes+b.SharedBytes != b1.Bytes {
		t.Fatalf("backup fresh: %d exclusive + %d shared bytes, want %d in all", b.ExclusiveBytes, b.SharedBytes, b1.Bytes)
	}
}
