package backupfile

import (
	"errors"
	"fmt"

	"bighive/storage/memstore"
)

// EntryIterator is a memstore.Iterator over the entries of a sequence of
// chunks, read once from first to last (what tsfile.Write needs: First,
// then Next). It checks that the entries come in strictly increasing
// memstore.Compare order; an entry out of order, or a chunk that does not
// decode, ends it with an error naming the chunk.
type EntryIterator struct {
	next    func() ([]byte, error)
	entries []memstore.Entry
	i       int
	chunk   int
	prev    memstore.Entry
	started bool
	err     error
}

// NewEntryIterator reads chunks from next, which returns io.EOF (or any
// error wrapping it) after the last.
func NewEntryIterator(next func() ([]byte, error)) *EntryIterator {
	return &EntryIterator{next: next}
}

// errEnd ends the chunks.
var errEnd = errors.New("end")

func (it *EntryIterator) load() {
	for it.err == nil && it.i >= len(it.entries) {
		chunk, err := it.next()
		if err != nil {
			it.entries, it.i = nil, 0
			if !isEOF(err) {
				it.err = err
			} else {
				it.err = errEnd
			}
			return
		}
		it.chunk++
		it.entries, it.i = it.entries[:0], 0
		derr := DecodeChunk(chunk, func(e *memstore.Entry) error {
			c := e.Clone()
			if it.started && memstore.Compare(&it.prev, &c) >= 0 {
				return fmt.Errorf("entry %s is not after %s", &c, &it.prev)
			}
			it.prev, it.started = c, true
			it.entries = append(it.entries, c)
			return nil
		})
		if derr != nil {
			it.err = fmt.Errorf("%w: chunk %d: %v", ErrCorrupt, it.chunk, derr)
		}
	}
}

// First positions it at the first entry; it may be called only before
// the first Next.
func (it *EntryIterator) First() { it.load() }

// SeekGE is not supported: the chunks are read once.
func (it *EntryIterator) SeekGE(*memstore.Entry) {
	it.err = errors.New("backupfile: EntryIterator reads forward only")
}

// Valid says whether Entry is an entry.
func (it *EntryIterator) Valid() bool { return it.err == nil && it.i < len(it.entries) }

// Entry is the current entry.
func (it *EntryIterator) Entry() *memstore.Entry { return &it.entries[it.i] }

// Next moves to the next entry.
func (it *EntryIterator) Next() {
	it.i++
	it.load()
}

// Err is the error that ended the iterator, nil at the end of the chunks.
func (it *EntryIterator) Err() error {
	if it.err == errEnd {
		return nil
	}
	return it.err
}

// Close does nothing.
func (it *EntryIterator) Close() error { return nil }
