package blockstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
)

// File name suffixes of a log container. They must not change.
const (
	dataSuffix = ".data"
	metaSuffix = ".metadata"
)

// container is one log block container: <uuid>.data + <uuid>.metadata.
// Between CreateBlock and Finalize it is checked out by exactly one writer,
// which alone advances cursor.
type container struct {
	m    *logManager
	dir  *dataDir
	name string // path without suffix
	data vfs.File
	meta vfs.File

	readOnly atomic.Bool

	commitMu sync.Mutex // one close pipeline at a time

	metaMu    sync.Mutex // metadata appends
	metaSize  int64
	seenMeta  int64 // bytes of the metadata file last replayed (read-only refresh)
	dirtyGen  int64 // count of DELETE appends
	syncedGen int64 // dirtyGen covered by the last metadata sync
	dirSynced bool  // guarded by commitMu

	mu          sync.Mutex
	cursor      int64 // next block offset, fs-block aligned
	preallocEnd int64
	full        bool
	dead        bool
	live        int64 // committed, undeleted blocks
	total       int64 // CREATE records
	liveBytes   int64
	writers     int64 // blocks handed out, not closed or aborted
	deferred    int64 // deleted blocks still open by readers
}

func (c *container) dataPath() string { return c.name + dataSuffix }
func (c *container) metaPath() string { return c.name + metaSuffix }
func (c *container) String() string   { return c.name }

// newContainer creates the files of a fresh container. Neither file nor its
// directory entry is synced here: the first commit into the container
// syncs both files and the directory.
func (m *logManager) newContainer(d *dataDir) (*container, error) {
	name := filepath.Join(d.path, newUUID())
	data, err := d.opener.OpenFile(name+dataSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, d.ioError(fmt.Errorf("blockstore: create %s: %w", name+dataSuffix, err))
	}
	meta, err := d.opener.OpenFile(name+metaSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		data.Close()
		d.fs.Remove(name + dataSuffix)
		return nil, d.ioError(fmt.Errorf("blockstore: create %s: %w", name+metaSuffix, err))
	}
	hdr := encodeMetaHeader()
	if _, err := meta.WriteAt(hdr, 0); err != nil {
		data.Close()
		meta.Close()
		d.fs.Remove(name + dataSuffix)
		d.fs.Remove(name + metaSuffix)
		return nil, d.ioError(fmt.Errorf("blockstore: write header of %s: %w", name+metaSuffix, err))
	}
	c := &container{m: m, dir: d, name: name, data: data, meta: meta, metaSize: int64(len(hdr))}
	m.addContainer(c)
	return c, nil
}

// fail marks the container read-only after an I/O error and reports it.
func (c *container) fail(err error) error {
	if c.readOnly.CompareAndSwap(false, true) {
		c.m.opts.Logger.Error("blockstore: container is read-only after an I/O error",
			"container", c.name, "err", err)
	}
	c.dir.ioError(err)
	return fmt.Errorf("%w: %s: %w", ErrContainerReadOnly, c.name, err)
}

// isFull is true once the cursor passed the size limit or the block limit.
func (c *container) isFullLocked() bool {
	o := c.m.opts
	return c.cursor >= o.MaxContainerSize || (o.MaxBlocksPerContainer > 0 && c.total+c.writers >= o.MaxBlocksPerContainer)
}

// ensureSpace preallocates the data file in steps to cover end. Called by
// the writer holding the container.
func (c *container) ensureSpace(end int64) error {
	step := c.m.opts.PreallocateStep
	if step < 0 {
		return nil
	}
	c.mu.Lock()
	from := c.preallocEnd
	c.mu.Unlock()
	if end <= from {
		return nil
	}
	n := alignUp(end-from, step)
	if err := c.data.Preallocate(from, n); err != nil {
		return c.fail(fmt.Errorf("fallocate %s [%d,+%d): %w", c.dataPath(), from, n, err))
	}
	c.mu.Lock()
	c.preallocEnd = from + n
	c.mu.Unlock()
	return nil
}

// commit runs the close pipeline for blocks of this container, in order:
// fdatasync data → append CREATE records → fdatasync metadata → fsync the
// directory on the container's first use → register in memory.
func (c *container) commit(blocks []*logWritable) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.readOnly.Load() {
		return fmt.Errorf("%w: %s", ErrContainerReadOnly, c.name)
	}
	if c.m.opts.PreFlush == PreFlushClose {
		for _, b := range blocks {
			if b.n > 0 {
				_ = c.data.SyncRange(b.off, b.n) // a hint; fdatasync below decides
			}
		}
	}
	if err := c.data.Datasync(); err != nil {
		return c.fail(fmt.Errorf("fdatasync %s: %w", c.dataPath(), err))
	}
	now := time.Now().UnixMicro()
	var buf []byte
	for _, b := range blocks {
		off, n := b.off, b.n
		buf = appendRecord(buf, &storagepb.BlockRecord{BlockId: uint64(b.id),
			Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_CREATE, TimestampUs: now, Offset: &off, Length: &n})
	}
	if err := c.appendMeta(buf, false); err != nil {
		return err
	}
	if err := c.meta.Datasync(); err != nil {
		return c.fail(fmt.Errorf("fdatasync %s: %w", c.metaPath(), err))
	}
	if !c.dirSynced {
		if err := c.dir.fs.SyncDir(c.dir.path); err != nil {
			return c.fail(fmt.Errorf("fsync dir %s: %w", c.dir.path, err))
		}
		c.dirSynced = true
	}
	// Register.
	c.mu.Lock()
	for _, b := range blocks {
		c.live++
		c.total++
		c.liveBytes += b.n
		c.writers--
	}
	c.mu.Unlock()
	for _, b := range blocks {
		c.m.blocks.insert(b.id, &logBlock{c: c, id: b.id, off: b.off, n: b.n})
		c.m.pending.del(b.id)
	}
	return nil
}

// appendMeta appends encoded records to the metadata file.
func (c *container) appendMeta(buf []byte, dirty bool) error {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if c.readOnly.Load() {
		return fmt.Errorf("%w: %s", ErrContainerReadOnly, c.name)
	}
	if _, err := c.meta.WriteAt(buf, c.metaSize); err != nil {
		return c.fail(fmt.Errorf("append to %s at %d: %w", c.metaPath(), c.metaSize, err))
	}
	c.metaSize += int64(len(buf))
	if dirty {
		c.dirtyGen++
	}
	return nil
}

// syncMeta makes appended DELETE records durable.
func (c *container) syncMeta() error {
	c.metaMu.Lock()
	gen := c.dirtyGen
	clean := gen == c.syncedGen
	c.metaMu.Unlock()
	if clean {
		return nil
	}
	if err := c.meta.Datasync(); err != nil {
		return c.fail(fmt.Errorf("fdatasync %s: %w", c.metaPath(), err))
	}
	c.metaMu.Lock()
	c.syncedGen = max(c.syncedGen, gen)
	c.metaMu.Unlock()
	return nil
}

type interval struct{ off, end int64 }

// coalesce merges block ranges (extended to fs-block alignment) that touch.
func coalesce(blocks []*logBlock, align int64) []interval {
	iv := make([]interval, 0, len(blocks))
	for _, b := range blocks {
		if b.n == 0 {
			continue
		}
		iv = append(iv, interval{b.off, alignUp(b.off+b.n, align)})
	}
	sort.Slice(iv, func(i, j int) bool { return iv[i].off < iv[j].off })
	out := iv[:0]
	for _, x := range iv {
		if len(out) > 0 && x.off <= out[len(out)-1].end {
			out[len(out)-1].end = max(out[len(out)-1].end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

// freeBlocks frees the space of deleted blocks nobody reads any more:
// the whole container if it is dead, else hole punches of the coalesced
// ranges, after the DELETE records are durable (so a block whose space is
// gone can never reappear).
func (c *container) freeBlocks(blocks []*logBlock) {
	if c.maybeRemoveDead() {
		return
	}
	ivs := coalesce(blocks, c.dir.blockSize)
	if len(ivs) == 0 || c.readOnly.Load() {
		return
	}
	if err := c.syncMeta(); err != nil {
		return
	}
	for _, iv := range ivs {
		if err := c.data.PunchHole(iv.off, iv.end-iv.off); err != nil {
			c.fail(fmt.Errorf("punch hole %s [%d,%d): %w", c.dataPath(), iv.off, iv.end, err))
			return
		}
		c.m.punches.Add(1)
	}
}

// maybeRemoveDead removes both files of a full container with no live,
// written or still-read block. It reports whether the container is dead.
func (c *container) maybeRemoveDead() bool {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return true
	}
	if !c.full || c.live > 0 || c.writers > 0 || c.deferred > 0 {
		c.mu.Unlock()
		return false
	}
	c.dead = true
	c.mu.Unlock()
	c.m.removeContainer(c)
	// Sync the DELETE records first: if the removal is lost in a crash,
	// start-up finds the container dead again instead of its blocks live.
	if err := c.syncMeta(); err != nil {
		c.m.opts.Logger.Warn("blockstore: syncing dead container", "container", c.name, "err", err)
	}
	if err := c.removeFiles(); err != nil {
		c.m.opts.Logger.Warn("blockstore: removing dead container", "container", c.name, "err", err)
	}
	return true
}

// removeFiles closes and deletes the container's files, metadata first.
// The removal is not made durable: a dead container that reappears after a
// crash is dead again at start-up and removed by repair.
func (c *container) removeFiles() error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	var errs []error
	errs = append(errs, c.data.Close(), c.meta.Close())
	if err := c.dir.fs.Remove(c.metaPath()); err != nil {
		errs = append(errs, c.dir.ioError(err))
	}
	if err := c.dir.fs.Remove(c.dataPath()); err != nil {
		errs = append(errs, c.dir.ioError(err))
	}
	return errors.Join(errs...)
}

func (c *container) close() error {
	var errs []error
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return nil
	}
	if !c.readOnly.Load() && !c.m.opts.ReadOnly {
		errs = append(errs, c.syncMeta())
	}
	errs = append(errs, c.data.Close(), c.meta.Close())
	return errors.Join(errs...)
}
