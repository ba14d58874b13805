package blockstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"bighive/storage/vfs"
)

// File names of the file block manager: <dir>/<16 hex id>.block, written
// as <16 hex id>.block.tmp until committed. They must not change.
const blockSuffix = ".block"

func blockFileName(id BlockID) string { return id.String() + blockSuffix }

func parseBlockFileName(name string) (BlockID, bool) {
	if !strings.HasSuffix(name, blockSuffix) {
		return 0, false
	}
	id, err := ParseBlockID(strings.TrimSuffix(name, blockSuffix))
	return id, err == nil
}

// fileManager stores one file per block (Kudu's FileBlockManager). A block
// is written to a temp file; its commit is fdatasync → rename → directory
// fsync, so a block never closed is never visible.
type fileManager struct {
	opts    Options
	dirs    []*dataDir
	ids     idAllocator
	blocks  *shardedMap[*fileBlock]
	pending pendingSet
	closed  atomic.Bool
	place   func(CreateBlockOptions) (*dataDir, error)
}

var _ Manager = (*fileManager)(nil)

type fileBlock struct {
	d    *dataDir
	id   BlockID
	path string
	n    int64
}

func openFile(opts Options, env *bmEnv) (Manager, error) {
	start := time.Now()
	m := &fileManager{opts: opts, blocks: newShardedMap[*fileBlock](), place: env.place}
	rep := env.rep
	var maxID uint64
	var dirErrs []error
	for _, d := range env.dirs {
		n, err := m.loadDir(d, rep, env.progress, &maxID)
		if err != nil {
			if env.skip(d, err) {
				dirErrs = append(dirErrs, err)
				for _, b := range n {
					m.blocks.remove(b)
				}
				continue
			}
			return nil, err
		}
		m.dirs = append(m.dirs, d)
	}
	if len(m.dirs) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrAllDirsFailed, errors.Join(dirErrs...))
	}
	if err := rep.FatalError(); err != nil {
		return nil, err
	}
	m.ids.init(maxID)
	opts.Logger.Info("blockstore: opened", "kind", KindFile, "dirs", len(m.dirs), "blocks", rep.LiveBlocks,
		"findings", len(rep.Findings), "read_only", opts.ReadOnly, "took", time.Since(start))
	return m, nil
}

// loadDir indexes the block files of d and removes its temp files (unless
// ReadOnly). It returns the blocks it indexed, for the caller to drop if d
// failed.
func (m *fileManager) loadDir(d *dataDir, rep *Report, prog *Progress, maxID *uint64) ([]BlockID, error) {
	opts := m.opts
	var added []BlockID
	ents, err := d.fs.ReadDir(d.path)
	if err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: list %s: %w", d.path, err))
	}
	for _, e := range ents {
		if _, ok := parseBlockFileName(e.Name()); ok {
			prog.total.Add(1)
		}
	}
	for _, e := range ents {
		name := filepath.Join(d.path, e.Name())
		if strings.HasSuffix(e.Name(), vfs.TempSuffix) {
			rep.add(Finding{Kind: TempFile, File: name, Offset: -1, Detail: "block never committed"})
			if !opts.ReadOnly {
				if err := d.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return added, d.ioError(fmt.Errorf("blockstore: remove %s: %w", name, err))
				}
				rep.markRepaired(TempFile, name)
			}
			continue
		}
		id, ok := parseBlockFileName(e.Name())
		if !ok {
			continue
		}
		st, err := d.fs.Stat(name)
		if err != nil {
			return added, d.ioError(fmt.Errorf("blockstore: stat %s: %w", name, err))
		}
		prog.processed.Add(1)
		if !m.blocks.insert(id, &fileBlock{d: d, id: id, path: name, n: st.Size()}) {
			rep.add(Finding{Kind: MalformedRecord, File: name, Offset: -1,
				Detail: fmt.Sprintf("block %s exists in two directories", id)})
			continue
		}
		added = append(added, id)
		*maxID = max(*maxID, uint64(id))
		rep.LiveBlocks++
		rep.LiveBytes += st.Size()
	}
	return added, nil
}

func (m *fileManager) CreateBlock(opts CreateBlockOptions) (WritableBlock, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	d, err := m.place(opts)
	if err != nil {
		return nil, err
	}
	id := m.ids.next(func(id BlockID) bool { return m.blocks.has(id) || m.pending.has(id) })
	final := filepath.Join(d.path, blockFileName(id))
	tmp := final + vfs.TempSuffix
	f, err := d.opener.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: create %s: %w", tmp, err))
	}
	m.pending.add(id)
	return &fileWritable{m: m, d: d, id: id, f: f, tmp: tmp, final: final}, nil
}

func (m *fileManager) OpenBlock(id BlockID) (ReadableBlock, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	var b *fileBlock
	m.blocks.get(id, func(x *fileBlock) { b = x })
	if b == nil && m.opts.ReadOnly {
		// The owner may have committed it since this view opened.
		found, err := m.lookFor(id)
		if found {
			m.blocks.get(id, func(x *fileBlock) { b = x })
		}
		if b == nil {
			return nil, notFound(id, m.dirs, err)
		}
	}
	if b == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err := b.d.checkHealthy(); err != nil {
		return nil, fmt.Errorf("blockstore: block %s: %w", id, err)
	}
	f, err := b.d.openRO(b.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // deleted meanwhile
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, b.d.ioError(fmt.Errorf("blockstore: open %s: %w", b.path, err))
	}
	return &fileReadable{b: b, f: f}, nil
}

func (m *fileManager) NewCreationTransaction() CreationTransaction { return &fileCreation{m: m} }
func (m *fileManager) NewDeletionTransaction() DeletionTransaction { return &fileDeletion{m: m} }

func (m *fileManager) AllBlockIDs() ([]BlockID, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	return m.blocks.keys(), nil
}

func (m *fileManager) NotifyBlockID(id BlockID) { m.ids.raise(uint64(id)) }

func (m *fileManager) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	for _, d := range m.dirs {
		d.pool.wait()
	}
	return nil
}

type fileWritable struct {
	m     *fileManager
	d     *dataDir
	id    BlockID
	f     vfs.File
	tmp   string
	final string
	mu    sync.Mutex
	n     int64
	state State
	inTxn bool
	flush sync.WaitGroup // pending pre-flush
}

var _ WritableBlock = (*fileWritable)(nil)

func (b *fileWritable) ID() BlockID { return b.id }
func (b *fileWritable) BytesAppended() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}
func (b *fileWritable) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
func (b *fileWritable) Append(p []byte) error { return b.AppendV(p) }

func (b *fileWritable) AppendV(ps ...[]byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Clean && b.state != Dirty {
		return fmt.Errorf("%w: append to block %s in state %s", ErrBlockState, b.id, b.state)
	}
	var total int64
	for _, p := range ps {
		total += int64(len(p))
	}
	if total == 0 {
		return nil
	}
	if _, err := b.f.WriteV(ps, b.n); err != nil {
		return b.d.ioError(fmt.Errorf("blockstore: pwritev %s at %d: %w", b.tmp, b.n, err))
	}
	b.n += total
	b.state = Dirty
	return nil
}

func (b *fileWritable) Finalize() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finalizeLocked()
}

func (b *fileWritable) finalizeLocked() error {
	switch b.state {
	case Finalized:
		return nil
	case Closed:
		return fmt.Errorf("%w: finalize block %s in state %s", ErrBlockState, b.id, b.state)
	}
	b.state = Finalized
	if b.m.opts.PreFlush == PreFlushFinalize && b.n > 0 {
		f, n := b.f, b.n
		b.flush.Add(1)
		b.d.pool.submit(func() {
			defer b.flush.Done()
			_ = f.SyncRange(0, n)
		})
	}
	return nil
}

func (b *fileWritable) Close() error {
	t := &fileCreation{m: b.m}
	t.AddCreatedBlock(b)
	return t.CommitCreatedBlocks()
}

func (b *fileWritable) Abort() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Closed {
		return fmt.Errorf("%w: abort block %s in state %s", ErrBlockState, b.id, b.state)
	}
	b.state = Closed
	b.flush.Wait() // a pre-flush may still use the file
	err := b.f.Close()
	if rerr := b.d.fs.Remove(b.tmp); rerr != nil && err == nil {
		err = b.d.ioError(rerr)
	}
	b.m.pending.del(b.id)
	return err
}

type fileCreation struct {
	m      *fileManager
	mu     sync.Mutex
	blocks []*fileWritable
	bad    []error
	done   bool
}

func (t *fileCreation) AddCreatedBlock(wb WritableBlock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := wb.(*fileWritable)
	if !ok || b.m != t.m {
		t.bad = append(t.bad, fmt.Errorf("%w: %v", ErrForeignBlock, wb.ID()))
		return
	}
	t.blocks = append(t.blocks, b)
}

// CommitCreatedBlocks syncs every block file (in parallel), renames each to
// its final name and fsyncs each directory once, then registers the blocks.
func (t *fileCreation) CommitCreatedBlocks() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return ErrTransactionDone
	}
	t.done = true
	if len(t.bad) > 0 {
		return errors.Join(t.bad...)
	}
	if t.m.closed.Load() {
		return ErrClosed
	}
	var errs []error
	var blocks []*fileWritable
	seen := map[*fileWritable]bool{}
	for _, b := range t.blocks {
		if seen[b] {
			continue
		}
		seen[b] = true
		b.mu.Lock()
		if b.state == Closed || b.inTxn {
			errs = append(errs, fmt.Errorf("%w: commit block %s in state %s", ErrBlockState, b.id, b.state))
		} else {
			b.finalizeLocked()
			b.inTxn = true
			blocks = append(blocks, b)
		}
		b.mu.Unlock()
	}
	if len(errs) > 0 {
		for _, b := range blocks {
			b.mu.Lock()
			b.inTxn = false
			b.mu.Unlock()
		}
		return errors.Join(errs...)
	}
	res := make([]error, len(blocks))
	var wg sync.WaitGroup
	for i, b := range blocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if t.m.opts.PreFlush == PreFlushClose && b.n > 0 {
				_ = b.f.SyncRange(0, b.n)
			}
			if err := b.f.Datasync(); err != nil {
				res[i] = b.d.ioError(fmt.Errorf("blockstore: fdatasync %s: %w", b.tmp, err))
				return
			}
			if err := b.d.fs.Rename(b.tmp, b.final); err != nil {
				res[i] = b.d.ioError(fmt.Errorf("blockstore: rename %s: %w", b.tmp, err))
			}
		}()
	}
	wg.Wait()
	dirErr := map[*dataDir]error{}
	for i, b := range blocks {
		if res[i] != nil {
			continue
		}
		if _, ok := dirErr[b.d]; !ok {
			if err := b.d.fs.SyncDir(b.d.path); err != nil {
				dirErr[b.d] = b.d.ioError(fmt.Errorf("blockstore: fsync dir %s: %w", b.d.path, err))
			} else {
				dirErr[b.d] = nil
			}
		}
		res[i] = dirErr[b.d]
	}
	for i, b := range blocks {
		b.mu.Lock()
		b.inTxn = false
		b.mu.Unlock()
		if res[i] != nil {
			errs = append(errs, res[i])
			b.flush.Wait()
			b.f.Close()
			b.d.fs.Remove(b.tmp)
			b.d.fs.Remove(b.final)
			b.mu.Lock()
			b.state = Closed
			b.mu.Unlock()
			t.m.pending.del(b.id)
			continue
		}
		b.flush.Wait()
		if err := b.f.Close(); err != nil {
			errs = append(errs, err)
		}
		b.mu.Lock()
		b.state = Closed
		b.mu.Unlock()
		t.m.blocks.insert(b.id, &fileBlock{d: b.d, id: b.id, path: b.final, n: b.n})
		t.m.pending.del(b.id)
	}
	return errors.Join(errs...)
}

type fileDeletion struct {
	m    *fileManager
	mu   sync.Mutex
	ids  []BlockID
	done bool
}

func (t *fileDeletion) AddDeletedBlock(id BlockID) {
	t.mu.Lock()
	t.ids = append(t.ids, id)
	t.mu.Unlock()
}

// CommitDeletedBlocks unlinks the block files; the directory is not synced,
// so a deleted block may reappear after a crash (intact). Open readers
// keep reading the unlinked file.
func (t *fileDeletion) CommitDeletedBlocks() ([]BlockID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil, ErrTransactionDone
	}
	t.done = true
	m := t.m
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	var deleted []BlockID
	var errs []error
	for _, id := range t.ids {
		b, ok := m.blocks.remove(id)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s", ErrNotFound, id))
			continue
		}
		if err := b.d.fs.Remove(b.path); err != nil {
			m.blocks.insert(id, b)
			errs = append(errs, b.d.ioError(fmt.Errorf("blockstore: remove %s: %w", b.path, err)))
			continue
		}
		deleted = append(deleted, id)
	}
	return deleted, errors.Join(errs...)
}

type fileReadable struct {
	b      *fileBlock
	f      vfs.File
	closed atomic.Bool
}

var _ ReadableBlock = (*fileReadable)(nil)

func (r *fileReadable) ID() BlockID { return r.b.id }

func (r *fileReadable) Size() (int64, error) {
	if r.closed.Load() {
		return 0, fmt.Errorf("%w: block %s is closed", ErrBlockState, r.b.id)
	}
	return r.b.n, nil
}

func (r *fileReadable) ReadAt(p []byte, off int64) (int, error) {
	if r.closed.Load() {
		return 0, fmt.Errorf("%w: block %s is closed", ErrBlockState, r.b.id)
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, off)
	}
	if off >= r.b.n {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.b.n-off)
	n, err := r.f.ReadAt(p[:want], off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == want) {
		if errors.Is(err, io.EOF) {
			return n, &CorruptionError{File: r.b.path, Offset: off + int64(n), Reason: "block file shorter than recorded"}
		}
		return n, r.b.d.ioError(fmt.Errorf("blockstore: read %s at %d: %w", r.b.path, off, err))
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

func (r *fileReadable) ReadV(off int64, ps ...[]byte) error {
	var total int64
	for _, p := range ps {
		total += int64(len(p))
	}
	if off < 0 || off+total > r.b.n {
		return fmt.Errorf("%w: [%d,+%d) of block %s of %d bytes", ErrOutOfRange, off, total, r.b.id, r.b.n)
	}
	for _, p := range ps {
		if _, err := r.ReadAt(p, off); err != nil && !(errors.Is(err, io.EOF) && off+int64(len(p)) == r.b.n) {
			return err
		}
		off += int64(len(p))
	}
	return nil
}

func (r *fileReadable) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: block %s closed twice", ErrBlockState, r.b.id)
	}
	return r.f.Close()
}

func (r *fileReadable) MemoryFootprint() int64 { return 96 }
