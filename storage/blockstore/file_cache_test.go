package blockstore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
	"bighive/testkit/wait"
)

func TestFileCacheBoundsAndReopens(t *testing.T) {
	dir := t.TempDir()
	c := NewFileCache(vfs.Default, FileCacheOptions{Capacity: 2, ExpiryPeriod: 5 * time.Millisecond})
	defer c.Close()
	var hs []vfs.File
	for i := range 6 {
		h, err := c.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt([]byte(fmt.Sprintf("file %d", i)), 0); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		if n := c.OpenDescriptors(); n > 2 {
			t.Fatalf("%d descriptors open, capacity 2", n)
		}
	}
	for round := range 2 {
		for i, h := range hs {
			buf := make([]byte, 6)
			if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != fmt.Sprintf("file %d", i) {
				t.Fatalf("round %d file %d: %q %v", round, i, buf, err)
			}
		}
	}
	if c.Reopens() == 0 {
		t.Error("no reopen after eviction")
	}
	if _, err := c.OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	// Two handles share a descriptor; the last close closes it.
	h2, err := c.OpenFile(filepath.Join(dir, "0"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		h.Close()
	}
	buf := make([]byte, 6)
	if _, err := h2.ReadAt(buf, 0); err != nil || string(buf) != "file 0" {
		t.Fatalf("shared handle: %q %v", buf, err)
	}
	h2.Close()
	if n := c.OpenDescriptors(); n != 0 {
		t.Errorf("%d descriptors open after every handle closed", n)
	}
	if _, err := h2.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	// The sweeper drops the expired entries.
	wait.For(t, 2*time.Second, "the expired entries swept", func() error {
		c.mu.Lock()
		n := len(c.descs)
		c.mu.Unlock()
		if n > 0 {
			return fmt.Errorf("%d entries left", n)
		}
		return nil
	})
}

func TestFileCacheDeferredDeleteAndInvalidate(t *testing.T) {
	dir := t.TempDir()
	c := NewFileCache(vfs.Default, FileCacheOptions{Capacity: 4})
	defer c.Close()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	h, err := c.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Rename-replace: without Invalidate the cache reads the old inode.
	if err := vfs.WriteFileAtomic(vfs.Default, p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	h.ReadAt(buf, 0)
	if string(buf) != "old" {
		t.Fatalf("before Invalidate read %q", buf)
	}
	c.Invalidate(p)
	h.ReadAt(buf, 0)
	if string(buf) != "new" {
		t.Fatalf("after Invalidate read %q", buf)
	}
	// Delete is deferred while a handle is open.
	if err := c.Delete(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("deleted under an open handle: %v", err)
	}
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatalf("read of a file pending delete: %v", err)
	}
	h.Close()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("not deleted at the last close: %v", err)
	}
	// With no handle, at once.
	q := filepath.Join(dir, "g")
	os.WriteFile(q, nil, 0o644)
	c.Delete(q)
	if _, err := os.Stat(q); !os.IsNotExist(err) {
		t.Fatal("not deleted")
	}
}

// fastTempDir is a temporary directory on tmpfs when there is one: this
// test is about descriptors, and 10 000 file creations on a slow disk
// would dominate its run time.
func fastTempDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "blockstore-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func countFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// writeSyntheticContainer writes a container straight to disk (no sync):
// the given blocks of payload(id, n) each at the next 4 KiB boundary, or,
// with sparse, only the data file's size. del lists blocks whose DELETE
// records follow.
func writeSyntheticContainer(t testing.TB, dir string, ids []BlockID, sizes []int, del []BlockID, sparse bool) {
	t.Helper()
	name := filepath.Join(dir, newUUID())
	meta := encodeMetaHeader()
	var data []byte
	var off int64
	for i, id := range ids {
		o, n := off, int64(sizes[i])
		meta = appendRecord(meta, &storagepb.BlockRecord{BlockId: uint64(id),
			Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_CREATE, TimestampUs: 1, Offset: &o, Length: &n})
		if !sparse {
			data = append(data, payload(id, sizes[i])...)
			data = append(data, make([]byte, alignUp(n, 4096)-n)...)
		}
		off += alignUp(n, 4096)
	}
	for _, id := range del {
		meta = appendRecord(meta, &storagepb.BlockRecord{BlockId: uint64(id),
			Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_DELETE, TimestampUs: 2})
	}
	if err := os.WriteFile(name+metaSuffix, meta, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name+dataSuffix, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if sparse {
		if err := os.Truncate(name+dataSuffix, off); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFileCacheManyContainers: 5 000 containers under a cache of 64
// descriptors never hold more than 64 plus a few, during Open, writes and
// concurrent reads of every block.
func TestFileCacheManyContainers(t *testing.T) {
	const containers, capacity, readers = 5000, 64, 8
	dir := fastTempDir(t)
	t0 := time.Now()
	// A few containers written by the manager itself, through the cache...
	fm := mustFs(t, Options{Dirs: []string{dir}, MaxBlocksPerContainer: 1, PreallocateStep: -1, MaxOpenFiles: capacity})
	want := map[BlockID]int{}
	tx := fm.NewCreationTransaction()
	for i := range 50 {
		b, err := fm.CreateBlock(CreateBlockOptions{TabletID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		n := 100 + i*7
		b.Append(payload(b.ID(), n))
		tx.AddCreatedBlock(b)
		want[b.ID()] = n
	}
	if err := tx.CommitCreatedBlocks(); err != nil {
		t.Fatal(err)
	}
	if n := fm.FileCache().OpenDescriptors(); n > capacity+readers {
		t.Errorf("%d descriptors open after writing", n)
	}
	fm.Close()
	t.Logf("manager writes %v", time.Since(t0))
	// ...and the rest straight to disk, one small block each.
	var gen sync.WaitGroup
	for w := range 8 {
		gen.Add(1)
		go func() {
			defer gen.Done()
			for i := w; i < containers-50; i += 8 {
				writeSyntheticContainer(t, dir, []BlockID{BlockID(1 + i)}, []int{64 + i%200}, nil, false)
			}
		}()
	}
	gen.Wait()
	for i := range containers - 50 {
		want[BlockID(1+i)] = 64 + i%200
	}
	t.Logf("synthetic %v", time.Since(t0))
	base := countFds(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
				if n := int64(len(ents)); n > peak.Load() {
					peak.Store(n)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	fm = mustFs(t, Options{Dirs: []string{dir}, MaxBlocksPerContainer: 1, PreallocateStep: -1, MaxOpenFiles: capacity})
	t.Logf("open %v", time.Since(t0))
	ids, _ := fm.AllBlockIDs()
	if len(ids) != containers {
		t.Fatalf("%d blocks, want %d", len(ids), containers)
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; i < len(ids); i += readers {
				id := ids[(i*7919)%len(ids)] // spread over the LRU
				rb, err := fm.OpenBlock(id)
				if err != nil {
					t.Error(err)
					bad.Add(1)
					continue
				}
				buf := make([]byte, want[id])
				if err := rb.ReadV(0, buf); err != nil || crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(payload(id, want[id])) {
					bad.Add(1)
				}
				rb.Close()
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	reopens := fm.FileCache().Reopens()
	t.Logf("read %v", time.Since(t0))
	fm.Close()
	t.Logf("close %v", time.Since(t0))
	if bad.Load() > 0 {
		t.Fatalf("%d blocks did not read back", bad.Load())
	}
	// Slack: pins of concurrent I/O (readers, replay workers), the lock
	// file, ReadDir of the sampler and the directory listing.
	if extra := peak.Load() - int64(base); extra > capacity+readers+8 {
		t.Errorf("peak %d descriptors above the %d before Open; capacity %d", extra, base, capacity)
	}
	t.Logf("peak %d descriptors above base %d, %d reopens", peak.Load()-int64(base), base, reopens)
}
