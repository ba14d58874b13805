package tserver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"bighive/client"
	"bighive/storage/vfs"
	"bighive/storage/wal"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// lockedBuffer collects a logger's output for a test to search.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCorruptLogKeepsTabletUnavailable: a dead tserver's log has one
// corrupted length field in the middle. Neither the log split nor the
// tablet's own replay may read that as a torn tail and serve the tablet
// without the records after it: both fail with the corruption's file and
// offset, and the tablet stays unavailable.
func TestCorruptLogKeepsTabletUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("a corrupt log refused by the log split and, after the split's timeout, by the replay: runs without -short")
	}
	n := startNode(t, 1, time.Second, func(_ int, o *tserver.Options) { o.MemLimit = 64 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// More than two of the log's flush windows (1 MiB) of records, so the
	// middle lies well outside the window of the end.
	val := bytes.Repeat([]byte("v"), 10<<10)
	const rows = 300
	for i := 0; i < rows; i++ {
		if err := tbl.Put(ctx, fmt.Sprintf("k%04d", i), "cf", "q", val); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if err := n.servers[0].Close(); err != nil {
		t.Fatal(err)
	}
	n.servers[0] = nil

	// Corrupt the length of the middle record of the dead tserver's log.
	prefix := wal.FormatPrefix(n.opts[0].Listen)
	type at struct {
		file wal.Position
		off  int64
	}
	var recs []at
	if _, err := wal.Replay(ctx, vfs.Default, n.root, wal.Position{Prefix: prefix}, func(r *wal.Record) error {
		recs = append(recs, at{r.File, r.Offset})
		return nil
	}); err != nil || len(recs) < rows {
		t.Fatalf("replay of the dead log: %d records, %v", len(recs), err)
	}
	mid := recs[len(recs)/2]
	path := wal.FilePath(n.root, mid.file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[mid.off+3] ^= 0x01 // the frame now claims 16 MiB more than it holds: past the end of the file
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("corruption in %s at offset %d", path, mid.off)

	// Another tserver takes over the dead one's tablets.
	logs := &lockedBuffer{}
	o := tserver.Options{Listen: freeAddr(t), Masters: []string{n.master.Addr()}, Root: n.root, MemLimit: 64 << 20,
		HeartbeatInterval: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	n.opts = append(n.opts, o)
	n.servers = append(n.servers, nil)
	n.start(1)

	// The log split fails with the corruption; after the split times out
	// the tablet's own replay does too.
	for _, msg := range []string{"log split task failed", "tablet load failed"} {
		wait.ForCtx(t, ctx, fmt.Sprintf("%q naming %q", msg, want), func() error {
			if served := matching(logs.String(), `msg="tablet serving"`); served != "" {
				t.Fatalf("the tablet serves over a corrupt log:\n%s", served)
			}
			if lines := matching(logs.String(), msg); strings.Contains(lines, want) {
				return nil
			} else if lines != "" && !strings.Contains(lines, "corruption") {
				t.Fatalf("%s for another reason:\n%s", msg, lines)
			}
			return fmt.Errorf("not logged; log:\n%s", logs.String())
		})
	}
	tablets, err := c.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tablets {
		if tb.State == "serving" {
			t.Fatalf("tablet %s serves over a corrupt log: %+v", tb.ID, tb)
		}
	}
	gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
	defer gcancel()
	if r, err := tbl.Get(gctx, fmt.Sprintf("k%04d", rows-1)); err == nil {
		t.Fatalf("read of a row after the corruption succeeded: %+v", r)
	}
}

// matching returns the lines of s that contain sub.
func matching(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
