package blockstore

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
)

// FsManager is a block store over several data directories (Kudu's
// FsManager and DataDirManager): it owns the instance files and locks of
// its roots, places the blocks of each tablet in the tablet's data
// directory group, isolates failed directories and opens container files
// through a FileCache. It is the Manager Open returns; reach it with
// mgr.(*FsManager) or OpenFs. All methods are safe for concurrent use.
type FsManager struct {
	Manager // the log or file block manager

	opts      Options
	uuid      string
	metaRoot  string
	dataRoots []string
	dirs      []*dataDir          // data dirs that opened, failed or not
	byUUID    map[string]*dataDir // of dirs
	known     []string            // every directory UUID of the set, failed ones included
	locks     []*dirLock
	cache     *FileCache
	ownCache  bool
	progress  *Progress
	groups    groupState
	rr        atomic.Uint64
	closed    atomic.Bool
}

var _ Manager = (*FsManager)(nil)

// Progress is Open's progress, readable from another goroutine while Open
// runs (for a progress bar or a metric): containers (block files for the
// file manager) processed out of the total found so far. Pass one in
// Options.Progress.
type Progress struct {
	processed atomic.Int64
	total     atomic.Int64
	took      atomic.Int64
	done      atomic.Bool
}

// ContainersProcessed is the number of containers replayed so far.
func (p *Progress) ContainersProcessed() int64 { return p.processed.Load() }

// ContainersTotal is the number of containers found so far; it is final
// once every directory was listed.
func (p *Progress) ContainersTotal() int64 { return p.total.Load() }

// Done reports whether Open finished (successfully or not).
func (p *Progress) Done() bool { return p.done.Load() }

// StartupTime is how long Open took, once Done.
func (p *Progress) StartupTime() time.Duration { return time.Duration(p.took.Load()) }

// bmEnv is what the FsManager hands a block manager at open.
type bmEnv struct {
	dirs     []*dataDir // healthy ones
	rep      *Report
	place    func(CreateBlockOptions) (*dataDir, error)
	progress *Progress
	// skip marks d failed if err is a disk failure and reports whether it
	// did (the manager then opens without d).
	skip func(d *dataDir, err error) bool
}

// healthyOf returns the dirs not marked failed.
func healthyOf(ds []*dataDir) []*dataDir {
	var out []*dataDir
	for _, d := range ds {
		if !d.failed.Load() {
			out = append(out, d)
		}
	}
	return out
}

// Open opens (creating unless ReadOnly) the block store in opts.Dirs:
// OpenFs, returned as a Manager.
func Open(opts Options) (Manager, *Report, error) {
	fm, rep, err := OpenFs(opts)
	if err != nil {
		return nil, rep, err
	}
	return fm, rep, nil
}

// rollback undoes what a failed Open created: files first, then
// directories in reverse order of creation.
type rollback struct {
	files []string
	dirs  []string
}

// mkdirAll creates dir and its missing parents, recording each created
// level and syncing its parent.
func (u *rollback) mkdirAll(fsys vfs.FS, dir string) error {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		ok, err := vfs.Exists(fsys, p)
		if err != nil {
			return fmt.Errorf("blockstore: stat %s: %w", p, err)
		}
		if ok {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("blockstore: create %s: %w", dir, err)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		u.dirs = append(u.dirs, missing[i])
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("blockstore: sync parent of %s: %w", missing[i], err)
		}
	}
	return nil
}

func (u *rollback) run(fsys vfs.FS, log interface{ Warn(string, ...any) }) {
	for _, f := range u.files {
		if err := fsys.Remove(f); err != nil && !isNotExist(err) {
			log.Warn("blockstore: rollback: could not remove file", "file", f, "err", err)
		}
	}
	for i := len(u.dirs) - 1; i >= 0; i-- {
		if err := fsys.Remove(u.dirs[i]); err != nil && !isNotExist(err) {
			log.Warn("blockstore: rollback: could not remove directory", "dir", u.dirs[i], "err", err)
		}
	}
}

// canonicalRoot cleans p and, on the OS filesystem, makes it absolute and
// resolves symlinks of its existing part.
func canonicalRoot(fsys vfs.FS, p string) string {
	p = filepath.Clean(p)
	if !isOSFS(fsys) {
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	var rest []string
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		if filepath.Dir(q) == q {
			return p
		}
		rest = append([]string{filepath.Base(q)}, rest...)
	}
}

func isOSFS(fsys vfs.FS) bool {
	for {
		if fsys == vfs.Default {
			return true
		}
		u, ok := fsys.(interface{ Unwrap() vfs.FS })
		if !ok {
			return false
		}
		fsys = u.Unwrap()
	}
}

// isDiskFailure reports whether err means the directory's disk failed:
// EIO and its kin, or what Options.IsDiskFailure says.
func (o Options) isDiskFailure(err error) bool {
	if err == nil {
		return false
	}
	if o.IsDiskFailure != nil {
		return o.IsDiskFailure(err)
	}
	// Not ESTALE: on a shared file system (NFS, GlusterFS) a stale file
	// handle means another host replaced the file by rename while this one
	// had it open, not a dead disk (docs/gluster.md); the operation fails
	// and its caller retries, the directory stays.
	for _, e := range []error{unix.EIO, unix.ENODEV, unix.ENXIO, unix.EROFS, unix.EUCLEAN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// OpenFs opens the file system in opts (the metadata root and the data
// roots), in this order, rolling back whatever it created if a later step
// fails:
//
//  1. canonicalize and de-duplicate the roots;
//  2. read every root's instance file: a corrupt one fails, one on a
//     failed disk is skipped, different UUIDs fail naming both;
//  3. unless ReadOnly: with no instance file anywhere, format every root
//     (new UUID); else give each root without one (a new disk, which must
//     be empty) an instance file with the existing UUID;
//  4. per data dir: take the exclusive lock (read-write only), read the
//     directory instance file (another kind is refused), give a new
//     directory its own UUID;
//  5. remove temporary files of the metadata root (the block managers
//     remove those of the data dirs);
//  6. open the block manager on the healthy dirs (progress in
//     opts.Progress);
//  7. record the UUIDs of new directories in the others' instance files.
func OpenFs(opts Options) (_ *FsManager, rep *Report, err error) {
	start := time.Now()
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if opts.Kind != KindLog && opts.Kind != KindFile {
		return nil, nil, fmt.Errorf("%w: block manager kind %q", ErrInvalidArgument, opts.Kind)
	}
	fm := &FsManager{opts: opts, progress: opts.Progress, byUUID: map[string]*dataDir{}}
	if fm.progress == nil {
		fm.progress = &Progress{}
	}
	defer func() {
		fm.progress.took.Store(int64(time.Since(start)))
		fm.progress.done.Store(true)
	}()
	o := &fsOpen{fm: fm, opts: opts, log: opts.Logger, missing: map[string]bool{}, failed: map[string]error{}}
	o.canonicalRoots()
	rep = &Report{Dirs: append([]string(nil), fm.dataRoots...)}
	o.rep = rep
	defer func() {
		if err != nil {
			fm.releaseLocks()
			if fm.ownCache && fm.cache != nil {
				fm.cache.Close()
			}
			o.undo.run(opts.FS, o.log)
		}
	}()
	for _, step := range []func() error{o.readInstances, o.instanceNewRoots, o.openDataDirs, o.removeMetaTemp, o.openManager} {
		if err := step(); err != nil {
			return nil, rep, err
		}
	}
	o.recordNewDirs()
	o.log.Info("blockstore: opened file system", "uuid", fm.uuid, "kind", opts.Kind, "roots", o.roots,
		"healthy_dirs", len(healthyOf(fm.dirs)), "dirs", len(fm.dataRoots), "read_only", opts.ReadOnly,
		"startup_time", time.Since(start))
	return fm, rep, nil
}

// fsOpen is one run of OpenFs: the state its steps share. Each step is a
// method, in the order of OpenFs's doc; a failed step's error ends the
// open and undo removes what the steps created.
type fsOpen struct {
	fm   *FsManager
	opts Options
	log  *slog.Logger
	rep  *Report
	undo rollback

	roots   []string              // the metadata root, then the data roots
	ref     *storagepb.FsInstance // the file system's instance (step 2)
	format  bool                  // no instance file anywhere: a new file system
	missing map[string]bool       // roots without an instance file
	failed  map[string]error      // roots on a failed disk
	states  []*dirState           // the data dirs that open (step 4)
	dirErrs []error               // why the others did not
}

// dirState is a data dir being opened and its directory instance (nil
// until step 4 gives a new directory one).
type dirState struct {
	d    *dataDir
	inst *storagepb.FsDirInstance
}

// canonicalRoots is step 1: canonicalize and de-duplicate the roots.
func (o *fsOpen) canonicalRoots() {
	fm, fsys := o.fm, o.opts.FS
	for _, d := range o.opts.Dirs {
		c := canonicalRoot(fsys, d)
		if !slices.Contains(fm.dataRoots, c) {
			fm.dataRoots = append(fm.dataRoots, c)
		}
	}
	fm.metaRoot = fm.dataRoots[0]
	if o.opts.MetadataDir != "" {
		fm.metaRoot = canonicalRoot(fsys, o.opts.MetadataDir)
	}
	o.roots = []string{fm.metaRoot}
	for _, r := range fm.dataRoots {
		if !slices.Contains(o.roots, r) {
			o.roots = append(o.roots, r)
		}
	}
}

// readInstances is step 2: read every root's instance file.
func (o *fsOpen) readInstances() error {
	var refPath string
	for _, r := range o.roots {
		inst, rerr := readInstance(o.opts.FS, r)
		switch {
		case rerr == nil:
			if o.ref == nil {
				o.ref, refPath = inst, r
			} else if inst.GetUuid() != o.ref.GetUuid() {
				return fmt.Errorf("%w: %s contains UUID %s vs. %s contains UUID %s",
					ErrUUIDMismatch, refPath, o.ref.GetUuid(), r, inst.GetUuid())
			}
		case isNotExist(rerr):
			o.missing[r] = true
		case o.opts.isDiskFailure(rerr):
			o.failed[r] = rerr
			o.log.Error("blockstore: root failed, skipping it", "root", r, "err", rerr)
		default:
			return fmt.Errorf("blockstore: instance file of %s: %w", r, rerr)
		}
	}
	if len(o.failed) == len(o.roots) {
		return fmt.Errorf("%w: %w", ErrAllDirsFailed, joinMap(o.failed))
	}
	if o.ref == nil {
		if len(o.failed) > 0 {
			return fmt.Errorf("%w: no healthy instance file, and failed roots may hold one: %w",
				ErrDirFailed, joinMap(o.failed))
		}
		if o.opts.ReadOnly {
			return fmt.Errorf("%w: %s", ErrNotFormatted, strings.Join(o.roots, ", "))
		}
		o.format = true
		o.ref = newInstance(newUUID(), time.Now())
	}
	o.fm.uuid = o.ref.GetUuid()
	return nil
}

// instanceNewRoots is step 3: a root without an instance file gets one
// (formatting a new file system, or a new disk, which must be empty).
func (o *fsOpen) instanceNewRoots() error {
	fsys := o.opts.FS
	for _, r := range o.roots {
		if !o.missing[r] {
			continue
		}
		if o.opts.ReadOnly {
			o.log.Warn("blockstore: root has no instance file; skipping it in a read-only open", "root", r)
			o.failed[r] = fmt.Errorf("%w: %s has no instance file", ErrNotFormatted, r)
			continue
		}
		if err := o.undo.mkdirAll(fsys, r); err != nil {
			return err
		}
		if err := checkNewRoot(fsys, r, o.format); err != nil {
			return err
		}
		p := filepath.Join(r, instanceFile)
		if err := writeInstanceFile(fsys, p, instanceMagic, o.ref); err != nil {
			return err
		}
		o.undo.files = append(o.undo.files, p)
		o.log.Info("blockstore: wrote instance file", "root", r, "uuid", o.fm.uuid, "new_file_system", o.format)
	}
	return nil
}

// skipDir reports whether a data dir's error is a disk failure, which the
// open goes on without (noting it), rather than an error that ends it.
func (o *fsOpen) skipDir(r string, e error) bool {
	if !o.opts.isDiskFailure(e) {
		return false
	}
	o.log.Error("blockstore: data dir failed, opening without it", "dir", r, "err", e)
	o.dirErrs = append(o.dirErrs, e)
	return true
}

// openDataDirs is step 4: lock each data dir (read-write only), read its
// directory instance file, and give each new directory its own UUID.
func (o *fsOpen) openDataDirs() error {
	fm, fsys, opts := o.fm, o.opts.FS, o.opts
	for _, r := range fm.dataRoots {
		if e := o.failed[r]; e != nil {
			o.dirErrs = append(o.dirErrs, e)
			continue
		}
		d, derr := newDataDir(opts, r)
		if derr != nil {
			if o.skipDir(r, derr) {
				continue
			}
			return derr
		}
		if !opts.ReadOnly {
			l, created, lerr := lockDir(fsys, r)
			if created {
				o.undo.files = append(o.undo.files, filepath.Join(r, lockFile))
			}
			if lerr != nil {
				if o.skipDir(r, lerr) {
					continue
				}
				return lerr
			}
			fm.locks = append(fm.locks, l)
		}
		di, ierr := readDirInstance(fsys, r)
		switch {
		case ierr == nil:
			if di.GetDirType() != opts.Kind {
				return fmt.Errorf("%w: %s is a %q directory, opening as %q",
					ErrKindMismatch, filepath.Join(r, dirInstanceFile), di.GetDirType(), opts.Kind)
			}
		case isNotExist(ierr):
			if opts.ReadOnly {
				o.log.Warn("blockstore: data dir has no directory instance file; skipping it in a read-only open", "dir", r)
				o.dirErrs = append(o.dirErrs, fmt.Errorf("%w: %s has no directory instance file", ErrNotFormatted, r))
				continue
			}
			di = nil
		default:
			if o.skipDir(r, ierr) {
				continue
			}
			return ierr
		}
		o.states = append(o.states, &dirState{d: d, inst: di})
	}
	if err := o.dirUUIDs(); err != nil {
		return err
	}
	if len(o.states) == 0 {
		return fmt.Errorf("%w: %w", ErrAllDirsFailed, errors.Join(o.dirErrs...))
	}
	return nil
}

// dirUUIDs settles the set of directory UUIDs: every one named anywhere,
// then a new one for each new directory, whose instance file is written.
func (o *fsOpen) dirUUIDs() error {
	fm := o.fm
	owner := map[string]string{}
	for _, s := range o.states {
		if s.inst == nil {
			continue
		}
		u := s.inst.GetDirSet().GetUuid()
		if other, dup := owner[u]; dup {
			return fmt.Errorf("%w: %s and %s both have directory UUID %s",
				ErrUUIDMismatch, other, s.d.path, u)
		}
		owner[u] = s.d.path
		s.d.uuid = u
	}
	addKnown := func(u string) {
		if !slices.Contains(fm.known, u) {
			fm.known = append(fm.known, u)
		}
	}
	for _, s := range o.states {
		if s.inst != nil {
			for _, u := range s.inst.GetDirSet().GetAllUuids() {
				addKnown(u)
			}
			addKnown(s.d.uuid)
		}
	}
	for _, s := range o.states {
		if s.inst == nil {
			s.d.uuid = newUUID()
			addKnown(s.d.uuid)
		}
	}
	for _, s := range o.states {
		if s.inst != nil {
			continue
		}
		s.inst = &storagepb.FsDirInstance{
			DirSet:                   &storagepb.FsDirSet{Uuid: s.d.uuid, AllUuids: append([]string(nil), fm.known...)},
			DirType:                  o.opts.Kind,
			FilesystemBlockSizeBytes: uint64(s.d.blockSize),
		}
		p := filepath.Join(s.d.path, dirInstanceFile)
		if werr := writeInstanceFile(o.opts.FS, p, dirInstanceMagic, s.inst); werr != nil {
			return werr
		}
		o.undo.files = append(o.undo.files, p)
	}
	return nil
}

// removeMetaTemp is step 5: remove the temporary files of the metadata
// root (the block managers remove those of the data dirs).
func (o *fsOpen) removeMetaTemp() error {
	fm := o.fm
	if !o.opts.ReadOnly && !slices.Contains(fm.dataRoots, fm.metaRoot) && o.failed[fm.metaRoot] == nil {
		return removeTempFiles(o.opts.FS, fm.metaRoot, o.rep)
	}
	return nil
}

// openManager is step 6: open the block manager on the healthy dirs.
func (o *fsOpen) openManager() error {
	fm, opts := o.fm, o.opts
	switch {
	case opts.FileCache != nil:
		fm.cache = opts.FileCache
	case opts.MaxOpenFiles >= 0:
		fm.cache = NewFileCache(opts.FS, FileCacheOptions{Capacity: opts.MaxOpenFiles, ExpiryPeriod: opts.FileCacheExpiry})
		fm.ownCache = true
	}
	env := &bmEnv{rep: o.rep, place: fm.place, progress: fm.progress}
	env.skip = func(d *dataDir, e error) bool {
		if !opts.isDiskFailure(e) {
			return false
		}
		fm.markDirFailed(d, e)
		return true
	}
	for _, s := range o.states {
		d := s.d
		d.onErr = fm.handleIOError
		if fm.cache != nil && opts.Kind == KindLog {
			d.opener = fm.cache
		}
		fm.dirs = append(fm.dirs, d)
		fm.byUUID[d.uuid] = d
		env.dirs = append(env.dirs, d)
	}
	fm.groups.init(opts.PlacementSeed)
	var bm Manager
	var err error
	if opts.Kind == KindLog {
		bm, err = openLog(opts, env)
	} else {
		bm, err = openFile(opts, env)
	}
	if err != nil {
		return err
	}
	fm.Manager = bm
	return nil
}

// recordNewDirs is step 7: record new directories in the other
// directories' instance files. A failed write is that directory's I/O
// error, not the open's.
func (o *fsOpen) recordNewDirs() {
	if o.opts.ReadOnly {
		return
	}
	fm := o.fm
	for _, s := range o.states {
		if s.d.failed.Load() || slices.Equal(s.inst.GetDirSet().GetAllUuids(), fm.known) {
			continue
		}
		s.inst.DirSet.AllUuids = append([]string(nil), fm.known...)
		p := filepath.Join(s.d.path, dirInstanceFile)
		if werr := writeInstanceFile(o.opts.FS, p, dirInstanceMagic, s.inst); werr != nil {
			s.d.ioError(werr)
			o.log.Warn("blockstore: could not update directory instance file", "file", p, "err", werr)
		}
	}
}

func joinMap(m map[string]error) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	errs := make([]error, 0, len(keys))
	for _, k := range keys {
		errs = append(errs, m[k])
	}
	return errors.Join(errs...)
}

// checkNewRoot refuses a root that is to get an instance file but holds
// other files. A new file system may adopt block files of a store written
// before instance files existed.
func checkNewRoot(fsys vfs.FS, root string, format bool) error {
	ents, err := fsys.ReadDir(root)
	if err != nil {
		return fmt.Errorf("blockstore: list %s: %w", root, err)
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case n == "lost+found", strings.HasSuffix(n, vfs.TempSuffix), n == lockFile:
			continue
		case format && (strings.HasSuffix(n, dataSuffix) || strings.HasSuffix(n, metaSuffix) || strings.HasSuffix(n, blockSuffix)):
			continue
		}
		return fmt.Errorf("%w: %s holds %s", ErrRootNotEmpty, root, n)
	}
	return nil
}

// removeTempFiles removes *.tmp directly under dir.
func removeTempFiles(fsys vfs.FS, dir string, rep *Report) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("blockstore: list %s: %w", dir, err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), vfs.TempSuffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		rep.add(Finding{Kind: TempFile, File: p, Offset: -1, Detail: "left by an interrupted run"})
		if err := fsys.Remove(p); err != nil && !isNotExist(err) {
			return fmt.Errorf("blockstore: remove %s: %w", p, err)
		}
		rep.markRepaired(TempFile, p)
	}
	return nil
}

func (fm *FsManager) releaseLocks() {
	for _, l := range fm.locks {
		l.release()
	}
	fm.locks = nil
}

// UUID is the file system's (the node's) UUID, the same in every root.
func (fm *FsManager) UUID() string { return fm.uuid }

// MetadataRoot is the root for the caller's metadata (Options.MetadataDir,
// default the first data dir).
func (fm *FsManager) MetadataRoot() string { return fm.metaRoot }

// DataDirs are the canonical data directories, in option order.
func (fm *FsManager) DataDirs() []string { return append([]string(nil), fm.dataRoots...) }

// DirUUID is the UUID of a data directory that opened ("" otherwise).
func (fm *FsManager) DirUUID(dir string) string {
	for _, d := range fm.dirs {
		if d.path == dir {
			return d.uuid
		}
	}
	return ""
}

// Progress is the start-up progress of this store.
func (fm *FsManager) Progress() *Progress { return fm.progress }

// FileCache is the descriptor cache of the store (nil without one).
func (fm *FsManager) FileCache() *FileCache { return fm.cache }

// Close closes the block manager, then the file cache (if the store made
// it), then releases the directory locks.
func (fm *FsManager) Close() error {
	if !fm.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	err := fm.Manager.Close()
	if fm.ownCache {
		err = errors.Join(err, fm.cache.Close())
	}
	fm.releaseLocks()
	return err
}

// ParseDirList splits a --fs-data-dirs value: comma-separated, blanks
// dropped.
func ParseDirList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
