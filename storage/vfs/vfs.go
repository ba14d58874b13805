package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File is an open file. ReadAt and WriteAt are safe for concurrent use on
// disjoint ranges, as with *os.File.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// WriteV writes the buffers contiguously at off (pwritev).
	WriteV(bufs [][]byte, off int64) (int, error)
	// Sync flushes data and metadata (fsync).
	Sync() error
	// Datasync flushes data and the metadata needed to read it (fdatasync).
	Datasync() error
	// SyncRange starts asynchronous write-out of [off, off+n) without
	// waiting (sync_file_range SYNC_FILE_RANGE_WRITE). It makes nothing durable.
	SyncRange(off, n int64) error
	// Preallocate reserves [off, off+n) (fallocate mode 0, the size grows).
	Preallocate(off, n int64) error
	// PunchHole frees the blocks of [off, off+n), keeping the size.
	PunchHole(off, n int64) error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
	// Fd is the OS descriptor, or ^uintptr(0) for files not backed by one.
	Fd() uintptr
}

// FS is the set of filesystem operations storage code may use.
type FS interface {
	// Create creates or truncates name for reading and writing.
	Create(name string) (File, error)
	// OpenFile opens name with os.OpenFile flags.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm fs.FileMode) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of dir durable (fsync of the directory).
	SyncDir(dir string) error
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

// WriteFileAtomic replaces name with data durably: it writes name+".tmp",
// fsyncs it, renames it over name and fsyncs the parent directory. When it
// returns nil the new contents survive a crash; when it fails, name holds the
// old contents or the new ones, never a mix.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + TempSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("vfs: create %s: %w", tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: rename %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("vfs: sync dir of %s: %w", name, err)
	}
	return nil
}

// TempSuffix marks temporary files that an interrupted run may leave behind;
// owners remove them on a read-write open.
const TempSuffix = ".tmp"

// ReadFile reads the whole of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// Exists reports whether name exists; other errors are returned.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

var _ File = (*osFile)(nil)

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644))
}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return wrap(os.OpenFile(name, flag, perm))
}

func (osFS) Open(name string) (File, error)          { return wrap(os.Open(name)) }
func (osFS) Remove(name string) error                { return os.Remove(name) }
func (osFS) RemoveAll(name string) error             { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                { return os.Rename(o, n) }
func (osFS) MkdirAll(d string, p fs.FileMode) error  { return mkdirAll(d, p) }
func (osFS) ReadDir(d string) ([]fs.DirEntry, error) { return os.ReadDir(d) }
func (osFS) Stat(name string) (fs.FileInfo, error)   { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

// mkdirRetries bounds mkdirAll's retries of a contradicted EEXIST, and
// mkdirRetryWait is the wait before the first (it grows by as much each
// time: 20 ms to 200 ms, 1.1 s in all).
const (
	mkdirRetries   = 10
	mkdirRetryWait = 20 * time.Millisecond
)

// mkdirAll is os.MkdirAll on a file system that other hosts share. When
// two hosts make the same directory at once (tservers starting together
// over one GlusterFS volume make the shared root), one host's mkdir can
// fail with EEXIST while its own lookup of the name still fails for a
// moment; os.MkdirAll then returns that EEXIST although the directory is
// there. So such an EEXIST is retried: at once if the name is a directory
// by now (os.MkdirAll's own lookup was the moment before), else a few
// times with a growing wait until the name is seen. An EEXIST of a name
// that is there and is not a directory is returned at once.
func mkdirAll(d string, p fs.FileMode) error {
	err := os.MkdirAll(d, p)
	for i := 1; i <= mkdirRetries; i++ {
		retry, wait := contradicted(err)
		if !retry {
			break
		}
		if wait {
			time.Sleep(time.Duration(i) * mkdirRetryWait)
		}
		err = os.MkdirAll(d, p)
	}
	return err
}

// contradicted reports whether err is an EEXIST that does not stand: its
// name is a directory after all (retry at once), or this host cannot see
// the name at all yet (retry after a wait).
func contradicted(err error) (retry, wait bool) {
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrExist) || !errors.As(err, &pe) {
		return false, false
	}
	fi, serr := os.Lstat(pe.Path)
	switch {
	case serr != nil:
		return true, true
	case fi.IsDir():
		return true, false
	}
	return false, false
}
