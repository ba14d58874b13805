// Package errorfs provides fault injection at the vfs seam: an FS wrapper
// that consults an Injector before every operation, combinable injectors that
// fail the Nth operation of a kind on matching paths, and a crash-simulating
// in-memory filesystem (NewCrashableMem / CrashClone) that drops every write
// not followed by a sync of its file and every create, rename or remove not
// followed by a SyncDir of its parent.
//
// Typical uses:
//
//	// fail the third fdatasync/fsync of any .metadata file
//	inj := errorfs.OnIndex(2, errorfs.And(errorfs.Kinds(errorfs.OpSync), errorfs.PathMatch("*.metadata")))
//	fs := errorfs.Wrap(vfs.Default, inj)
//
//	// crash just before the 7th mutating operation
//	mem := errorfs.NewCrashableMem()
//	var crashed *errorfs.MemFS
//	fs := errorfs.Wrap(mem, errorfs.CrashAt(6, errorfs.Mutating(), mem, &crashed))
//
// The package is test infrastructure; nothing in production wires it in.
package errorfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"

	"bighive/storage/vfs"
)

// ErrInjected is the error injectors return (wrapped in an *fs.PathError by
// the FS wrapper). Check it with errors.Is.
var ErrInjected = errors.New("errorfs: injected error")

// OpKind classifies filesystem operations.
type OpKind int

// Operation kinds. Sync covers File.Sync and File.Datasync; SyncDir is the
// directory fsync.
const (
	OpCreate      OpKind = iota // FS.Create, FS.OpenFile with O_CREATE
	OpOpen                      // FS.Open, FS.OpenFile without O_CREATE
	OpRead                      // File.ReadAt
	OpWrite                     // File.Write, WriteAt, WriteV
	OpSync                      // File.Sync, File.Datasync
	OpSyncRange                 // File.SyncRange
	OpPreallocate               // File.Preallocate (fallocate)
	OpPunchHole                 // File.PunchHole
	OpTruncate                  // File.Truncate
	OpClose                     // File.Close
	OpStat                      // FS.Stat, File.Stat
	OpRemove                    // FS.Remove, FS.RemoveAll
	OpRename                    // FS.Rename (Path is the old name, Path2 the new)
	OpMkdir                     // FS.MkdirAll
	OpReadDir                   // FS.ReadDir
	OpSyncDir                   // FS.SyncDir
	numOpKinds
)

var opNames = [...]string{"create", "open", "read", "write", "sync", "sync-range",
	"fallocate", "punch", "truncate", "close", "stat", "remove", "rename", "mkdir", "readdir", "syncdir"}

func (k OpKind) String() string {
	if k >= 0 && k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Mutates reports whether operations of kind k change durable state or the
// state a crash decides about.
func (k OpKind) Mutates() bool {
	switch k {
	case OpCreate, OpWrite, OpSync, OpPreallocate, OpPunchHole, OpTruncate,
		OpRemove, OpRename, OpMkdir, OpSyncDir:
		return true
	}
	return false
}

// Op describes one operation about to run.
type Op struct {
	Kind  OpKind
	Path  string
	Path2 string // rename target
	Off   int64  // file offset, where the kind has one
	Len   int64  // byte count, where the kind has one
}

func (o Op) String() string {
	if o.Kind == OpRename {
		return fmt.Sprintf("%s %s -> %s", o.Kind, o.Path, o.Path2)
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Path)
}

// Injector decides whether an operation fails. MaybeError is called before
// the operation runs, possibly from many goroutines at once; a non-nil
// result is returned to the caller instead of running the operation.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// Predicate selects operations.
type Predicate func(op Op) bool

// Kinds matches operations of any of the given kinds.
func Kinds(kinds ...OpKind) Predicate {
	var set [numOpKinds]bool
	for _, k := range kinds {
		set[k] = true
	}
	return func(op Op) bool { return op.Kind >= 0 && op.Kind < numOpKinds && set[op.Kind] }
}

// Mutating matches operations that change state (see OpKind.Mutates).
func Mutating() Predicate { return func(op Op) bool { return op.Kind.Mutates() } }

// PathMatch matches operations whose path (or rename target) matches the
// filepath.Match pattern, tried against the base name and the full path.
func PathMatch(pattern string) Predicate {
	m := func(p string) bool {
		if p == "" {
			return false
		}
		if ok, _ := filepath.Match(pattern, filepath.Base(p)); ok {
			return true
		}
		ok, _ := filepath.Match(pattern, p)
		return ok
	}
	return func(op Op) bool { return m(op.Path) || m(op.Path2) }
}

// And matches when every predicate matches.
func And(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if !p(op) {
				return false
			}
		}
		return true
	}
}

// Or matches when any predicate matches.
func Or(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if p(op) {
				return true
			}
		}
		return false
	}
}

// Not inverts a predicate.
func Not(p Predicate) Predicate { return func(op Op) bool { return !p(op) } }

// Always fails every operation matching p.
func Always(p Predicate) Injector {
	return InjectorFunc(func(op Op) error {
		if p(op) {
			return ErrInjected
		}
		return nil
	})
}

// Counter counts the operations matching a predicate; it never fails one.
// Use it in a dry run to learn how many crash or failure points a workload has.
type Counter struct {
	p Predicate
	n atomic.Int64
}

// NewCounter returns a Counter of operations matching p.
func NewCounter(p Predicate) *Counter { return &Counter{p: p} }

// MaybeError implements Injector.
func (c *Counter) MaybeError(op Op) error {
	if c.p(op) {
		c.n.Add(1)
	}
	return nil
}

// Count is the number of matching operations seen.
func (c *Counter) Count() int64 { return c.n.Load() }

// Nth fails the operation whose 0-based index among those matching p is n,
// and only that one. Fired reports whether it did.
type Nth struct {
	p      Predicate
	n      int64
	seen   atomic.Int64
	fired  atomic.Bool
	target atomic.Value // Op
}

// OnIndex returns an injector failing the n-th (0-based) operation matching p.
func OnIndex(n int64, p Predicate) *Nth { return &Nth{p: p, n: n} }

// MaybeError implements Injector.
func (x *Nth) MaybeError(op Op) error {
	if !x.p(op) {
		return nil
	}
	if x.seen.Add(1)-1 == x.n {
		x.fired.Store(true)
		x.target.Store(op)
		return ErrInjected
	}
	return nil
}

// Fired reports whether the injector has failed its operation.
func (x *Nth) Fired() bool { return x.fired.Load() }

// Target is the operation that was failed (zero Op if none).
func (x *Nth) Target() Op {
	op, _ := x.target.Load().(Op)
	return op
}

// Any returns the first non-nil error of the injectors, consulting each in
// order (so every counter sees every operation).
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) error {
		var first error
		for _, in := range injs {
			if err := in.MaybeError(op); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

// Toggle is an injector that can be switched on and off at run time; while
// on it fails every operation matching its predicate.
type Toggle struct {
	p  Predicate
	on atomic.Bool
}

// NewToggle returns an off Toggle over p.
func NewToggle(p Predicate) *Toggle { return &Toggle{p: p} }

// Set switches the toggle.
func (t *Toggle) Set(on bool) { t.on.Store(on) }

// MaybeError implements Injector.
func (t *Toggle) MaybeError(op Op) error {
	if t.on.Load() && t.p(op) {
		return ErrInjected
	}
	return nil
}

// CrashAt simulates a machine crash just before the n-th (0-based) operation
// matching p: it stores mem.CrashClone() — the state a reboot would find — in
// *out, and from then on fails every operation, as a dead machine would.
// Wrap mem itself (directly, or under other wrappers) for the clone to be
// meaningful.
func CrashAt(n int64, p Predicate, mem *MemFS, out **MemFS) *Crasher {
	return &Crasher{p: p, n: n, mem: mem, out: out}
}

// Crasher is the injector CrashAt returns.
type Crasher struct {
	p    Predicate
	n    int64
	mem  *MemFS
	out  **MemFS
	mu   sync.Mutex
	seen int64
	dead bool
	at   Op
}

// MaybeError implements Injector.
func (c *Crasher) MaybeError(op Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return ErrInjected
	}
	if !c.p(op) {
		return nil
	}
	if c.seen == c.n {
		c.dead = true
		c.at = op
		*c.out = c.mem.CrashClone()
		return ErrInjected
	}
	c.seen++
	return nil
}

// Crashed reports whether the crash happened, and before which operation.
func (c *Crasher) Crashed() (Op, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.dead
}

// FS wraps a vfs.FS, consulting an Injector before every operation.
type FS struct {
	fs  vfs.FS
	inj Injector
}

var _ vfs.FS = (*FS)(nil)

// Wrap returns fs with inj consulted before each of its operations and each
// operation of the files it opens.
func Wrap(fs vfs.FS, inj Injector) *FS { return &FS{fs: fs, inj: inj} }

// Unwrap returns the wrapped filesystem.
func (e *FS) Unwrap() vfs.FS { return e.fs }

func (e *FS) check(op Op) error {
	if err := e.inj.MaybeError(op); err != nil {
		return &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
	}
	return nil
}

// Create implements vfs.FS.
func (e *FS) Create(name string) (vfs.File, error) {
	if err := e.check(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: e}, nil
}

// OpenFile implements vfs.FS.
func (e *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	k := OpOpen
	if flag&createFlag != 0 {
		k = OpCreate
	}
	if err := e.check(Op{Kind: k, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: e}, nil
}

// Open implements vfs.FS.
func (e *FS) Open(name string) (vfs.File, error) {
	if err := e.check(Op{Kind: OpOpen, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: e}, nil
}

// Remove implements vfs.FS.
func (e *FS) Remove(name string) error {
	if err := e.check(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

// RemoveAll implements vfs.FS.
func (e *FS) RemoveAll(name string) error {
	if err := e.check(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

// Rename implements vfs.FS.
func (e *FS) Rename(o, n string) error {
	if err := e.check(Op{Kind: OpRename, Path: o, Path2: n}); err != nil {
		return err
	}
	return e.fs.Rename(o, n)
}

// MkdirAll implements vfs.FS.
func (e *FS) MkdirAll(d string, p fs.FileMode) error {
	if err := e.check(Op{Kind: OpMkdir, Path: d}); err != nil {
		return err
	}
	return e.fs.MkdirAll(d, p)
}

// ReadDir implements vfs.FS.
func (e *FS) ReadDir(d string) ([]fs.DirEntry, error) {
	if err := e.check(Op{Kind: OpReadDir, Path: d}); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(d)
}

// Stat implements vfs.FS.
func (e *FS) Stat(name string) (fs.FileInfo, error) {
	if err := e.check(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

// SyncDir implements vfs.FS.
func (e *FS) SyncDir(d string) error {
	if err := e.check(Op{Kind: OpSyncDir, Path: d}); err != nil {
		return err
	}
	return e.fs.SyncDir(d)
}

type file struct {
	vfs.File
	fs *FS
}

func (f *file) op(k OpKind, off, n int64) error {
	return f.fs.check(Op{Kind: k, Path: f.File.Name(), Off: off, Len: n})
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.op(OpRead, off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.op(OpWrite, off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.op(OpWrite, -1, int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *file) WriteV(bufs [][]byte, off int64) (int, error) {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	if err := f.op(OpWrite, off, n); err != nil {
		return 0, err
	}
	return f.File.WriteV(bufs, off)
}

func (f *file) Sync() error {
	if err := f.op(OpSync, 0, 0); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *file) Datasync() error {
	if err := f.op(OpSync, 0, 0); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *file) SyncRange(off, n int64) error {
	if err := f.op(OpSyncRange, off, n); err != nil {
		return err
	}
	return f.File.SyncRange(off, n)
}

func (f *file) Preallocate(off, n int64) error {
	if err := f.op(OpPreallocate, off, n); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

func (f *file) PunchHole(off, n int64) error {
	if err := f.op(OpPunchHole, off, n); err != nil {
		return err
	}
	return f.File.PunchHole(off, n)
}

func (f *file) Truncate(size int64) error {
	if err := f.op(OpTruncate, size, 0); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *file) Stat() (fs.FileInfo, error) {
	if err := f.op(OpStat, 0, 0); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

// Close always closes the underlying file (so descriptors do not leak) and
// reports an injected error if there is one.
func (f *file) Close() error {
	ierr := f.op(OpClose, 0, 0)
	err := f.File.Close()
	if ierr != nil {
		return ierr
	}
	return err
}
