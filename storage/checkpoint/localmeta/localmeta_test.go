package localmeta

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func file(footer uint64, blocks ...uint64) tsfile.Info {
	f := tsfile.Info{Footer: blockstore.BlockID(footer), Size: 100, Entries: 3, MinRow: []byte("a"), MaxRow: []byte("z")}
	for _, b := range blocks {
		f.Blocks = append(f.Blocks, blockstore.BlockID(b))
	}
	f.Blocks = append(f.Blocks, f.Footer)
	return f
}

func TestCommit(t *testing.T) {
	ctx := context.Background()
	p1 := wal.Position{Prefix: "a", FileTS: 10}
	p2 := wal.Position{Prefix: "a", FileTS: 20}
	pb := wal.Position{Prefix: "b", FileTS: 5}
	tests := []struct {
		name      string
		updates   []checkpoint.Update
		wantErr   error
		refused   []string
		wantPos   map[string][]wal.Position
		wantFiles map[string]int
	}{
		{"checkpoint", []checkpoint.Update{{TabletID: "t1", Epoch: 1, LogPositions: []wal.Position{p2}, TSFiles: []tsfile.Info{file(3, 1, 2)}}},
			nil, nil, map[string][]wal.Position{"t1": {p2}, "t2": {p1, pb}}, map[string]int{"t1": 1, "t2": 0}},
		{"compaction keeps positions", []checkpoint.Update{{TabletID: "t2", Epoch: 2, TSFiles: []tsfile.Info{file(9, 8)}}},
			nil, nil, map[string][]wal.Position{"t1": {p1}, "t2": {p1, pb}}, map[string]int{"t1": 0, "t2": 1}},
		{"stale epoch refuses the batch", []checkpoint.Update{
			{TabletID: "t1", Epoch: 1, LogPositions: []wal.Position{p2}},
			{TabletID: "t2", Epoch: 1, LogPositions: []wal.Position{p2}}},
			checkpoint.ErrStaleEpoch, []string{"t2"}, map[string][]wal.Position{"t1": {p1}, "t2": {p1, pb}}, map[string]int{"t1": 0, "t2": 0}},
		{"unknown tablet", []checkpoint.Update{{TabletID: "t9", Epoch: 1}},
			checkpoint.ErrUnknownTablet, []string{"t9"}, map[string][]wal.Position{"t1": {p1}, "t2": {p1, pb}}, map[string]int{"t1": 0, "t2": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, path := openTemp(t)
			if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t1", Epoch: 1, LogPositions: []wal.Position{p1}}); err != nil {
				t.Fatal(err)
			}
			if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t2", Epoch: 2, LogPositions: []wal.Position{p1, pb}, UserData: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			err := db.Commit(ctx, tc.updates)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Commit: %v, want %v", err, tc.wantErr)
			}
			var ref *checkpoint.RefusedError
			if tc.refused != nil {
				if !errors.As(err, &ref) {
					t.Fatalf("Commit: %v is no RefusedError", err)
				}
				for _, id := range tc.refused {
					if ref.Tablets[id] == nil {
						t.Errorf("tablet %s not refused: %v", id, ref.Tablets)
					}
				}
			}
			// Reopen: what Commit returned is durable.
			db.Close()
			db2, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			for id, want := range tc.wantPos {
				m, err := db2.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(m.LogPositions, want) {
					t.Errorf("%s positions %v, want %v", id, m.LogPositions, want)
				}
				if len(m.TSFiles) != tc.wantFiles[id] {
					t.Errorf("%s has %d files, want %d", id, len(m.TSFiles), tc.wantFiles[id])
				}
			}
		})
	}
}

func TestReferences(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	pa := wal.Position{Prefix: "a", FileTS: 10}
	pb := wal.Position{Prefix: "b", FileTS: 7}
	for _, m := range []checkpoint.TabletMeta{
		{TabletID: "t1", Epoch: 1, LogPositions: []wal.Position{pa}, TSFiles: []tsfile.Info{file(3, 1, 2)}},
		{TabletID: "t2", Epoch: 1, LogPositions: []wal.Position{pb}, TSFiles: []tsfile.Info{file(6, 5)}},
	} {
		if err := db.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t1"}); !errors.Is(err, ErrExists) {
		t.Fatalf("Create twice: %v", err)
	}
	if err := db.AddLogPosition(ctx, "t2", 1, wal.Position{Prefix: "a", FileTS: 30}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddLogPosition(ctx, "t2", 1, wal.Position{Prefix: "a", FileTS: 30}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddLogPosition(ctx, "t2", 5, pa); !errors.Is(err, checkpoint.ErrStaleEpoch) {
		t.Fatalf("AddLogPosition at a stale epoch: %v", err)
	}
	got, err := db.LogPositions(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y wal.Position) int { return int(x.FileTS - y.FileTS) })
	if want := []wal.Position{pa, {Prefix: "a", FileTS: 30}}; !slices.Equal(got, want) {
		t.Errorf("LogPositions(a) = %v, want %v", got, want)
	}
	blocks, err := db.ReferencedBlocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []blockstore.BlockID{1, 2, 3, 5, 6} {
		if _, ok := blocks[blockstore.BlockRef{ID: id}]; !ok {
			t.Errorf("block %d not referenced", id)
		}
	}
	if len(blocks) != 5 {
		t.Errorf("%d referenced blocks, want 5", len(blocks))
	}
}

func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t1", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTablets)
		v := append([]byte(nil), b.Get([]byte("t1"))...)
		v[len(v)-1] ^= 0x40
		return b.Put([]byte("t1"), v)
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	_, err = db2.Get("t1")
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Key != "t1" || ce.File != path || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get of a corrupt record: %v", err)
	}
	if _, err := db2.List(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("List: %v", err)
	}
}

// TestStoresKeptApart: two files with the same block IDs in two stores
// are two files; the store survives a round trip and names the references.
func TestStoresKeptApart(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	fa, fb := file(3, 1, 2), file(3, 1, 2)
	fa.Store, fb.Store = "store-a", "store-b"
	if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t1", Epoch: 1, TSFiles: []tsfile.Info{fa}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t2", Epoch: 1, TSFiles: []tsfile.Info{fb}}); err != nil {
		t.Fatal(err)
	}
	m, err := db.Get("t1")
	if err != nil || len(m.TSFiles) != 1 || m.TSFiles[0].FooterRef() != (blockstore.BlockRef{Store: "store-a", ID: 3}) {
		t.Fatalf("Get(t1) = %+v, %v", m, err)
	}
	blocks, err := db.ReferencedBlocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 6 {
		t.Errorf("%d referenced blocks, want 6 (3 per store): %v", len(blocks), blocks)
	}
	for _, store := range []string{"store-a", "store-b"} {
		for _, id := range []blockstore.BlockID{1, 2, 3} {
			if _, ok := blocks[blockstore.BlockRef{Store: store, ID: id}]; !ok {
				t.Errorf("block %s/%s not referenced", store, id)
			}
		}
	}
}

// TestCommitIsCompareAndSwap: an update may leave out of the recorded
// list only the files it names as Replaced; one computed from another
// list (an ended load's, a closed engine's empty one) is refused and
// changes nothing.
func TestCommitIsCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	a, b := file(5, 4), file(7, 6)
	tests := []struct {
		name     string
		files    []tsfile.Info
		replaced []tsfile.Info
		wantErr  error
	}{
		{"checkpoint adds a file", []tsfile.Info{file(9, 8), a, b}, nil, nil},
		{"compaction replaces its run", []tsfile.Info{file(11, 10)}, []tsfile.Info{a, b}, nil},
		{"retry of an applied update", []tsfile.Info{a, b}, nil, nil},
		{"drops a file it does not replace", []tsfile.Info{file(11, 10), b}, nil, checkpoint.ErrFilesChanged},
		{"closed engine's empty list", nil, []tsfile.Info{a}, checkpoint.ErrFilesChanged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, _ := openTemp(t)
			if err := db.Create(ctx, checkpoint.TabletMeta{TabletID: "t1", Epoch: 1, TSFiles: []tsfile.Info{a, b}}); err != nil {
				t.Fatal(err)
			}
			u := checkpoint.Update{TabletID: "t1", Epoch: 1, TSFiles: tc.files}
			for _, f := range tc.replaced {
				u.Replaced = append(u.Replaced, f.FooterRef())
			}
			err := db.Commit(ctx, []checkpoint.Update{u})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Commit: %v, want %v", err, tc.wantErr)
			}
			m, err := db.Get("t1")
			if err != nil {
				t.Fatal(err)
			}
			want := tc.files
			if tc.wantErr != nil {
				want = []tsfile.Info{a, b}
			}
			if len(m.TSFiles) != len(want) {
				t.Fatalf("recorded %d files, want %d", len(m.TSFiles), len(want))
			}
			for i := range want {
				if m.TSFiles[i].FooterRef() != want[i].FooterRef() {
					t.Errorf("file %d is %v, want %v", i, m.TSFiles[i].FooterRef(), want[i].FooterRef())
				}
			}
		})
	}
}
