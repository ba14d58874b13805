package blockstore

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"bighive/storage/vfs"
)

// FileCache bounds the open descriptors of many files (Kudu's FileCache).
// OpenFile returns a handle (a vfs.File) that looks like an open file; the
// descriptor behind it lives in an LRU of Capacity entries and is closed
// when evicted, to be reopened transparently on the handle's next use. A
// descriptor is pinned for the length of one I/O, so an eviction never
// closes a file under a running call; while every descriptor is pinned the
// cache holds more than Capacity, by at most the number of concurrent
// calls.
//
// All handles of one name share one descriptor, opened read-write if any
// handle asked for writing. When the last handle of a name closes, its
// descriptor is closed at once; Delete of a name still open is deferred
// until then. Invalidate after a rename-replace makes the next use reopen
// the name (the new file). A background sweep drops expired map entries.
//
// Durability across an eviction relies on fsync of a later descriptor of
// the same inode flushing all its dirty pages, as on Linux.
//
// Safe for concurrent use.
type FileCache struct {
	fs       vfs.FS
	capacity int

	mu    sync.Mutex
	descs map[string]*descriptor
	lru   list.List // open, unpinned descriptors; front = most recent
	open  int       // open descriptors, pinned or not

	reopens atomic.Int64

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// FileCacheOptions configure NewFileCache.
type FileCacheOptions struct {
	// Capacity is the number of descriptors kept open (default 1024).
	Capacity int
	// ExpiryPeriod is how often expired map entries are swept (default 60 s).
	ExpiryPeriod time.Duration
}

// ErrFileCacheClosed is returned by the handles of a closed FileCache.
var ErrFileCacheClosed = errors.New("blockstore: file cache closed")

type descriptor struct {
	name string
	// guarded by FileCache.mu
	write   bool
	refs    int // open handles
	f       vfs.File
	pins    int
	elem    *list.Element // in lru when f != nil && pins == 0
	stale   bool          // close f at the last unpin (Invalidate, upgrade)
	deleted bool          // remove the file when refs drops to 0
	gone    bool          // refs dropped to 0: expired, swept from the map
	openMu  sync.Mutex    // one reopen at a time
}

// NewFileCache returns a cache over fsys and starts its sweeper; Close
// stops it.
func NewFileCache(fsys vfs.FS, opts FileCacheOptions) *FileCache {
	if opts.Capacity <= 0 {
		opts.Capacity = 1024
	}
	if opts.ExpiryPeriod <= 0 {
		opts.ExpiryPeriod = 60 * time.Second
	}
	c := &FileCache{fs: fsys, capacity: opts.Capacity, descs: map[string]*descriptor{}, stop: make(chan struct{})}
	c.wg.Add(1)
	go c.sweep(opts.ExpiryPeriod)
	return c
}

func (c *FileCache) sweep(every time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.expire()
		}
	}
}

// expire drops the map entries of names no handle holds.
func (c *FileCache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, d := range c.descs {
		if d.gone {
			delete(c.descs, n)
		}
	}
}

// Close stops the sweeper and closes the descriptors of every name; the
// handles still open fail from then on.
func (c *FileCache) Close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	c.wg.Wait()
	c.mu.Lock()
	var fs []vfs.File
	for _, d := range c.descs {
		if d.f != nil && d.pins == 0 {
			fs = append(fs, c.dropLocked(d))
		}
		d.gone = true
	}
	c.descs = map[string]*descriptor{}
	c.mu.Unlock()
	var errs []error
	for _, f := range fs {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

func (c *FileCache) closed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// OpenDescriptors is the number of descriptors open now.
func (c *FileCache) OpenDescriptors() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// Reopens counts the descriptors opened again after an eviction.
func (c *FileCache) Reopens() int64 { return c.reopens.Load() }

// OpenFile opens name through the cache, with os.OpenFile flags. With
// O_CREATE the file is created now (O_EXCL and O_TRUNC apply to this
// first open only); otherwise it is opened now, so a missing file fails
// here. Reopens use O_RDWR or O_RDONLY alone.
func (c *FileCache) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if c.closed() {
		return nil, ErrFileCacheClosed
	}
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	var first vfs.File
	if flag&os.O_CREATE != 0 {
		f, err := c.fs.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		first = f
	}
	c.mu.Lock()
	d := c.descs[name]
	if d == nil || d.gone {
		d = &descriptor{name: name}
		c.descs[name] = d
	}
	d.refs++
	var victims []vfs.File
	if write && !d.write {
		d.write = true
		if d.f != nil { // reopen read-write on next use
			if d.pins == 0 {
				victims = append(victims, c.dropLocked(d))
			} else {
				d.stale = true
			}
		}
	}
	if first != nil {
		if d.f == nil {
			c.installLocked(d, first)
			first = nil
			victims = append(victims, c.evictLocked()...)
		}
	}
	c.mu.Unlock()
	if first != nil {
		victims = append(victims, first)
	}
	closeAll(victims)
	h := &cachedFile{c: c, d: d}
	if flag&os.O_CREATE == 0 {
		// Open now, so that a missing file fails here.
		if _, err := h.pin(); err != nil {
			h.Close()
			return nil, err
		}
		h.unpin()
	}
	return h, nil
}

// Delete removes name, at once if no handle holds it, else when the last
// handle closes.
func (c *FileCache) Delete(name string) error {
	c.mu.Lock()
	if d := c.descs[name]; d != nil && !d.gone {
		d.deleted = true
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.fs.Remove(name)
}

// Invalidate makes the next use of name reopen it: call it after renaming
// another file over name. I/O running meanwhile finishes on the old file.
func (c *FileCache) Invalidate(name string) {
	c.mu.Lock()
	var victim vfs.File
	if d := c.descs[name]; d != nil && d.f != nil {
		if d.pins == 0 {
			victim = c.dropLocked(d)
		} else {
			d.stale = true
		}
	}
	c.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
}

// installLocked makes f the open descriptor of d, unpinned.
func (c *FileCache) installLocked(d *descriptor, f vfs.File) {
	d.f = f
	c.open++
	d.elem = c.lru.PushFront(d)
}

// dropLocked takes d's descriptor out of the cache and returns it for the
// caller to close outside the lock. d must be unpinned.
func (c *FileCache) dropLocked(d *descriptor) vfs.File {
	f := d.f
	if d.elem != nil {
		c.lru.Remove(d.elem)
		d.elem = nil
	}
	d.f = nil
	d.stale = false
	c.open--
	return f
}

// evictLocked drops least recently used unpinned descriptors while more
// than capacity are open.
func (c *FileCache) evictLocked() []vfs.File {
	var out []vfs.File
	for c.open > c.capacity {
		e := c.lru.Back()
		if e == nil {
			break // everything open is pinned
		}
		out = append(out, c.dropLocked(e.Value.(*descriptor)))
	}
	return out
}

func closeAll(fs []vfs.File) {
	for _, f := range fs {
		f.Close()
	}
}

// cachedFile is a handle of a FileCache.
type cachedFile struct {
	c      *FileCache
	d      *descriptor
	closed atomic.Bool
}

var _ vfs.File = (*cachedFile)(nil)

// pin returns the open descriptor of the handle, reopening it if evicted,
// and keeps it from eviction until unpin.
func (h *cachedFile) pin() (vfs.File, error) {
	if h.closed.Load() {
		return nil, fmt.Errorf("blockstore: %s: %w", h.d.name, os.ErrClosed)
	}
	c, d := h.c, h.d
	if f := c.tryPin(d); f != nil {
		return f, nil
	}
	d.openMu.Lock()
	defer d.openMu.Unlock()
	if f := c.tryPin(d); f != nil {
		return f, nil
	}
	c.mu.Lock()
	if d.gone || c.closed() {
		c.mu.Unlock()
		return nil, ErrFileCacheClosed
	}
	flag := os.O_RDONLY
	if d.write {
		flag = os.O_RDWR
	}
	c.mu.Unlock()
	f, err := c.fs.OpenFile(d.name, flag, 0)
	if err != nil {
		return nil, err
	}
	c.reopens.Add(1)
	c.mu.Lock()
	d.f = f
	d.pins++
	c.open++
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
	return f, nil
}

func (c *FileCache) tryPin(d *descriptor) vfs.File {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.f == nil {
		return nil
	}
	if d.elem != nil {
		c.lru.Remove(d.elem)
		d.elem = nil
	}
	d.pins++
	return d.f
}

func (h *cachedFile) unpin() {
	c, d := h.c, h.d
	c.mu.Lock()
	d.pins--
	var victims []vfs.File
	if d.pins == 0 {
		if d.stale || d.refs == 0 || d.gone {
			victims = append(victims, c.dropLocked(d))
		} else {
			d.elem = c.lru.PushFront(d)
			victims = c.evictLocked()
		}
	}
	c.mu.Unlock()
	closeAll(victims)
}

func (h *cachedFile) Name() string { return h.d.name }

// Fd is ^uintptr(0): the descriptor behind a handle may change.
func (h *cachedFile) Fd() uintptr { return ^uintptr(0) }

func (h *cachedFile) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("blockstore: %s: %w", h.d.name, os.ErrClosed)
	}
	c, d := h.c, h.d
	c.mu.Lock()
	d.refs--
	var victim vfs.File
	remove := false
	if d.refs == 0 {
		d.gone = true
		if d.f != nil && d.pins == 0 {
			victim = c.dropLocked(d)
		}
		remove = d.deleted
	}
	c.mu.Unlock()
	var err error
	if victim != nil {
		err = victim.Close()
	}
	if remove {
		if rerr := c.fs.Remove(d.name); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

func (h *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := h.pin()
	if err != nil {
		return 0, err
	}
	defer h.unpin()
	return f.ReadAt(p, off)
}

func (h *cachedFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := h.pin()
	if err != nil {
		return 0, err
	}
	defer h.unpin()
	return f.WriteAt(p, off)
}

// Write is not supported: a reopened descriptor has no file position.
func (h *cachedFile) Write(p []byte) (int, error) {
	return 0, fmt.Errorf("%w: Write on a cached file %s (use WriteAt)", ErrInvalidArgument, h.d.name)
}

func (h *cachedFile) WriteV(bufs [][]byte, off int64) (int, error) {
	f, err := h.pin()
	if err != nil {
		return 0, err
	}
	defer h.unpin()
	return f.WriteV(bufs, off)
}

func (h *cachedFile) Sync() error {
	f, err := h.pin()
	if err != nil {
		return err
	}
	defer h.unpin()
	return f.Sync()
}

func (h *cachedFile) Datasync() error {
	f, err := h.pin()
	if err != nil {
		return err
	}
	defer h.unpin()
	return f.Datasync()
}

func (h *cachedFile) SyncRange(off, n int64) error {
	f, err := h.pin()
	if err != nil {
		return err
	}
	defer h.unpin()
	return f.SyncRange(off, n)
}

func (h *cachedFile) Preallocate(off, n int64) error {
	f, err := h.pin()
	if err != nil {
		return err
	}
	defer h.unpin()
	return f.Preallocate(off, n)
}

func (h *cachedFile) PunchHole(off, n int64) error {
	f, err := h.pin()
	if err != nil {
		return err
	}
	defer h.unpin()
	return f.PunchHole(off, n)
}

func (h *cachedFile) Truncate(size int64) error {
	f, err := h.pin()
	if err != nil {
		return err
	}
	defer h.unpin()
	return f.Truncate(size)
}

func (h *cachedFile) Stat() (fs.FileInfo, error) {
	f, err := h.pin()
	if err != nil {
		return nil, err
	}
	defer h.unpin()
	return f.Stat()
}
