package blockstore

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// logBlock is a committed block in the index.
type logBlock struct {
	c   *container
	id  BlockID
	off int64
	n   int64

	mu      sync.Mutex
	refs    int64 // open ReadableBlocks
	deleted bool
}

// logWritable is a block being written into a checked-out container.
type logWritable struct {
	m     *logManager
	c     *container
	id    BlockID
	off   int64 // offset in the data file
	n     int64 // bytes appended
	state State
	inTxn bool // added to a creation transaction not yet committed
	mu    sync.Mutex
}

var _ WritableBlock = (*logWritable)(nil)

func (b *logWritable) ID() BlockID { return b.id }

func (b *logWritable) BytesAppended() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *logWritable) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *logWritable) Append(p []byte) error { return b.AppendV(p) }

func (b *logWritable) AppendV(ps ...[]byte) error {
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
	if b.c.readOnly.Load() {
		return fmt.Errorf("%w: %s", ErrContainerReadOnly, b.c.name)
	}
	at := b.off + b.n
	if err := b.c.ensureSpace(at + total); err != nil {
		return err
	}
	if _, err := b.c.data.WriteV(ps, at); err != nil {
		return b.c.fail(fmt.Errorf("pwritev %s at %d: %w", b.c.dataPath(), at, err))
	}
	b.n += total
	b.state = Dirty
	return nil
}

func (b *logWritable) Finalize() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finalizeLocked()
}

func (b *logWritable) finalizeLocked() error {
	switch b.state {
	case Finalized:
		return nil
	case Closed:
		return fmt.Errorf("%w: finalize block %s in state %s", ErrBlockState, b.id, b.state)
	}
	b.state = Finalized
	b.m.returnContainer(b.c, b.off+b.n)
	if b.m.opts.PreFlush == PreFlushFinalize && b.n > 0 {
		c, off, n := b.c, b.off, b.n
		c.dir.pool.submit(func() {
			_ = c.data.SyncRange(off, n) // a hint only; Close decides durability
		})
	}
	return nil
}

func (b *logWritable) Close() error {
	t := &logCreation{m: b.m}
	t.AddCreatedBlock(b)
	return t.CommitCreatedBlocks()
}

func (b *logWritable) Abort() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return fmt.Errorf("%w: abort block %s in state %s", ErrBlockState, b.id, b.state)
	case Clean, Dirty:
		// Still checked out: nothing after us in the file, roll back.
		b.state = Closed
		b.m.abortCheckedOut(b.c, b.off)
	case Finalized:
		b.state = Closed
		b.c.mu.Lock()
		b.c.writers--
		b.c.mu.Unlock()
		if b.n > 0 {
			// The range is garbage no record names; free it. No DELETE
			// record needs to be durable for that.
			c, iv := b.c, interval{b.off, alignUp(b.off+b.n, b.c.dir.blockSize)}
			c.dir.pool.submit(func() {
				if !c.maybeRemoveDead() && !c.readOnly.Load() {
					if err := c.data.PunchHole(iv.off, iv.end-iv.off); err != nil {
						c.fail(err)
					} else {
						c.m.punches.Add(1)
					}
				}
			})
		}
	}
	b.m.pending.del(b.id)
	return nil
}

// logCreation is a CreationTransaction of the log manager.
type logCreation struct {
	m      *logManager
	mu     sync.Mutex
	blocks []*logWritable
	bad    []error
	done   bool
}

func (t *logCreation) AddCreatedBlock(wb WritableBlock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := wb.(*logWritable)
	if !ok || b.m != t.m {
		t.bad = append(t.bad, fmt.Errorf("%w: %v", ErrForeignBlock, wb.ID()))
		return
	}
	t.blocks = append(t.blocks, b)
}

func (t *logCreation) CommitCreatedBlocks() error {
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
	// Finalize, and refuse blocks in a wrong state or twice in a commit.
	byC := map[*container][]*logWritable{}
	var order []*container
	var errs []error
	seen := map[*logWritable]bool{}
	for _, b := range t.blocks {
		if seen[b] {
			continue
		}
		seen[b] = true
		b.mu.Lock()
		if b.state == Closed || b.inTxn {
			errs = append(errs, fmt.Errorf("%w: commit block %s in state %s", ErrBlockState, b.id, b.state))
			b.mu.Unlock()
			continue
		}
		b.finalizeLocked()
		b.inTxn = true
		b.mu.Unlock()
		if byC[b.c] == nil {
			order = append(order, b.c)
		}
		byC[b.c] = append(byC[b.c], b)
	}
	if len(errs) > 0 {
		for _, b := range t.blocks {
			b.mu.Lock()
			b.inTxn = false
			b.mu.Unlock()
		}
		return errors.Join(errs...)
	}
	results := make([]error, len(order))
	var wg sync.WaitGroup
	for i, c := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.commit(byC[c])
		}()
	}
	wg.Wait()
	for i, c := range order {
		for _, b := range byC[c] {
			b.mu.Lock()
			b.inTxn = false
			if results[i] == nil {
				b.state = Closed
			}
			b.mu.Unlock()
			if results[i] != nil {
				b.Abort()
			}
		}
		if results[i] != nil {
			errs = append(errs, results[i])
		}
	}
	return errors.Join(errs...)
}

// logReadable is an open committed block.
type logReadable struct {
	b      *logBlock
	closed atomic.Bool
}

var _ ReadableBlock = (*logReadable)(nil)

func (r *logReadable) ID() BlockID { return r.b.id }

func (r *logReadable) Size() (int64, error) {
	if r.closed.Load() {
		return 0, fmt.Errorf("%w: block %s is closed", ErrBlockState, r.b.id)
	}
	return r.b.n, nil
}

func (r *logReadable) ReadAt(p []byte, off int64) (int, error) {
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
	n, err := r.b.c.data.ReadAt(p[:want], r.b.off+off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == want) {
		if int64(n) < want && errors.Is(err, io.EOF) {
			return n, &CorruptionError{File: r.b.c.dataPath(), Offset: r.b.off + off + int64(n),
				Reason: fmt.Sprintf("block %s extends past the end of the data file", r.b.id)}
		}
		return n, r.b.c.dir.ioError(fmt.Errorf("blockstore: read %s at %d: %w", r.b.c.dataPath(), r.b.off+off, err))
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

func (r *logReadable) ReadV(off int64, ps ...[]byte) error {
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

func (r *logReadable) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: block %s closed twice", ErrBlockState, r.b.id)
	}
	b := r.b
	b.mu.Lock()
	b.refs--
	free := b.refs == 0 && b.deleted
	b.mu.Unlock()
	if free {
		c := b.c
		c.mu.Lock()
		c.deferred--
		c.mu.Unlock()
		c.dir.pool.submit(func() { c.freeBlocks([]*logBlock{b}) })
	}
	return nil
}

func (r *logReadable) MemoryFootprint() int64 { return 96 }

// logDeletion is a DeletionTransaction of the log manager.
type logDeletion struct {
	m    *logManager
	mu   sync.Mutex
	ids  []BlockID
	done bool
}

func (t *logDeletion) AddDeletedBlock(id BlockID) {
	t.mu.Lock()
	t.ids = append(t.ids, id)
	t.mu.Unlock()
}

func (t *logDeletion) CommitDeletedBlocks() ([]BlockID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil, ErrTransactionDone
	}
	t.done = true
	return t.m.deleteBlocks(t.ids)
}
