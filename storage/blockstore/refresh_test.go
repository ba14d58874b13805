package blockstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyViewSeesLaterCommits: a store opened read-only while its
// owner runs reads the blocks the owner commits afterwards: blocks
// appended to a container the view knew, blocks in a container created
// after the view opened, and blocks of one creation transaction spread
// over both (a TSFile's footer and data blocks). A block the store never
// held is still ErrNotFound, naming the directory; a new container of
// garbage fails that lookup with a *CorruptionError naming its file and
// offset, without hiding the other blocks, and one whose metadata holds a
// corrupt record shows the blocks recorded before it.
func TestReadOnlyViewSeesLaterCommits(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		dir := t.TempDir()
		owner, _ := mustOpen(t, Options{Kind: kind, Dirs: []string{dir}, PreallocateStep: 1 << 20, Logger: quietLogger()})
		defer owner.Close()
		commit := func(bs ...WritableBlock) {
			t.Helper()
			tx := owner.NewCreationTransaction()
			for _, b := range bs {
				tx.AddCreatedBlock(b)
			}
			if err := tx.CommitCreatedBlocks(); err != nil {
				t.Fatal(err)
			}
		}
		first := writeBlock(t, owner, []byte("before the view"))
		commit(first)

		ro, _ := mustOpen(t, Options{Kind: kind, Dirs: []string{dir}, ReadOnly: true, Logger: quietLogger()})
		defer ro.Close()
		if got := readAllBlock(t, ro, first.ID()); string(got) != "before the view" {
			t.Fatalf("block committed before the view opened: %q", got)
		}

		// One transaction: the first block is appended to the container
		// the view knows (the only one, free again), the second, written
		// while the first holds it, goes to a new container.
		appended := writeBlock(t, owner, payload(1, 5000))
		created := writeBlock(t, owner, payload(2, 7000))
		commit(appended, created)
		if lm, ok := asLog(owner); ok {
			in := func(id BlockID) (c *container) {
				lm.blocks.get(id, func(b *logBlock) { c = b.c })
				return c
			}
			if in(appended.ID()) != in(first.ID()) || in(created.ID()) == in(first.ID()) {
				t.Fatalf("want the second block in the first's container and the third in a new one")
			}
		}

		type viewCase struct {
			name string
			id   BlockID
			want []byte
		}
		check := func(tests []viewCase) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					if got := readAllBlock(t, ro, tc.id); string(got) != string(tc.want) {
						t.Fatalf("read %d bytes through the read-only view, want %d bytes as written", len(got), len(tc.want))
					}
				})
			}
		}
		check([]viewCase{
			{"appended to a known container", appended.ID(), payload(1, 5000)},
			{"in a new container", created.ID(), payload(2, 7000)},
			{"before the view", first.ID(), []byte("before the view")},
		})
		// Later ones, appended to the containers the view has reloaded
		// once already.
		later := writeBlock(t, owner, payload(3, 300))
		again := writeBlock(t, owner, payload(4, 9000))
		commit(later, again)
		check([]viewCase{
			{"after a reload", later.ID(), payload(3, 300)},
			{"after a reload, the other container", again.ID(), payload(4, 9000)},
		})

		absent := again.ID() + 1000
		_, err := ro.OpenBlock(absent)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("OpenBlock of a block never written: %v, want ErrNotFound naming %s", err, dir)
		}

		if kind != KindLog {
			return
		}
		// Garbage on disk: a new container whose metadata has a bad
		// header, and one with a good record, then a bad one (its checksum
		// broken, a good record after it).
		junk := filepath.Join(dir, strings.Repeat("ab", 16))
		if err := os.WriteFile(junk+dataSuffix, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(junk+metaSuffix, []byte("not a container metadata file"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ro.OpenBlock(absent)
		var ce *CorruptionError
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &ce) || ce.File != junk+metaSuffix || ce.Offset != 0 {
			t.Fatalf("OpenBlock beside a corrupt new container: %v, want ErrNotFound and a CorruptionError at %s offset 0", err, junk+metaSuffix)
		}
		for _, f := range []string{junk + dataSuffix, junk + metaSuffix} { // so the next error is the next container's
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		half := filepath.Join(dir, strings.Repeat("cd", 16))
		good := absent + 1
		if err := os.WriteFile(half+dataSuffix, payload(good, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		meta := appendRecord(encodeMetaHeader(), createRecord(good, 0, 100))
		bad := int64(len(meta))
		meta = appendRecord(meta, createRecord(good+1, 0, 100))
		meta[bad+4] ^= 0xff // the second record's checksum
		meta = appendRecord(meta, createRecord(good+2, 0, 100))
		if err := os.WriteFile(half+metaSuffix, meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := readAllBlock(t, ro, good); string(got) != string(payload(good, 4096)[:100]) {
			t.Fatal("the good record before a corrupt one: its block reads other bytes")
		}
		_, err = ro.OpenBlock(good + 2)
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &ce) || ce.File != half+metaSuffix || ce.Offset != bad {
			t.Fatalf("OpenBlock of a block recorded after a corrupt record: %v, want ErrNotFound and a CorruptionError at %s offset %d", err, half+metaSuffix, bad)
		}
		if got := readAllBlock(t, ro, created.ID()); string(got) != string(payload(2, 7000)) {
			t.Fatal("a block read before the corrupt containers appeared no longer reads")
		}
	})
}

// TestReadOnlyViewConcurrentReloads: readers of a read-only view, each
// asking for blocks right after their owner committed them, all read
// them, while the owner goes on committing (misses at once share
// reloads; run with -race).
func TestReadOnlyViewConcurrentReloads(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		dir := t.TempDir()
		owner, _ := mustOpen(t, Options{Kind: kind, Dirs: []string{dir}, PreallocateStep: 1 << 20,
			MaxContainerSize: 64 << 10, Logger: quietLogger()})
		defer owner.Close()
		ro, _ := mustOpen(t, Options{Kind: kind, Dirs: []string{dir}, ReadOnly: true, Logger: quietLogger()})
		defer ro.Close()
		const readers, rounds = 4, 40
		committed := make([]chan BlockID, readers)
		for i := range committed {
			committed[i] = make(chan BlockID, rounds*2)
		}
		errs := make(chan error, readers)
		for i := range readers {
			go func() {
				for id := range committed[i] {
					b, err := ro.OpenBlock(id)
					if err != nil {
						errs <- err
						return
					}
					buf := make([]byte, 3000)
					if err := b.ReadV(0, buf); err != nil {
						errs <- err
						return
					}
					b.Close()
					if string(buf) != string(payload(id, 3000)) {
						errs <- fmt.Errorf("block %s read back other bytes", id)
						return
					}
				}
				errs <- nil
			}()
		}
		for range rounds {
			tx := owner.NewCreationTransaction()
			var ids []BlockID
			for range 2 {
				b, err := owner.CreateBlock(CreateBlockOptions{TabletID: "t1"})
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Append(payload(b.ID(), 3000)); err != nil {
					t.Fatal(err)
				}
				tx.AddCreatedBlock(b)
				ids = append(ids, b.ID())
			}
			if err := tx.CommitCreatedBlocks(); err != nil {
				t.Fatal(err)
			}
			for _, c := range committed {
				for _, id := range ids {
					c <- id
				}
			}
		}
		for _, c := range committed {
			close(c)
		}
		for range readers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}
