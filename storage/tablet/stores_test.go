package tablet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

// writeFile writes rows [0, n) named prefix+i as one TSFile of a tablet
// over store (named uuid) and returns it.
func writeFile(t *testing.T, store blockstore.Manager, uuid, prefix string, n int) TSFileInfo {
	t.Helper()
	w, err := Open(Options{ID: "w-" + uuid, Schema: testSchema(), Store: store, StoreUUID: uuid})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < n; i++ {
		m := &mutation.RowMutation{Row: fmt.Appendf(nil, "%s%03d", prefix, i), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: int64(100 + i), Value: fmt.Appendf(nil, "%s%03d", prefix, i)}}}
		if err := w.AssignTimestamps(m); err != nil {
			t.Fatal(err)
		}
		if err := w.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	w.SwapBuffers()
	info, err := w.FlushStandby(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Store != uuid {
		t.Fatalf("file %s does not carry its store %q", info.FooterRef(), uuid)
	}
	return info
}

// TestFilesOfTwoStoresWithEqualIDs: a tablet that moved reads a file of
// another store whose block IDs equal those of a file in its own store.
// Reads through one cache see each file's own rows, a compaction names
// its input by (store, footer) and replaces that file only, and the other
// store's file is released exactly once when the tablet stops reading it.
func TestFilesOfTwoStoresWithEqualIDs(t *testing.T) {
	ctx := context.Background()
	a, b := newStore(t), newStore(t)
	start := blockstore.BlockID(uint64(time.Now().UnixMicro()) + 1<<40)
	a.NotifyBlockID(start)
	b.NotifyBlockID(start)
	const rows = 30
	fa := writeFile(t, a, "A", "a", rows)
	fb := writeFile(t, b, "B", "b", rows)
	if fa.Footer != fb.Footer {
		t.Fatalf("footers %s and %s differ; the test needs equal IDs", fa.FooterRef(), fb.FooterRef())
	}
	released := 0
	tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: b, StoreUUID: "B",
		Cache: blockcache.New(blockcache.Options{}),
		Files: []FileRef{{Footer: fb.FooterRef()}, {Footer: fa.FooterRef(), Store: a, Release: func() { released++ }}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	check := func(stage string) {
		t.Helper()
		for _, p := range []string{"a", "b"} {
			for i := 0; i < rows; i++ {
				key := fmt.Sprintf("%s%03d", p, i)
				r, ok, err := tb.Get(ctx, []byte(key), ReadOptions{})
				if err != nil || !ok || len(r.Cells) != 1 || string(r.Cells[0].Value) != key {
					t.Fatalf("%s: get %s = %+v %v %v", stage, key, r, ok, err)
				}
			}
		}
	}
	check("open")

	info, err := tb.CompactFiles(ctx, []blockstore.BlockRef{fa.FooterRef()}, false)
	if err != nil {
		t.Fatal(err)
	}
	if info.Entries != rows || info.Store != "B" {
		t.Fatalf("compacted %d entries into store %q, want A's %d rows into B", info.Entries, info.Store, rows)
	}
	if err := tb.InstallCompacted([]blockstore.BlockRef{fa.FooterRef()}, info); err != nil {
		t.Fatal(err)
	}
	files := tb.Files()
	if len(files) != 2 || files[0].FooterRef() != fb.FooterRef() || files[1].FooterRef() != info.FooterRef() {
		t.Fatalf("read set after the compaction: %v", files)
	}
	if released != 1 {
		t.Fatalf("A's file released %d times after the compaction replaced it, want 1", released)
	}
	check("compacted")
	tb.Close()
	if released != 1 {
		t.Fatalf("A's file released %d times after Close, want 1", released)
	}
}
