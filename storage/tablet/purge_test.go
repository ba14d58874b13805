package tablet

import (
	"context"
	"testing"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
)

// TestMajorCompactionPurgesTombstonesOnlyWithTheOldestFile: a major
// compaction of the two newest of three files keeps the row tombstone (the
// oldest file holds the cells it hides); one that includes the oldest file
// drops it with the cells, keeping only the entry of highest sequence; the
// row stays deleted throughout.
func TestMajorCompactionPurgesTombstonesOnlyWithTheOldestFile(t *testing.T) {
	clock := &fakeClock{}
	clock.us.Store(10_000)
	tb := openTablet(t, clock)
	ctx := context.Background()
	write := func(row string, ops ...mutation.Op) { t.Helper(); writeRow(t, tb, row, ops...) }
	flush := func() { t.Helper(); flushActive(t, tb) }
	set := func(q string) mutation.Op {
		return mutation.Op{Kind: mutation.SetCell, Family: "a", Qualifier: []byte(q), Timestamp: mutation.ServerTime, Value: []byte("v")}
	}
	deleted := func(stage string) {
		t.Helper()
		if _, found, err := tb.Get(ctx, []byte("r"), ReadOptions{}); err != nil || found {
			t.Fatalf("%s: deleted row r found=%v err=%v", stage, found, err)
		}
		if _, found, err := tb.Get(ctx, []byte("s"), ReadOptions{}); err != nil || !found {
			t.Fatalf("%s: row s found=%v err=%v", stage, found, err)
		}
	}
	write("r", set("x"), set("y")) // the oldest file: the cells
	flush()
	write("r", mutation.Op{Kind: mutation.DeleteRow}) // the tombstone
	flush()
	write("s", set("x")) // the newest file
	flush()
	deleted("before compacting")
	files := tb.Files() // newest first
	refs := func(fs ...TSFileInfo) []blockstore.BlockRef {
		var out []blockstore.BlockRef
		for _, f := range fs {
			out = append(out, f.FooterRef())
		}
		return out
	}
	newer, err := tb.CompactFiles(ctx, refs(files[0], files[1]), true)
	if err != nil {
		t.Fatal(err)
	}
	if newer.Entries != 2 { // s:x and the tombstone
		t.Fatalf("major compaction of the newer files kept %d entries, want 2 (the tombstone stays)", newer.Entries)
	}
	if err := tb.InstallCompacted(refs(files[0], files[1]), newer); err != nil {
		t.Fatal(err)
	}
	deleted("after compacting the newer files")
	files = tb.Files()
	all, err := tb.CompactFiles(ctx, refs(files...), true)
	if err != nil {
		t.Fatal(err)
	}
	if all.Entries != 1 || all.MaxSeq != files[0].MaxSeq {
		t.Fatalf("major compaction of every file kept %d entries up to sequence %d, want 1 (s:x) of sequence %d", all.Entries, all.MaxSeq, files[0].MaxSeq)
	}
	if err := tb.InstallCompacted(refs(files...), all); err != nil {
		t.Fatal(err)
	}
	deleted("after compacting every file")
}
