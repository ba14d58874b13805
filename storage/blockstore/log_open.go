package blockstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
)

// loadedContainer is the outcome of replaying one container.
type loadedContainer struct {
	c         *container
	live      map[BlockID]*logBlock
	liveRecs  map[BlockID]parsedRecord
	dead      []*logBlock // deleted blocks
	maxID     uint64
	partialAt int64 // metadata truncation point, -1 when whole
	lowLive   bool
	excess    bool
	fatal     bool
}

func openLog(opts Options, env *bmEnv) (Manager, error) {
	start := time.Now()
	m := &logManager{opts: opts, blocks: newShardedMap[*logBlock](), containers: map[string]*container{},
		place: env.place, progress: env.progress}
	rep := env.rep
	m.dirs = env.dirs
	// Replay every directory in parallel, each with a bounded pool.
	loaded := make([][]*loadedContainer, len(m.dirs))
	dirErrs := make([]error, len(m.dirs))
	var wg sync.WaitGroup
	for i, d := range m.dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loaded[i], dirErrs[i] = m.replayDir(d, rep)
		}()
	}
	wg.Wait()
	// A directory whose disk failed is left out; other errors fail Open.
	if err := m.dropFailed(env, &loaded, dirErrs); err != nil {
		return nil, err
	}
	// Merge into the global map.
	var maxID uint64
	for _, lcs := range loaded {
		for _, lc := range lcs {
			maxID = max(maxID, lc.maxID)
			for id, b := range lc.live {
				if !m.blocks.insert(id, b) {
					rep.add(Finding{Kind: MalformedRecord, File: lc.c.metaPath(), Offset: lc.liveRecs[id].off,
						Detail: fmt.Sprintf("block %s is also in another container", id)})
				}
			}
			rep.Containers++
			rep.LiveBlocks += len(lc.live)
			rep.LiveBytes += lc.c.liveBytes
		}
	}
	m.ids.init(maxID)
	if err := rep.FatalError(); err != nil {
		m.closeLoaded(loaded)
		return nil, err
	}
	if !opts.ReadOnly {
		dirErrs = make([]error, len(m.dirs))
		for i, d := range m.dirs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dirErrs[i] = m.repairDir(d, loaded[i], rep)
			}()
		}
		wg.Wait()
		if err := m.dropFailed(env, &loaded, dirErrs); err != nil {
			return nil, err
		}
	}
	// Containers left open for writing go into the pools.
	for _, lcs := range loaded {
		for _, lc := range lcs {
			c := lc.c
			if c.dead {
				continue
			}
			m.addContainer(c)
			if !opts.ReadOnly && !c.full {
				c.dir.avail = append(c.dir.avail, c)
			}
		}
	}
	opts.Logger.Info("blockstore: opened", "kind", KindLog, "dirs", len(m.dirs), "containers", rep.Containers,
		"blocks", rep.LiveBlocks, "findings", len(rep.Findings), "read_only", opts.ReadOnly, "took", time.Since(start))
	return m, nil
}

// dropFailed leaves out of m the directories whose error is a disk
// failure (env.skip marks them failed), closing their containers. Any
// other error fails Open, as does losing every directory.
func (m *logManager) dropFailed(env *bmEnv, loaded *[][]*loadedContainer, dirErrs []error) error {
	var fatal []error
	var dirs []*dataDir
	var keep [][]*loadedContainer
	for i, d := range m.dirs {
		if e := dirErrs[i]; e != nil {
			if env.skip(d, e) {
				m.closeLoaded((*loaded)[i : i+1])
				continue
			}
			fatal = append(fatal, e)
		}
		dirs = append(dirs, d)
		keep = append(keep, (*loaded)[i])
	}
	if len(fatal) > 0 {
		m.closeLoaded(keep)
		return errors.Join(fatal...)
	}
	if len(dirs) == 0 {
		return fmt.Errorf("%w: %w", ErrAllDirsFailed, errors.Join(dirErrs...))
	}
	m.dirs, *loaded = dirs, keep
	return nil
}

func (m *logManager) closeLoaded(loaded [][]*loadedContainer) {
	for _, lcs := range loaded {
		for _, lc := range lcs {
			if lc.c.data != nil {
				lc.c.data.Close()
			}
			if lc.c.meta != nil {
				lc.c.meta.Close()
			}
		}
	}
}

// replayDir lists a directory and replays its containers with a bounded
// worker pool. Incomplete containers and temporary files are reported here
// (and removed by repair).
func (m *logManager) replayDir(d *dataDir, rep *Report) ([]*loadedContainer, error) {
	ents, err := d.fs.ReadDir(d.path)
	if err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: list %s: %w", d.path, err))
	}
	type pair struct{ data, meta bool }
	names := map[string]*pair{}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, vfs.TempSuffix):
			rep.add(Finding{Kind: TempFile, File: filepath.Join(d.path, n), Offset: -1, Detail: "left by an interrupted run"})
		case strings.HasSuffix(n, dataSuffix):
			p := names[strings.TrimSuffix(n, dataSuffix)]
			if p == nil {
				p = &pair{}
				names[strings.TrimSuffix(n, dataSuffix)] = p
			}
			p.data = true
		case strings.HasSuffix(n, metaSuffix):
			p := names[strings.TrimSuffix(n, metaSuffix)]
			if p == nil {
				p = &pair{}
				names[strings.TrimSuffix(n, metaSuffix)] = p
			}
			p.meta = true
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var mu sync.Mutex
	var out []*loadedContainer
	var errs []error
	pool := newWorkerPool(m.opts.OpenWorkersPerDir)
	for _, p := range names {
		if p.data && p.meta {
			m.progress.total.Add(1)
		}
	}
	for _, k := range keys {
		p := names[k]
		name := filepath.Join(d.path, k)
		if !p.data || !p.meta {
			missing := dataSuffix
			if !p.meta {
				missing = metaSuffix
			}
			rep.add(Finding{Kind: IncompleteContainer, File: name, Offset: -1, Detail: "missing " + missing + " file"})
			continue
		}
		pool.submit(func() {
			lc, err := m.loadContainer(d, name, rep)
			m.progress.processed.Add(1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if lc != nil {
				out = append(out, lc)
			}
		})
	}
	pool.wait()
	return out, errors.Join(errs...)
}

// loadContainer replays one container's metadata into a container-local
// map. It returns nil, nil for an incomplete container (reported).
func (m *logManager) loadContainer(d *dataDir, name string, rep *Report) (*loadedContainer, error) {
	c := &container{m: m, dir: d, name: name}
	st, err := d.fs.Stat(c.metaPath())
	if err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: stat %s: %w", c.metaPath(), err))
	}
	if st.Size() < metaHeaderSize {
		rep.add(Finding{Kind: IncompleteContainer, File: name, Offset: -1,
			Detail: fmt.Sprintf("metadata of %d bytes is too short for a header", st.Size())})
		return nil, nil
	}
	open := d.openRW
	if m.opts.ReadOnly {
		open = d.openRO
	}
	if c.meta, err = open(c.metaPath()); err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: open %s: %w", c.metaPath(), err))
	}
	if c.data, err = open(c.dataPath()); err != nil {
		c.meta.Close()
		return nil, d.ioError(fmt.Errorf("blockstore: open %s: %w", c.dataPath(), err))
	}
	lc := &loadedContainer{c: c, partialAt: -1}
	fail := func(err error) (*loadedContainer, error) {
		c.meta.Close()
		c.data.Close()
		return nil, d.ioError(err)
	}
	buf, err := readAll(c.meta)
	if err != nil {
		return fail(fmt.Errorf("blockstore: read %s: %w", c.metaPath(), err))
	}
	dst, err := c.data.Stat()
	if err != nil {
		return fail(fmt.Errorf("blockstore: stat %s: %w", c.dataPath(), err))
	}
	lc.replay(buf, dst.Size(), rep)
	c.metaSize = int64(len(buf))
	c.seenMeta = c.metaSize
	if lc.partialAt >= 0 {
		c.metaSize = lc.partialAt
	}
	c.dirSynced = true // found by listing: the entries are on disk already
	c.preallocEnd = dst.Size()
	c.full = c.isFullLocked()
	o := m.opts
	if c.full && c.live == 0 {
		rep.add(Finding{Kind: DeadContainer, File: name, Offset: -1,
			Detail: fmt.Sprintf("full, %d blocks all deleted", c.total)})
	} else if c.full && c.total > 0 && float64(c.live)/float64(c.total) <= o.CompactLiveRatio {
		lc.lowLive = true
		rep.add(Finding{Kind: LowLiveContainer, File: c.metaPath(), Offset: -1,
			Detail: fmt.Sprintf("%d of %d blocks live", c.live, c.total)})
	}
	if c.full && c.live > 0 {
		var aligned int64
		for _, b := range lc.live {
			aligned += alignUp(b.n, d.blockSize)
		}
		if got := allocatedBytes(dst); float64(got) > float64(aligned)*(1+o.ExcessSpaceFraction) {
			lc.excess = true
			rep.add(Finding{Kind: FullContainerSpace, File: c.dataPath(), Offset: -1,
				Detail: fmt.Sprintf("holds %d bytes on disk for %d aligned live bytes", got, aligned)})
		}
	}
	return lc, nil
}

// replay applies the records of a metadata file: CREATE into the local
// map, DELETE out of it, each validated against the data file size.
func (lc *loadedContainer) replay(buf []byte, dataSize int64, rep *Report) {
	c := lc.c
	recs, goodEnd, findings := parseMetadata(c.metaPath(), buf)
	for _, f := range findings {
		rep.add(f)
		if f.Kind == PartialRecord {
			lc.partialAt = goodEnd
		}
		if f.Kind.Fatal() {
			lc.fatal = true
		}
	}
	lc.live = map[BlockID]*logBlock{}
	lc.liveRecs = map[BlockID]parsedRecord{}
	created := map[BlockID]bool{}
	bs := c.dir.blockSize
	for _, pr := range recs {
		r := pr.rec
		id := BlockID(r.GetBlockId())
		bad := func(why string) {
			rep.add(Finding{Kind: MalformedRecord, File: c.metaPath(), Offset: pr.off,
				Detail: fmt.Sprintf("%s record of block %s: %s", r.GetOp(), id, why)})
		}
		switch r.GetOp() {
		case storagepb.BlockRecordOp_BLOCK_RECORD_OP_CREATE:
			if r.Offset == nil || r.Length == nil || r.GetOffset() < 0 || r.GetLength() < 0 {
				bad("missing or negative offset/length")
				continue
			}
			off, n := r.GetOffset(), r.GetLength()
			if off > dataSize || n > dataSize-off {
				bad(fmt.Sprintf("[%d,+%d) outside the data file of %d bytes", off, n, dataSize))
				continue
			}
			if created[id] {
				bad("duplicate CREATE")
				continue
			}
			created[id] = true
			b := &logBlock{c: c, id: id, off: off, n: n}
			lc.live[id] = b
			lc.liveRecs[id] = pr
			c.live++
			c.total++
			c.liveBytes += n
			c.cursor = max(c.cursor, alignUp(off+n, bs))
			lc.maxID = max(lc.maxID, uint64(id))
			if off%bs != 0 {
				rep.add(Finding{Kind: MisalignedBlock, File: c.dataPath(), Offset: off,
					Detail: fmt.Sprintf("block %s not aligned to %d", id, bs)})
			}
		case storagepb.BlockRecordOp_BLOCK_RECORD_OP_DELETE:
			b, ok := lc.live[id]
			if !ok {
				bad("DELETE without CREATE")
				continue
			}
			delete(lc.live, id)
			delete(lc.liveRecs, id)
			lc.dead = append(lc.dead, b)
			c.live--
			c.liveBytes -= b.n
		default:
			bad("unknown op")
		}
	}
}

func readAll(f vfs.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(buf) {
		return nil, err
	}
	return buf, nil
}

// repairDir fixes what replay found in one directory, in order: remove
// dead containers, truncate torn metadata tails, delete incomplete
// containers and temporary files, compact low-live metadata, truncate and
// re-punch full containers with excess space.
func (m *logManager) repairDir(d *dataDir, lcs []*loadedContainer, rep *Report) error {
	var errs []error
	for _, lc := range lcs {
		c := lc.c
		if c.full && c.live == 0 {
			c.dead = true
			if err := c.removeFiles(); err != nil {
				errs = append(errs, fmt.Errorf("blockstore: remove dead container %s: %w", c.name, err))
				continue
			}
			rep.markRepaired(DeadContainer, c.name)
		}
	}
	for _, lc := range lcs {
		c := lc.c
		if c.dead || lc.partialAt < 0 {
			continue
		}
		if err := c.meta.Truncate(lc.partialAt); err != nil {
			errs = append(errs, d.ioError(fmt.Errorf("blockstore: truncate %s to %d: %w", c.metaPath(), lc.partialAt, err)))
			c.readOnly.Store(true)
			continue
		}
		if err := c.meta.Sync(); err != nil {
			errs = append(errs, d.ioError(fmt.Errorf("blockstore: sync %s: %w", c.metaPath(), err)))
			c.readOnly.Store(true)
			continue
		}
		rep.markRepaired(PartialRecord, c.metaPath())
	}
	// Incomplete containers and temporary files of this directory.
	for _, f := range append(rep.Of(IncompleteContainer), rep.Of(TempFile)...) {
		if filepath.Dir(f.File) != filepath.Clean(d.path) {
			continue
		}
		var targets []string
		if f.Kind == TempFile {
			targets = []string{f.File}
		} else {
			targets = []string{f.File + dataSuffix, f.File + metaSuffix}
		}
		ok := true
		for _, t := range targets {
			if err := d.fs.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, d.ioError(fmt.Errorf("blockstore: remove %s: %w", t, err)))
				ok = false
			}
		}
		if ok {
			rep.markRepaired(f.Kind, f.File)
		}
	}
	for _, lc := range lcs {
		if lc.c.dead || !lc.lowLive || lc.c.readOnly.Load() {
			continue
		}
		if err := m.compactMetadata(lc); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.markRepaired(LowLiveContainer, lc.c.metaPath())
	}
	for _, lc := range lcs {
		c := lc.c
		if c.dead || !lc.excess || c.readOnly.Load() {
			continue
		}
		if c.preallocEnd > c.cursor {
			if err := c.data.Truncate(c.cursor); err != nil {
				errs = append(errs, c.fail(fmt.Errorf("truncate %s to %d: %w", c.dataPath(), c.cursor, err)))
				continue
			}
			c.preallocEnd = c.cursor
		}
		c.dirtyGen++ // the DELETE records replayed may still be in the page cache only
		c.freeBlocks(lc.dead)
		if !c.readOnly.Load() {
			rep.markRepaired(FullContainerSpace, c.dataPath())
		}
	}
	return errors.Join(errs...)
}

// compactMetadata rewrites a container's metadata with its live CREATE
// records only (ordered by timestamp, then offset), through a temp file,
// fsync, rename and directory fsync.
func (m *logManager) compactMetadata(lc *loadedContainer) error {
	c := lc.c
	recs := make([]parsedRecord, 0, len(lc.liveRecs))
	for _, r := range lc.liveRecs {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i].rec, recs[j].rec
		if a.GetTimestampUs() != b.GetTimestampUs() {
			return a.GetTimestampUs() < b.GetTimestampUs()
		}
		return a.GetOffset() < b.GetOffset()
	})
	buf := encodeMetaHeader()
	for _, r := range recs {
		buf = appendRecord(buf, r.rec)
	}
	if err := vfs.WriteFileAtomic(c.dir.fs, c.metaPath(), buf); err != nil {
		c.readOnly.Store(true)
		return c.dir.ioError(fmt.Errorf("blockstore: compact %s: %w", c.metaPath(), err))
	}
	c.dir.invalidate(c.metaPath())
	old := c.meta
	nf, err := c.dir.openRW(c.metaPath())
	if err != nil {
		c.readOnly.Store(true)
		return c.dir.ioError(fmt.Errorf("blockstore: reopen %s: %w", c.metaPath(), err))
	}
	old.Close()
	c.meta = nf
	c.metaSize = int64(len(buf))
	c.total = c.live
	return nil
}
