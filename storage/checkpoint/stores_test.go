package checkpoint_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/checkpoint/localmeta"
	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/tablet/blockcache"
)

// Two tservers' block stores, named "store-a" and "store-b" in the tablet
// metadata, whose ID counters are forced to the same start, so the same
// sequence of writes gets the same block IDs in both.
const (
	storeA = "store-a"
	storeB = "store-b"
)

func openStore(t *testing.T, dir string, readOnly bool) blockstore.Manager {
	t.Helper()
	m, _, err := blockstore.Open(blockstore.Options{Dirs: []string{dir}, ReadOnly: readOnly, PreallocateStep: 1 << 20, Logger: quiet})
	if err != nil {
		t.Fatalf("open block store %s: %v", dir, err)
	}
	return m
}

// putRows writes rows [from, to) of tablet tab as "<tab>-<i>" and flushes
// them as one TSFile into the tablet's store.
func putRows(t *testing.T, tb *tablet.Tablet, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		m := &mutation.RowMutation{Row: fmt.Appendf(nil, "r%04d", i), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: fmt.Appendf(nil, "%s-%d", tb.ID(), i)}}}
		if err := tb.AssignTimestamps(m); err != nil {
			t.Fatal(err)
		}
		if err := tb.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	if !tb.SwapBuffers() {
		t.Fatal("nothing to swap")
	}
	info, err := tb.FlushStandby(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.InstallFlushed(info); err != nil {
		t.Fatal(err)
	}
}

// checkRows reads rows [0, n) of e back.
func checkRows(t *testing.T, stage string, e *replica.Replica, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		got, err := readRow(e, fmt.Appendf(nil, "r%04d", i))
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if want := fmt.Sprintf("%s-%d", e.ID(), i); got["f:q"] != want {
			t.Fatalf("%s: tablet %s row r%04d = %q, want %q", stage, e.ID(), i, got["f:q"], want)
		}
	}
}

// TestCompactionDeletesOnlyInTheOwningStore is the failover case of block
// IDs colliding across stores. Tablet T was written by tserver A into store
// A; after a failover tserver B serves it, reading A's store read-only, and
// B's store holds tablet U's live blocks with the very same IDs. B's
// compaction of T writes the merged file into B and must not delete the
// replaced files' IDs in B (U's blocks); those files are collected by A,
// by reference, once no metadata names them. Every row of both tablets
// reads back afterwards, through one shared page cache.
func TestCompactionDeletesOnlyInTheOwningStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	meta, err := localmeta.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	const rows = 40 // per file; two files per tablet

	// Both stores hand out IDs from the same value on.
	start := blockstore.BlockID(uint64(time.Now().UnixMicro()) + 1<<40)
	a, b := openStore(t, dirA, false), openStore(t, dirB, false)
	a.NotifyBlockID(start)
	b.NotifyBlockID(start)

	// A writes T, B writes U: the same shapes, so the same IDs.
	tA, err := tablet.Open(tablet.Options{ID: "T", Schema: testSchema, Store: a, StoreUUID: storeA, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	uB, err := tablet.Open(tablet.Options{ID: "U", Schema: testSchema, Store: b, StoreUUID: storeB, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range []*tablet.Tablet{tA, uB} {
		putRows(t, tb, 0, rows)
		putRows(t, tb, rows, 2*rows)
		if err := meta.Create(ctx, checkpoint.TabletMeta{TabletID: tb.ID(), Epoch: 1, TSFiles: tb.Files()}); err != nil {
			t.Fatal(err)
		}
	}
	same := 0
	for i, f := range tA.Files() {
		g := uB.Files()[i]
		for j := range min(len(f.Blocks), len(g.Blocks)) {
			if f.Blocks[j] == g.Blocks[j] {
				same++
			}
		}
	}
	if same == 0 {
		t.Fatalf("the stores' IDs do not overlap: T %v, U %v", tA.Files(), uB.Files())
	}
	tA.Close()
	uB.Close()
	// Tserver A dies: B reads A's store read-only.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	aRO := openStore(t, dirA, true)
	defer aRO.Close()

	cache := blockcache.New(blockcache.Options{})
	open := func(id string) *replica.Replica {
		t.Helper()
		m, err := meta.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		var refs []tablet.FileRef
		for _, f := range m.TSFiles {
			ref := tablet.FileRef{Footer: f.FooterRef()}
			switch f.Store {
			case storeA:
				ref.Store = aRO
			case storeB:
				ref.Store = b
			default:
				t.Fatalf("tablet %s names file %s of an unknown store", id, f.FooterRef())
			}
			refs = append(refs, ref)
		}
		tb, err := tablet.Open(tablet.Options{ID: id, Schema: testSchema, Store: b, StoreUUID: storeB, Files: refs, Cache: cache, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		e := replica.New(replica.Options{ID: id, Epoch: m.Epoch, Tablet: tb})
		e.Serve()
		return e
	}
	tT, tU := open("T"), open("U")
	checkRows(t, "before the compaction", tT, 2*rows)
	checkRows(t, "before the compaction", tU, 2*rows)

	coordB := checkpoint.New(checkpoint.Options{Meta: meta, Refs: meta, Blocks: b, Store: storeB, MaxTSFiles: -1, OrphanEvery: -1,
		Logger: quiet, Tablets: func() []checkpoint.Tablet { return []checkpoint.Tablet{tT, tU} }})
	if err := coordB.Compact(ctx, tT, true); err != nil {
		t.Fatal(err)
	}
	if n, err := coordB.CollectOrphans(ctx, 0); err != nil || n != 0 {
		t.Fatalf("B's orphan pass deleted %d blocks (%v), want none", n, err)
	}
	for _, f := range tT.Files() {
		if f.Store != storeB {
			t.Fatalf("compacted file %s is not in B's store", f.FooterRef())
		}
	}
	tT.Close()
	tU.Close()

	// Fresh readers over what the metadata names now.
	cache = blockcache.New(blockcache.Options{})
	tT, tU = open("T"), open("U")
	checkRows(t, "after the compaction", tT, 2*rows)
	checkRows(t, "after the compaction", tU, 2*rows)
	tT.Close()
	tU.Close()

	// A restarts: its orphan pass collects T's replaced files, which no
	// metadata names any more, and nothing else.
	aRO.Close()
	a = openStore(t, dirA, false)
	defer a.Close()
	coordA := checkpoint.New(checkpoint.Options{Meta: meta, Refs: meta, Blocks: a, Store: storeA, MaxTSFiles: -1, OrphanEvery: -1,
		Logger: quiet, Tablets: func() []checkpoint.Tablet { return nil }})
	n, err := coordA.CollectOrphans(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if left, err := a.AllBlockIDs(); err != nil || len(left) != 0 {
		t.Fatalf("store A keeps %d blocks (%v) after its orphan pass deleted %d; T's replaced files should be gone", len(left), err, n)
	}
	tT, tU = open("T"), open("U")
	defer tT.Close()
	defer tU.Close()
	checkRows(t, "after A's orphan pass", tT, 2*rows)
	checkRows(t, "after A's orphan pass", tU, 2*rows)
}
