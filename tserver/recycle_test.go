package tserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"bighive/storage/vfs"
	"bighive/storage/wal"
	"bighive/tserver"
)

// recycledLogFiles counts the log files of prefix whose header says they
// reuse a retired file (format version 2, flags bit 0), and among them
// those that hold an earlier life's bytes after their data.
func recycledLogFiles(t *testing.T, root, prefix string) (recycled, stale int) {
	t.Helper()
	files, err := wal.Files(vfs.Default, root, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(wal.FilePath(root, p))
		if err != nil || len(b) < 36 || string(b[:8]) != "BHIVEWAL" || binary.LittleEndian.Uint16(b[8:]) != 2 ||
			binary.LittleEndian.Uint32(b[32:])&1 == 0 {
			continue
		}
		recycled++
		if rep, err := wal.ReplayFile(vfs.Default, wal.FilePath(root, p), nil); err == nil && rep.Size > rep.End {
			stale++
		}
	}
	return recycled, stale
}

// TestLogRecoveryReadsRecycledFiles: a tserver whose checkpoints and log
// GC make it write into recycled log files stops; another tserver takes
// its tablets over, reading the dead one's log (recycled files with an
// earlier life's frames after their data among them), and every
// acknowledged write reads back.
func TestLogRecoveryReadsRecycledFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("a failover replaying a dead tserver's recycled log files: runs without -short")
	}
	n := startNode(t, 1, time.Second, func(_ int, o *tserver.Options) { o.MemLimit = 256 << 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := n.client(ctx)
	tbl := createServing(t, ctx, c, "k2000")
	prefix := wal.FormatPrefix(n.opts[0].Listen)
	want := map[string][]byte{}
	val := bytes.Repeat([]byte("v"), 1000)
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%04d", i*7%4000)
		v := fmt.Appendf(nil, "%d-%s", i, val[:i%1000])
		if err := tbl.Put(ctx, k, "cf", "q", v); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		want[k] = v
		if i%200 != 199 {
			continue
		}
		if r, s := recycledLogFiles(t, n.root, prefix); r > 0 {
			t.Logf("after %d puts: %d recycled log files, %d with stale frames after their data", i+1, r, s)
			break
		}
		if i > 8000 {
			t.Fatal("the tserver never wrote into a recycled log file")
		}
	}
	if err := n.servers[0].Close(); err != nil {
		t.Fatal(err)
	}
	n.servers[0] = nil
	if r, _ := recycledLogFiles(t, n.root, prefix); r == 0 {
		t.Fatal("no recycled file left in the stopped tserver's log")
	}

	o := n.opts[0]
	o.Listen = freeAddr(t)
	n.opts = append(n.opts, o)
	n.servers = append(n.servers, nil)
	n.start(1)
	waitServing(t, ctx, c, "t")
	for k, v := range want {
		r, err := tbl.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if len(r.Cells) == 0 || !bytes.Equal(r.Cells[0].Value, v) {
			t.Fatalf("get %s: %d cells, want %q...", k, len(r.Cells), v[:min(len(v), 10)])
		}
	}
}
