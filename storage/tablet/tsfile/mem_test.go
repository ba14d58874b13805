package tsfile

import (
	"errors"
	"io"
	"sync"

	"bighive/storage/blockstore"
)

// memManager is an in-memory blockstore.Manager for the fuzz target, where
// a real store's fsyncs would make each input take milliseconds. The other
// tests run on the real block store.
type memManager struct {
	mu     sync.Mutex
	next   blockstore.BlockID
	blocks map[blockstore.BlockID][]byte
}

func newMemManager() *memManager {
	return &memManager{blocks: map[blockstore.BlockID][]byte{}}
}

type memWritable struct {
	m     *memManager
	id    blockstore.BlockID
	buf   []byte
	state blockstore.State
}

func (w *memWritable) ID() blockstore.BlockID { return w.id }
func (w *memWritable) Append(p []byte) error {
	if w.state > blockstore.Dirty {
		return errors.New("append after finalize")
	}
	w.buf = append(w.buf, p...)
	w.state = blockstore.Dirty
	return nil
}
func (w *memWritable) AppendV(ps ...[]byte) error {
	for _, p := range ps {
		if err := w.Append(p); err != nil {
			return err
		}
	}
	return nil
}
func (w *memWritable) Finalize() error { w.state = blockstore.Finalized; return nil }
func (w *memWritable) Close() error {
	w.m.mu.Lock()
	w.m.blocks[w.id] = w.buf
	w.m.mu.Unlock()
	w.state = blockstore.Closed
	return nil
}
func (w *memWritable) Abort() error            { w.state = blockstore.Closed; return nil }
func (w *memWritable) BytesAppended() int64    { return int64(len(w.buf)) }
func (w *memWritable) State() blockstore.State { return w.state }

type memReadable struct {
	id  blockstore.BlockID
	buf []byte
}

func (r *memReadable) ID() blockstore.BlockID { return r.id }
func (r *memReadable) Size() (int64, error)   { return int64(len(r.buf)), nil }
func (r *memReadable) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(r.buf)) {
		return 0, io.EOF
	}
	n := copy(p, r.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (r *memReadable) ReadV(off int64, ps ...[]byte) error {
	for _, p := range ps {
		n, err := r.ReadAt(p, off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}
func (r *memReadable) Close() error           { return nil }
func (r *memReadable) MemoryFootprint() int64 { return 0 }

func (m *memManager) CreateBlock(blockstore.CreateBlockOptions) (blockstore.WritableBlock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	return &memWritable{m: m, id: m.next}, nil
}

func (m *memManager) OpenBlock(id blockstore.BlockID) (blockstore.ReadableBlock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[id]
	if !ok {
		return nil, blockstore.ErrNotFound
	}
	return &memReadable{id: id, buf: b}, nil
}

type memTxn struct{ blocks []blockstore.WritableBlock }

func (t *memTxn) AddCreatedBlock(b blockstore.WritableBlock) { t.blocks = append(t.blocks, b) }
func (t *memTxn) CommitCreatedBlocks() error {
	for _, b := range t.blocks {
		if err := b.Close(); err != nil {
			return err
		}
	}
	return nil
}

func (m *memManager) NewCreationTransaction() blockstore.CreationTransaction { return &memTxn{} }
func (m *memManager) NewDeletionTransaction() blockstore.DeletionTransaction { return nil }
func (m *memManager) AllBlockIDs() ([]blockstore.BlockID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []blockstore.BlockID
	for id := range m.blocks {
		ids = append(ids, id)
	}
	return ids, nil
}
func (m *memManager) NotifyBlockID(blockstore.BlockID) {}
func (m *memManager) Close() error                     { return nil }
