package errorfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"bighive/storage/vfs"
)

const createFlag = os.O_CREATE

// chunkSize is the copy-on-write unit of MemFS file contents.
const chunkSize = 64 << 10

// MemFS is an in-memory vfs.FS that remembers what is durable, for crash
// tests (after pebble's vfs.NewCrashableMem):
//
//   - a file's durable contents are those at its last Sync or Datasync;
//   - a directory's durable entries are those at its last SyncDir.
//
// CrashClone returns the filesystem a reboot would find: only durable
// entries, reached from the root through durable entries, with only durable
// contents. Writes, truncations, preallocations and hole punches are volatile
// until the file is synced; creates, renames, removes and mkdirs until the
// parent directory is synced.
//
// Paths are slash-separated; relative paths are taken from "/". Fd returns
// ^uintptr(0). Safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

var _ vfs.FS = (*MemFS)(nil)

// NewCrashableMem returns an empty MemFS holding only "/".
func NewCrashableMem() *MemFS {
	return &MemFS{root: newDir()}
}

type chunk struct {
	b      [chunkSize]byte
	frozen bool // shared with a synced snapshot; copy before writing
}

type memNode struct {
	isDir bool
	// directory
	children map[string]*memNode
	synced   map[string]*memNode
	// file (guarded by MemFS.mu as well)
	chunks       []*chunk
	size         int64
	syncedChunks []*chunk
	syncedSize   int64
	modTime      time.Time
}

func newDir() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, synced: map[string]*memNode{}, modTime: time.Now()}
}

func newFile() *memNode { return &memNode{modTime: time.Now()} }

func split(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// lookup walks to name; caller holds mu.
func (m *MemFS) lookup(name string) (*memNode, error) {
	n := m.root
	for _, c := range split(name) {
		if !n.isDir {
			return nil, fs.ErrNotExist
		}
		nn, ok := n.children[c]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = nn
	}
	return n, nil
}

// parent returns the directory holding name and name's base; caller holds mu.
func (m *MemFS) parent(name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", fs.ErrInvalid
	}
	n := m.root
	for _, c := range parts[:len(parts)-1] {
		nn, ok := n.children[c]
		if !ok || !nn.isDir {
			return nil, "", fs.ErrNotExist
		}
		n = nn
	}
	return n, parts[len(parts)-1], nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Create implements vfs.FS.
func (m *MemFS) Create(name string) (vfs.File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Open implements vfs.FS.
func (m *MemFS) Open(name string) (vfs.File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile implements vfs.FS.
func (m *MemFS) OpenFile(name string, flag int, _ fs.FileMode) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	n, ok := dir.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case ok && n.isDir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, pathErr("open", name, errors.New("is a directory"))
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !ok:
		n = newFile()
		dir.children[base] = n
	}
	if flag&os.O_TRUNC != 0 && !n.isDir {
		n.truncate(0)
	}
	return &memFile{fs: m, n: n, name: name, write: flag&(os.O_WRONLY|os.O_RDWR) != 0, appendMode: flag&os.O_APPEND != 0}, nil
}

// Remove implements vfs.FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, errors.New("directory not empty"))
	}
	delete(dir.children, base)
	return nil
}

// RemoveAll implements vfs.FS.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return pathErr("removeall", name, err)
	}
	delete(dir.children, base)
	return nil
}

// Rename implements vfs.FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.parent(oldname)
	if err != nil {
		return pathErr("rename", oldname, err)
	}
	n, ok := od.children[ob]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	nd, nb, err := m.parent(newname)
	if err != nil {
		return pathErr("rename", newname, err)
	}
	if t, ok := nd.children[nb]; ok && t.isDir != n.isDir {
		return pathErr("rename", newname, fs.ErrExist)
	}
	delete(od.children, ob)
	nd.children[nb] = n
	return nil
}

// MkdirAll implements vfs.FS.
func (m *MemFS) MkdirAll(dir string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, c := range split(dir) {
		nn, ok := n.children[c]
		if !ok {
			nn = newDir()
			n.children[c] = nn
		} else if !nn.isDir {
			return pathErr("mkdir", dir, fs.ErrExist)
		}
		n = nn
	}
	return nil
}

// ReadDir implements vfs.FS.
func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	if !n.isDir {
		return nil, pathErr("readdir", dir, errors.New("not a directory"))
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for name, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(c.info(name)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Stat implements vfs.FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return n.info(path.Base(path.Clean("/" + name))), nil
}

// SyncDir implements vfs.FS: dir's current entries become durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return pathErr("syncdir", dir, err)
	}
	if !n.isDir {
		return pathErr("syncdir", dir, errors.New("not a directory"))
	}
	n.synced = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.synced[k] = v
	}
	return nil
}

// CrashClone returns a new MemFS holding exactly the durable state of m: what
// a machine would find after a power loss now. m is unchanged and stays
// usable.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	return &MemFS{root: cloneDurable(m.root, seen)}
}

func cloneDurable(n *memNode, seen map[*memNode]*memNode) *memNode {
	if c, ok := seen[n]; ok {
		return c
	}
	if n.isDir {
		c := newDir()
		seen[n] = c
		for k, v := range n.synced {
			c.children[k] = cloneDurable(v, seen)
		}
		for k, v := range c.children {
			c.synced[k] = v
		}
		return c
	}
	c := &memNode{modTime: n.modTime, size: n.syncedSize, syncedSize: n.syncedSize}
	c.chunks = append([]*chunk(nil), n.syncedChunks...)
	c.syncedChunks = append([]*chunk(nil), n.syncedChunks...)
	seen[n] = c
	return c
}

// Durable returns the durable contents of name (what CrashClone would keep),
// for assertions; it ignores whether the directory entry is durable.
func (m *MemFS) Durable(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n.syncedSize)
	readChunks(n.syncedChunks, b, 0)
	return b, nil
}

func (n *memNode) info(name string) fs.FileInfo {
	return memInfo{name: name, size: n.size, dir: n.isDir, mod: n.modTime}
}

// --- file contents (caller holds MemFS.mu) ---

func readChunks(chunks []*chunk, p []byte, off int64) {
	for len(p) > 0 {
		ci, co := off/chunkSize, off%chunkSize
		n := min(int64(len(p)), chunkSize-co)
		if ci < int64(len(chunks)) && chunks[ci] != nil {
			copy(p[:n], chunks[ci].b[co:co+n])
		} else {
			clear(p[:n])
		}
		p, off = p[n:], off+n
	}
}

func (n *memNode) writableChunk(ci int64) *chunk {
	for int64(len(n.chunks)) <= ci {
		n.chunks = append(n.chunks, nil)
	}
	c := n.chunks[ci]
	switch {
	case c == nil:
		c = &chunk{}
		n.chunks[ci] = c
	case c.frozen:
		cp := &chunk{b: c.b}
		n.chunks[ci] = cp
		c = cp
	}
	return c
}

func (n *memNode) writeAt(p []byte, off int64) {
	end := off + int64(len(p))
	for len(p) > 0 {
		ci, co := off/chunkSize, off%chunkSize
		k := min(int64(len(p)), chunkSize-co)
		copy(n.writableChunk(ci).b[co:co+k], p[:k])
		p, off = p[k:], off+k
	}
	if end > n.size {
		n.size = end
	}
	n.modTime = time.Now()
}

// zero clears [off, off+len) within the current size.
func (n *memNode) zero(off, length int64) {
	end := min(off+length, n.size)
	for off < end {
		ci, co := off/chunkSize, off%chunkSize
		k := min(end-off, chunkSize-co)
		if ci < int64(len(n.chunks)) && n.chunks[ci] != nil {
			if co == 0 && k == chunkSize {
				n.chunks[ci] = nil
			} else {
				clear(n.writableChunk(ci).b[co : co+k])
			}
		}
		off += k
	}
}

func (n *memNode) truncate(size int64) {
	if size < n.size {
		n.zero(size, n.size-size)
		nc := (size + chunkSize - 1) / chunkSize
		if int64(len(n.chunks)) > nc {
			n.chunks = n.chunks[:nc]
		}
	}
	n.size = size
	n.modTime = time.Now()
}

func (n *memNode) sync() {
	for _, c := range n.chunks {
		if c != nil {
			c.frozen = true
		}
	}
	n.syncedChunks = append(n.syncedChunks[:0:0], n.chunks...)
	n.syncedSize = n.size
}

type memFile struct {
	fs         *MemFS
	n          *memNode
	name       string
	write      bool
	appendMode bool
	mu         sync.Mutex // guards pos and closed
	pos        int64
	closed     bool
}

var _ vfs.File = (*memFile)(nil)

var errClosed = errors.New("errorfs: file already closed")

func (f *memFile) check(op string, write bool) error {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return pathErr(op, f.name, errClosed)
	}
	if f.n.isDir && op != "stat" && op != "close" && op != "sync" {
		return pathErr(op, f.name, errors.New("is a directory"))
	}
	if write && !f.write {
		return pathErr(op, f.name, errors.New("bad file descriptor"))
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= f.n.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.n.size-off)
	readChunks(f.n.chunks, p[:n], off)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.n.writeAt(p, off)
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.appendMode {
		f.pos = f.n.size
	}
	f.n.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteV(bufs [][]byte, off int64) (int, error) {
	if err := f.check("pwritev", true); err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	total := 0
	for _, b := range bufs {
		f.n.writeAt(b, off+int64(total))
		total += len(b)
	}
	return total, nil
}

func (f *memFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, errClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if !f.n.isDir {
		f.n.sync()
	}
	return nil
}

func (f *memFile) Datasync() error { return f.Sync() }

func (f *memFile) SyncRange(off, n int64) error { return f.check("sync_file_range", true) }

func (f *memFile) Preallocate(off, n int64) error {
	if err := f.check("fallocate", true); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off+n > f.n.size {
		f.n.size = off + n
	}
	return nil
}

func (f *memFile) PunchHole(off, n int64) error {
	if err := f.check("punch hole", true); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.n.zero(off, n)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.n.truncate(size)
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.n.info(path.Base(path.Clean("/" + f.name))), nil
}

func (f *memFile) Name() string { return f.name }
func (f *memFile) Fd() uintptr  { return ^uintptr(0) }

// Allocated returns the bytes of name's current contents that are backed by
// memory (holes and never-written ranges excluded), like st_blocks*512.
func (m *MemFS) Allocated(name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return 0, err
	}
	var a int64
	for _, c := range n.chunks {
		if c != nil {
			a += chunkSize
		}
	}
	return a, nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
