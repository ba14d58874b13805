package blockstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"bighive/internal/vfs"
)

// fileOpener is how managers open .data, .metadata and block files. The
// FileCache of the next layer implements it (bounded descriptors,
// transparent reopen); today it is the FS itself.
type fileOpener interface {
	OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error)
}

// dataDir is one data directory (one disk): its path, filesystem block
// size, bounded worker pool and error hook. The FsManager of the next layer
// adds its UUID, instance file, lock, free-space accounting and the failed
// flag here.
type dataDir struct {
	path      string
	fs        vfs.FS
	opener    fileOpener
	blockSize int64
	pool      *workerPool
	onErr     func(dir string, err error)

	mu    sync.Mutex
	avail []*container // log manager: containers free to check out
}

func newDataDir(opts Options, path string) (*dataDir, error) {
	fsys := opts.FS
	if !opts.ReadOnly {
		if err := fsys.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("blockstore: create data dir %s: %w", path, err)
		}
		if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("blockstore: sync parent of %s: %w", path, err)
		}
	}
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
		path: path, fs: fsys, opener: fsys, blockSize: bs,
		pool:  newWorkerPool(opts.OpenWorkersPerDir),
		onErr: opts.OnIOError,
	}, nil
}

// ioError reports err to the error hook and returns it.
func (d *dataDir) ioError(err error) error {
	if err != nil && d.onErr != nil && !errors.Is(err, ErrInvalidArgument) {
		d.onErr(d.path, err)
	}
	return err
}

func (d *dataDir) openRW(name string) (vfs.File, error) {
	return d.opener.OpenFile(name, os.O_RDWR, 0)
}

func (d *dataDir) openRO(name string) (vfs.File, error) {
	return d.opener.OpenFile(name, os.O_RDONLY, 0)
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
