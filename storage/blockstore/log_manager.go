package blockstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"bighive/proto/storagepb"
)

// logManager is the log-structured block manager (Kudu's LogBlockManager).
type logManager struct {
	opts    Options
	dirs    []*dataDir
	ids     idAllocator
	blocks  *shardedMap[*logBlock]
	pending pendingSet
	closed  atomic.Bool
	// place picks the directory of a new block (the FsManager's tablet
	// data dir groups).
	place    func(CreateBlockOptions) (*dataDir, error)
	progress *Progress

	cmu        sync.Mutex
	containers map[string]*container

	punches atomic.Int64 // hole punches done (Stats)

	view viewRefresh // read-only: reloads of the directories (refresh.go)
}

var _ Manager = (*logManager)(nil)

func (m *logManager) addContainer(c *container) {
	m.cmu.Lock()
	m.containers[c.name] = c
	m.cmu.Unlock()
}

func (m *logManager) removeContainer(c *container) {
	m.cmu.Lock()
	delete(m.containers, c.name)
	m.cmu.Unlock()
	d := c.dir
	d.mu.Lock()
	for i, x := range d.avail {
		if x == c {
			d.avail = append(d.avail[:i], d.avail[i+1:]...)
			break
		}
	}
	d.mu.Unlock()
}

// pickDir chooses the directory of a new block: a directory of the
// tablet's data dir group (see FsManager.place).
func (m *logManager) pickDir(opts CreateBlockOptions) (*dataDir, error) {
	return m.place(opts)
}

// checkout takes an available container of d, or creates one.
func (m *logManager) checkout(d *dataDir) (*container, error) {
	d.mu.Lock()
	for len(d.avail) > 0 {
		c := d.avail[len(d.avail)-1]
		d.avail = d.avail[:len(d.avail)-1]
		c.mu.Lock()
		ok := !c.full && !c.dead && !c.readOnly.Load()
		c.mu.Unlock()
		if ok {
			d.mu.Unlock()
			return c, nil
		}
	}
	d.mu.Unlock()
	return m.newContainer(d)
}

// returnContainer ends a writer's checkout: the cursor moves past end,
// aligned up to the filesystem block size; a full container has its data
// file truncated to the cursor and is not returned to the pool.
func (m *logManager) returnContainer(c *container, end int64) {
	c.mu.Lock()
	c.cursor = alignUp(end, c.dir.blockSize)
	full := c.isFullLocked()
	var truncate bool
	if full && !c.full {
		c.full = true
		truncate = c.preallocEnd > c.cursor
		if truncate {
			c.preallocEnd = c.cursor
		}
	}
	cursor := c.cursor
	c.mu.Unlock()
	if truncate && !c.readOnly.Load() {
		if err := c.data.Truncate(cursor); err != nil {
			c.fail(fmt.Errorf("truncate %s to %d: %w", c.dataPath(), cursor, err))
		}
	}
	if !full && !c.readOnly.Load() {
		c.dir.mu.Lock()
		c.dir.avail = append(c.dir.avail, c)
		c.dir.mu.Unlock()
	}
}

// abortCheckedOut returns a container whose writer gave up before
// Finalize; the cursor stays where the block began.
func (m *logManager) abortCheckedOut(c *container, off int64) {
	c.mu.Lock()
	c.writers--
	c.mu.Unlock()
	m.returnContainer(c, off)
}

func (m *logManager) CreateBlock(opts CreateBlockOptions) (WritableBlock, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	d, err := m.pickDir(opts)
	if err != nil {
		return nil, err
	}
	c, err := m.checkout(d)
	if err != nil {
		return nil, err
	}
	id := m.ids.next(func(id BlockID) bool { return m.blocks.has(id) || m.pending.has(id) })
	m.pending.add(id)
	c.mu.Lock()
	c.writers++
	off := c.cursor
	c.mu.Unlock()
	return &logWritable{m: m, c: c, id: id, off: off}, nil
}

func (m *logManager) OpenBlock(id BlockID) (ReadableBlock, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	seen := m.view.started.Load()
	r := m.lookup(id)
	if r == nil && m.opts.ReadOnly {
		// The owner may have committed it since this view last looked.
		err := m.view.refreshed(seen, m.refresh)
		if r = m.lookup(id); r == nil {
			return nil, notFound(id, m.dirs, err)
		}
	}
	if r == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err := r.b.c.dir.checkHealthy(); err != nil {
		r.Close()
		return nil, fmt.Errorf("blockstore: block %s: %w", id, err)
	}
	return r, nil
}

// lookup opens id if the index holds it, else returns nil.
func (m *logManager) lookup(id BlockID) *logReadable {
	var r *logReadable
	m.blocks.get(id, func(b *logBlock) {
		b.mu.Lock()
		b.refs++
		b.mu.Unlock()
		r = &logReadable{b: b}
	})
	return r
}

func (m *logManager) NewCreationTransaction() CreationTransaction { return &logCreation{m: m} }
func (m *logManager) NewDeletionTransaction() DeletionTransaction { return &logDeletion{m: m} }

func (m *logManager) AllBlockIDs() ([]BlockID, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	return m.blocks.keys(), nil
}

func (m *logManager) NotifyBlockID(id BlockID) { m.ids.raise(uint64(id)) }

// deleteBlocks removes the blocks from the index, appends their DELETE
// records (not synced) and schedules freeing their space.
func (m *logManager) deleteBlocks(ids []BlockID) ([]BlockID, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	var errs []error
	byC := map[*container][]*logBlock{}
	var order []*container
	for _, id := range ids {
		b, ok := m.blocks.remove(id)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s", ErrNotFound, id))
			continue
		}
		if byC[b.c] == nil {
			order = append(order, b.c)
		}
		byC[b.c] = append(byC[b.c], b)
	}
	var deleted []BlockID
	for _, c := range order {
		bs := byC[c]
		now := time.Now().UnixMicro()
		var buf []byte
		for _, b := range bs {
			buf = appendRecord(buf, &storagepb.BlockRecord{BlockId: uint64(b.id),
				Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_DELETE, TimestampUs: now})
		}
		if err := c.appendMeta(buf, true); err != nil {
			for _, b := range bs { // not deleted: back into the index
				m.blocks.insert(b.id, b)
			}
			errs = append(errs, err)
			continue
		}
		var free []*logBlock
		c.mu.Lock()
		for _, b := range bs {
			c.live--
			c.liveBytes -= b.n
			b.mu.Lock()
			b.deleted = true
			if b.refs == 0 {
				free = append(free, b)
			} else {
				c.deferred++
			}
			b.mu.Unlock()
			deleted = append(deleted, b.id)
		}
		c.mu.Unlock()
		// Even with nothing to punch the container may now be dead.
		c.dir.pool.submit(func() { c.freeBlocks(free) })
	}
	return deleted, errors.Join(errs...)
}

// waitBackground waits for pre-flushes and hole punches scheduled so far.
func (m *logManager) waitBackground() {
	for _, d := range m.dirs {
		d.pool.wait()
	}
}

func (m *logManager) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	m.waitBackground()
	m.cmu.Lock()
	cs := make([]*container, 0, len(m.containers))
	for _, c := range m.containers {
		cs = append(cs, c)
	}
	m.cmu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}
