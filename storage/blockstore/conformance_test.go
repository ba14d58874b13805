package blockstore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"bighive/storage/vfs"
)

// managerKinds is the conformance matrix: every test in this file runs
// against both managers.
var managerKinds = []string{KindLog, KindFile}

func forEachKind(t *testing.T, f func(t *testing.T, kind string)) {
	for _, k := range managerKinds {
		t.Run(k, func(t *testing.T) { f(t, k) })
	}
}

func testOptions(kind string, fsys vfs.FS, dirs ...string) Options {
	return Options{Kind: kind, Dirs: dirs, FS: fsys, PreallocateStep: 1 << 20, MaxContainerSize: 1 << 20}
}

func mustOpen(t *testing.T, opts Options) (Manager, *Report) {
	t.Helper()
	m, rep, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v\n%v", err, rep)
	}
	return m, rep
}

// payload is deterministic content for a block id.
func payload(id BlockID, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(id), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeBlock(t *testing.T, m Manager, data []byte) WritableBlock {
	t.Helper()
	b, err := m.CreateBlock(CreateBlockOptions{TabletID: "t1"})
	if err != nil {
		t.Fatalf("CreateBlock: %v", err)
	}
	if err := b.Append(data); err != nil {
		t.Fatalf("Append: %v", err)
	}
	return b
}

func readAllBlock(t *testing.T, m Manager, id BlockID) []byte {
	t.Helper()
	r, err := m.OpenBlock(id)
	if err != nil {
		t.Fatalf("OpenBlock(%s): %v", id, err)
	}
	defer r.Close()
	n, err := r.Size()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	if err := r.ReadV(0, buf); err != nil {
		t.Fatalf("ReadV(%s): %v", id, err)
	}
	return buf
}

func sortedIDs(ids []BlockID) []BlockID {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func TestStateMachine(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		m, _ := mustOpen(t, testOptions(kind, nil, t.TempDir()))
		defer m.Close()
		b, err := m.CreateBlock(CreateBlockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name  string
			do    func() error
			want  State
			isErr error
		}{
			{"new", func() error { return nil }, Clean, nil},
			{"append", func() error { return b.Append([]byte("hello ")) }, Dirty, nil},
			{"appendv", func() error { return b.AppendV([]byte("wor"), []byte("ld")) }, Dirty, nil},
			{"finalize", b.Finalize, Finalized, nil},
			{"finalize again", b.Finalize, Finalized, nil},
			{"append after finalize", func() error { return b.Append([]byte("x")) }, Finalized, ErrBlockState},
			{"close", b.Close, Closed, nil},
			{"close again", b.Close, Closed, ErrBlockState},
			{"abort after close", b.Abort, Closed, ErrBlockState},
			{"append after close", func() error { return b.Append([]byte("x")) }, Closed, ErrBlockState},
		}
		for _, s := range steps {
			err := s.do()
			if s.isErr == nil && err != nil || s.isErr != nil && !errors.Is(err, s.isErr) {
				t.Fatalf("%s: err %v, want %v", s.name, err, s.isErr)
			}
			if got := b.State(); got != s.want {
				t.Fatalf("%s: state %s, want %s", s.name, got, s.want)
			}
		}
		if b.BytesAppended() != 11 {
			t.Fatalf("BytesAppended %d", b.BytesAppended())
		}
		if got := readAllBlock(t, m, b.ID()); string(got) != "hello world" {
			t.Fatalf("read %q", got)
		}
		// Aborted blocks are never visible.
		a := writeBlock(t, m, []byte("gone"))
		if err := a.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.OpenBlock(a.ID()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("aborted block: %v", err)
		}
		if got := len(b.ID().String()); got != 16 {
			t.Fatalf("String() has %d digits", got)
		}
	})
}

func TestReadErrors(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		m, _ := mustOpen(t, testOptions(kind, nil, t.TempDir()))
		defer m.Close()
		b := writeBlock(t, m, []byte("0123456789"))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.OpenBlock(b.ID() + 1000); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		r, err := m.OpenBlock(b.ID())
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 4)
		tests := []struct {
			off   int64
			n     int
			err   error
			bytes string
		}{
			{0, 4, nil, "0123"},
			{8, 2, io.EOF, "89"},
			{10, 0, io.EOF, ""},
			{20, 0, io.EOF, ""},
		}
		for _, tc := range tests {
			n, err := r.ReadAt(p, tc.off)
			if n != tc.n || !errors.Is(err, tc.err) && !(tc.err == nil && err == nil) || string(p[:n]) != tc.bytes {
				t.Errorf("ReadAt(off %d) = %d, %v, %q", tc.off, n, err, p[:n])
			}
		}
		if err := r.ReadV(8, make([]byte, 3)); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("ReadV past end: %v", err)
		}
		a, c := make([]byte, 3), make([]byte, 7)
		if err := r.ReadV(0, a, c); err != nil || string(a)+string(c) != "0123456789" {
			t.Errorf("ReadV: %v %q %q", err, a, c)
		}
		r.Close()
		if _, err := r.ReadAt(p, 0); !errors.Is(err, ErrBlockState) {
			t.Errorf("read after close: %v", err)
		}
		// Double commit of a transaction.
		tx := m.NewCreationTransaction()
		tx.AddCreatedBlock(writeBlock(t, m, []byte("x")))
		if err := tx.CommitCreatedBlocks(); err != nil {
			t.Fatal(err)
		}
		if err := tx.CommitCreatedBlocks(); !errors.Is(err, ErrTransactionDone) {
			t.Errorf("double commit: %v", err)
		}
		dt := m.NewDeletionTransaction()
		dt.AddDeletedBlock(b.ID())
		dt.AddDeletedBlock(b.ID() + 1000)
		del, err := dt.CommitDeletedBlocks()
		if len(del) != 1 || del[0] != b.ID() || !errors.Is(err, ErrNotFound) {
			t.Errorf("delete: %v %v", del, err)
		}
		if _, err := m.OpenBlock(b.ID()); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted block: %v", err)
		}
	})
}

func TestConcurrentReaders(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		m, _ := mustOpen(t, testOptions(kind, nil, t.TempDir()))
		defer m.Close()
		data := payload(1, 256<<10)
		b := writeBlock(t, m, data)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := m.OpenBlock(b.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for range 200 {
					off := rng.Int64N(int64(len(data)))
					n := rng.IntN(8192)
					p := make([]byte, n)
					got, err := r.ReadAt(p, off)
					want := min(int64(n), int64(len(data))-off)
					if int64(got) != want || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(p[:got], data[off:off+want]) {
						t.Errorf("ReadAt(%d,%d) = %d, %v", off, n, got, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

// TestConcurrentWritersRestart writes from many goroutines (many containers
// at once), deletes some, restarts and checks exactly the committed,
// undeleted blocks are present and intact.
func TestConcurrentWritersRestart(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
		opts := testOptions(kind, nil, dirs...)
		opts.MaxContainerSize = 256 << 10
		m, _ := mustOpen(t, opts)
		var mu sync.Mutex
		want := map[BlockID]uint32{}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 2))
				for i := range 6 {
					tx := m.NewCreationTransaction()
					var bs []WritableBlock
					for range 1 + rng.IntN(4) {
						b, err := m.CreateBlock(CreateBlockOptions{TabletID: fmt.Sprint(g)})
						if err != nil {
							t.Error(err)
							return
						}
						d := payload(b.ID(), 1+rng.IntN(40<<10))
						if err := b.Append(d); err != nil {
							t.Error(err)
							return
						}
						if err := b.Finalize(); err != nil {
							t.Error(err)
						}
						tx.AddCreatedBlock(b)
						bs = append(bs, b)
					}
					if i%3 == 2 { // one aborted block now and then
						b := writeBlock(t, m, []byte("never"))
						b.Abort()
					}
					if err := tx.CommitCreatedBlocks(); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, b := range bs {
						want[b.ID()] = crc32.ChecksumIEEE(payload(b.ID(), int(b.BytesAppended())))
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// Delete about a third.
		dt := m.NewDeletionTransaction()
		n := 0
		for id := range want {
			if n%3 == 0 {
				dt.AddDeletedBlock(id)
				delete(want, id)
			}
			n++
		}
		if _, err := dt.CommitDeletedBlocks(); err != nil {
			t.Fatal(err)
		}
		maxID := BlockID(0)
		for id := range want {
			maxID = max(maxID, id)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		m2, rep := mustOpen(t, opts)
		defer m2.Close()
		checkExactly(t, m2, want)
		if rep.FatalError() != nil {
			t.Fatal(rep)
		}
		b := writeBlock(t, m2, []byte("after restart"))
		if b.ID() <= maxID {
			t.Fatalf("id %s reused (max before %s)", b.ID(), maxID)
		}
		b.Abort()
	})
}

// checkExactly verifies the store holds exactly the blocks of want, each
// with the given CRC.
func checkExactly(t *testing.T, m Manager, want map[BlockID]uint32) {
	t.Helper()
	ids, err := m.AllBlockIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(want) {
		t.Errorf("store has %d blocks, want %d", len(ids), len(want))
	}
	for _, id := range ids {
		c, ok := want[id]
		if !ok {
			t.Errorf("unexpected block %s", id)
			continue
		}
		if got := crc32.ChecksumIEEE(readAllBlock(t, m, id)); got != c {
			t.Errorf("block %s: crc %08x, want %08x", id, got, c)
		}
	}
}

func TestNotifyBlockID(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		dir := t.TempDir()
		m, _ := mustOpen(t, testOptions(kind, nil, dir))
		big := BlockID(1) << 60
		m.NotifyBlockID(big)
		b := writeBlock(t, m, []byte("x"))
		if b.ID() <= big {
			t.Fatalf("id %s not above notified %s", b.ID(), big)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		m2, _ := mustOpen(t, testOptions(kind, nil, dir))
		defer m2.Close()
		c := writeBlock(t, m2, []byte("y"))
		if c.ID() <= b.ID() {
			t.Fatalf("after restart id %s not above %s", c.ID(), b.ID())
		}
		c.Abort()
	})
}

func TestReadOnly(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		dir := t.TempDir()
		m, _ := mustOpen(t, testOptions(kind, nil, dir))
		defer m.Close()
		b := writeBlock(t, m, []byte("owned"))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		// A second opener while the owner runs.
		ro, _ := mustOpen(t, Options{Kind: kind, Dirs: []string{dir}, ReadOnly: true})
		defer ro.Close()
		if got := readAllBlock(t, ro, b.ID()); string(got) != "owned" {
			t.Fatalf("read-only read %q", got)
		}
		if _, err := ro.CreateBlock(CreateBlockOptions{}); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("create in read-only: %v", err)
		}
		dt := ro.NewDeletionTransaction()
		dt.AddDeletedBlock(b.ID())
		if _, err := dt.CommitDeletedBlocks(); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("delete in read-only: %v", err)
		}
		if _, _, err := Open(Options{Kind: kind, Dirs: []string{filepath.Join(dir, "missing")}, ReadOnly: true}); err == nil {
			t.Fatal("read-only open of a missing dir succeeded")
		}
	})
}

// asLog returns the log manager under an FsManager (or m itself).
func asLog(m Manager) (*logManager, bool) {
	if fm, ok := m.(*FsManager); ok {
		m = fm.Manager
	}
	lm, ok := m.(*logManager)
	return lm, ok
}

func mustLog(m Manager) *logManager {
	lm, ok := asLog(m)
	if !ok {
		panic("not a log manager")
	}
	return lm
}
