package blockstore

import (
	"errors"
	"fmt"
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
	for _, e := range []error{unix.EIO, unix.ENODEV, unix.ENXIO, unix.EROFS, unix.ESTALE, unix.EUCLEAN} {
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
	fsys, log := opts.FS, opts.Logger
	for _, d := range opts.Dirs {
		c := canonicalRoot(fsys, d)
		if !slices.Contains(fm.dataRoots, c) {
			fm.dataRoots = append(fm.dataRoots, c)
		}
	}
	fm.metaRoot = fm.dataRoots[0]
	if opts.MetadataDir != "" {
		fm.metaRoot = canonicalRoot(fsys, opts.MetadataDir)
	}
	roots := []string{fm.metaRoot}
	for _, r := range fm.dataRoots {
		if !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	rep = &Report{Dirs: append([]string(nil), fm.dataRoots...)}
	var undo rollback
	defer func() {
		if err != nil {
			fm.releaseLocks()
			if fm.ownCache && fm.cache != nil {
				fm.cache.Close()
			}
			undo.run(fsys, log)
		}
	}()

	// 2. Instance files.
	var ref *storagepb.FsInstance
	var refPath string
	missing := map[string]bool{}
	failed := map[string]error{}
	for _, r := range roots {
		inst, rerr := readInstance(fsys, r)
		switch {
		case rerr == nil:
			if ref == nil {
				ref, refPath = inst, r
			} else if inst.GetUuid() != ref.GetUuid() {
				return nil, rep, fmt.Errorf("%w: %s contains UUID %s vs. %s contains UUID %s",
					ErrUUIDMismatch, refPath, ref.GetUuid(), r, inst.GetUuid())
			}
		case isNotExist(rerr):
			missing[r] = true
		case opts.isDiskFailure(rerr):
			failed[r] = rerr
			log.Error("blockstore: root failed, skipping it", "root", r, "err", rerr)
		default:
			return nil, rep, fmt.Errorf("blockstore: instance file of %s: %w", r, rerr)
		}
	}
	if len(failed) == len(roots) {
		return nil, rep, fmt.Errorf("%w: %w", ErrAllDirsFailed, joinMap(failed))
	}
	format := false
	if ref == nil {
		if len(failed) > 0 {
			return nil, rep, fmt.Errorf("%w: no healthy instance file, and failed roots may hold one: %w",
				ErrDirFailed, joinMap(failed))
		}
		if opts.ReadOnly {
			return nil, rep, fmt.Errorf("%w: %s", ErrNotFormatted, strings.Join(roots, ", "))
		}
		format = true
		ref = newInstance(newUUID(), time.Now())
	}
	fm.uuid = ref.GetUuid()

	// 3. Instance files of new roots.
	for _, r := range roots {
		if !missing[r] {
			continue
		}
		if opts.ReadOnly {
			log.Warn("blockstore: root has no instance file; skipping it in a read-only open", "root", r)
			failed[r] = fmt.Errorf("%w: %s has no instance file", ErrNotFormatted, r)
			continue
		}
		if err := undo.mkdirAll(fsys, r); err != nil {
			return nil, rep, err
		}
		if err := checkNewRoot(fsys, r, format); err != nil {
			return nil, rep, err
		}
		p := filepath.Join(r, instanceFile)
		if err := writeInstanceFile(fsys, p, instanceMagic, ref); err != nil {
			return nil, rep, err
		}
		undo.files = append(undo.files, p)
		log.Info("blockstore: wrote instance file", "root", r, "uuid", fm.uuid, "new_file_system", format)
	}

	// 4. Data directories.
	type dirState struct {
		d    *dataDir
		inst *storagepb.FsDirInstance
	}
	var states []*dirState
	var dirErrs []error
	skip := func(r string, e error) bool {
		if !opts.isDiskFailure(e) {
			return false
		}
		log.Error("blockstore: data dir failed, opening without it", "dir", r, "err", e)
		dirErrs = append(dirErrs, e)
		return true
	}
	for _, r := range fm.dataRoots {
		if e := failed[r]; e != nil {
			dirErrs = append(dirErrs, e)
			continue
		}
		d, derr := newDataDir(opts, r)
		if derr != nil {
			if skip(r, derr) {
				continue
			}
			return nil, rep, derr
		}
		if !opts.ReadOnly {
			l, created, lerr := lockDir(fsys, r)
			if created {
				undo.files = append(undo.files, filepath.Join(r, lockFile))
			}
			if lerr != nil {
				if skip(r, lerr) {
					continue
				}
				return nil, rep, lerr
			}
			fm.locks = append(fm.locks, l)
		}
		di, ierr := readDirInstance(fsys, r)
		switch {
		case ierr == nil:
			if di.GetDirType() != opts.Kind {
				return nil, rep, fmt.Errorf("%w: %s is a %q directory, opening as %q",
					ErrKindMismatch, filepath.Join(r, dirInstanceFile), di.GetDirType(), opts.Kind)
			}
		case isNotExist(ierr):
			if opts.ReadOnly {
				log.Warn("blockstore: data dir has no directory instance file; skipping it in a read-only open", "dir", r)
				dirErrs = append(dirErrs, fmt.Errorf("%w: %s has no directory instance file", ErrNotFormatted, r))
				continue
			}
			di = nil
		default:
			if skip(r, ierr) {
				continue
			}
			return nil, rep, ierr
		}
		states = append(states, &dirState{d: d, inst: di})
	}
	// The set of directory UUIDs: every one named anywhere, then new ones.
	owner := map[string]string{}
	for _, s := range states {
		if s.inst == nil {
			continue
		}
		u := s.inst.GetDirSet().GetUuid()
		if o, dup := owner[u]; dup {
			return nil, rep, fmt.Errorf("%w: %s and %s both have directory UUID %s",
				ErrUUIDMismatch, o, s.d.path, u)
		}
		owner[u] = s.d.path
		s.d.uuid = u
	}
	addKnown := func(u string) {
		if !slices.Contains(fm.known, u) {
			fm.known = append(fm.known, u)
		}
	}
	for _, s := range states {
		if s.inst != nil {
			for _, u := range s.inst.GetDirSet().GetAllUuids() {
				addKnown(u)
			}
			addKnown(s.d.uuid)
		}
	}
	for _, s := range states {
		if s.inst == nil {
			s.d.uuid = newUUID()
			addKnown(s.d.uuid)
		}
	}
	for _, s := range states {
		if s.inst != nil {
			continue
		}
		s.inst = &storagepb.FsDirInstance{
			DirSet:                   &storagepb.FsDirSet{Uuid: s.d.uuid, AllUuids: append([]string(nil), fm.known...)},
			DirType:                  opts.Kind,
			FilesystemBlockSizeBytes: uint64(s.d.blockSize),
		}
		p := filepath.Join(s.d.path, dirInstanceFile)
		if werr := writeInstanceFile(fsys, p, dirInstanceMagic, s.inst); werr != nil {
			return nil, rep, werr
		}
		undo.files = append(undo.files, p)
	}
	if len(states) == 0 {
		return nil, rep, fmt.Errorf("%w: %w", ErrAllDirsFailed, errors.Join(dirErrs...))
	}

	// 5. Temporary files of the metadata root.
	if !opts.ReadOnly && !slices.Contains(fm.dataRoots, fm.metaRoot) && failed[fm.metaRoot] == nil {
		if terr := removeTempFiles(fsys, fm.metaRoot, rep); terr != nil {
			return nil, rep, terr
		}
	}

	// 6. The block manager.
	switch {
	case opts.FileCache != nil:
		fm.cache = opts.FileCache
	case opts.MaxOpenFiles >= 0:
		fm.cache = NewFileCache(fsys, FileCacheOptions{Capacity: opts.MaxOpenFiles, ExpiryPeriod: opts.FileCacheExpiry})
		fm.ownCache = true
	}
	env := &bmEnv{rep: rep, place: fm.place, progress: fm.progress}
	env.skip = func(d *dataDir, e error) bool {
		if !opts.isDiskFailure(e) {
			return false
		}
		fm.markDirFailed(d, e)
		return true
	}
	for _, s := range states {
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
	if opts.Kind == KindLog {
		bm, err = openLog(opts, env)
	} else {
		bm, err = openFile(opts, env)
	}
	if err != nil {
		return nil, rep, err
	}
	fm.Manager = bm

	// 7. Record new directories in the other directories' instance files.
	if !opts.ReadOnly {
		for _, s := range states {
			if s.d.failed.Load() || slices.Equal(s.inst.GetDirSet().GetAllUuids(), fm.known) {
				continue
			}
			s.inst.DirSet.AllUuids = append([]string(nil), fm.known...)
			p := filepath.Join(s.d.path, dirInstanceFile)
			if werr := writeInstanceFile(fsys, p, dirInstanceMagic, s.inst); werr != nil {
				s.d.ioError(werr)
				log.Warn("blockstore: could not update directory instance file", "file", p, "err", werr)
			}
		}
	}
	log.Info("blockstore: opened file system", "uuid", fm.uuid, "kind", opts.Kind, "roots", roots,
		"healthy_dirs", len(healthyOf(fm.dirs)), "dirs", len(fm.dataRoots), "read_only", opts.ReadOnly,
		"startup_time", time.Since(start))
	return fm, rep, nil
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
