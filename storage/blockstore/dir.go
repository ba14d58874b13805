package blockstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"bighive/storage/vfs"
)

// fileOpener is how managers open .data, .metadata and block files: the
// FileCache (bounded descriptors, transparent reopen) or the FS itself.
type fileOpener interface {
	OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error)
}

// dataDir is one data directory (one disk): its path and UUID, filesystem
// block size, bounded worker pool, error hook, failed flag and cached free
// space. The FsManager creates them; the block managers use them.
type dataDir struct {
	path      string
	uuid      string
	fs        vfs.FS
	opener    fileOpener
	blockSize int64
	pool      *workerPool
	onErr     func(d *dataDir, err error)
	failed    atomic.Bool

	spaceMu    sync.Mutex
	spaceAt    time.Time // last refresh; zero = never
	availBytes int64     // -1 = unknown
	capBytes   int64
	full       bool

	mu    sync.Mutex
	avail []*container // log manager: containers free to check out
}

// newDataDir stats an existing directory and learns its block size.
func newDataDir(opts Options, path string) (*dataDir, error) {
	fsys := opts.FS
	st, err := fsys.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("blockstore: data dir %s: %w", path, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: data dir %s is not a directory", ErrInvalidArgument, path)
	}
	bs := int64(4096)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blksize > 0 {
		bs = int64(sys.Blksize)
	}
	return &dataDir{
		path: path, fs: fsys, opener: fsys, blockSize: bs, availBytes: -1,
		pool: newWorkerPool(opts.OpenWorkersPerDir),
	}, nil
}

// ioError reports err to the error hook and returns it.
func (d *dataDir) ioError(err error) error {
	if err != nil && d.onErr != nil && !errors.Is(err, ErrInvalidArgument) {
		d.onErr(d, err)
	}
	return err
}

// checkHealthy fails with ErrDirFailed once the directory is marked failed.
func (d *dataDir) checkHealthy() error {
	if d.failed.Load() {
		return fmt.Errorf("%w: %s", ErrDirFailed, d.path)
	}
	return nil
}

func (d *dataDir) openRW(name string) (vfs.File, error) {
	return d.opener.OpenFile(name, os.O_RDWR, 0)
}

func (d *dataDir) openRO(name string) (vfs.File, error) {
	return d.opener.OpenFile(name, os.O_RDONLY, 0)
}

// invalidate tells the file cache that name was replaced by a rename.
func (d *dataDir) invalidate(name string) {
	if fc, ok := d.opener.(*FileCache); ok {
		fc.Invalidate(name)
	}
}

// allocatedBytes is the disk space a file holds (st_blocks × 512), or its
// size where the filesystem does not say.
func allocatedBytes(st fs.FileInfo) int64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Blocks * 512
	}
	return st.Size()
}

// workerPool runs background tasks, at most n at a time, and can wait for
// all of them.
type workerPool struct {
	sem chan struct{}
	wg  sync.WaitGroup
}

func newWorkerPool(n int) *workerPool { return &workerPool{sem: make(chan struct{}, n)} }

func (p *workerPool) submit(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.sem <- struct{}{}
		defer func() { <-p.sem }()
		f()
	}()
}

func (p *workerPool) wait() { p.wg.Wait() }

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}
