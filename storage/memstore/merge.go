package memstore

import (
	"bytes"
	"errors"
	"fmt"
)

// Merge returns an iterator over the union of iters, newest first: iters[0]
// is the newest source. Of the entries of one key (CompareKey) only the
// first in Compare order is returned: the one with the highest Seq, and of
// equal Seqs the one of the newest source (the newer write overwrites).
// Closing the merge closes every source.
func Merge(iters ...Iterator) Iterator {
	return &merging{iters: iters}
}

type merging struct {
	iters []Iterator
	heap  []int // indexes of valid iters, heap-ordered
	err   error
	cur   Entry // key of the entry Next moves past; buffers reused
}

func (m *merging) lessIdx(a, b int) bool {
	c := Compare(m.iters[a].Entry(), m.iters[b].Entry())
	if c != 0 {
		return c < 0
	}
	return a < b
}

func (m *merging) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.lessIdx(m.heap[i], m.heap[p]) {
			break
		}
		m.heap[i], m.heap[p] = m.heap[p], m.heap[i]
		i = p
	}
}

func (m *merging) down(i int) {
	n := len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		s := l
		if r := l + 1; r < n && m.lessIdx(m.heap[r], m.heap[l]) {
			s = r
		}
		if !m.lessIdx(m.heap[s], m.heap[i]) {
			return
		}
		m.heap[i], m.heap[s] = m.heap[s], m.heap[i]
		i = s
	}
}

func (m *merging) rebuild() {
	m.heap = m.heap[:0]
	m.err = nil
	for i, it := range m.iters {
		if it.Valid() {
			m.heap = append(m.heap, i)
			m.up(len(m.heap) - 1)
		} else if err := it.Err(); err != nil {
			m.err = err
		}
	}
	if m.err != nil {
		m.heap = m.heap[:0]
	}
}

func (m *merging) SeekGE(key *Entry) {
	for _, it := range m.iters {
		it.SeekGE(key)
	}
	m.rebuild()
}

func (m *merging) First() {
	for _, it := range m.iters {
		it.First()
	}
	m.rebuild()
}

func (m *merging) Valid() bool   { return m.err == nil && len(m.heap) > 0 }
func (m *merging) Entry() *Entry { return m.iters[m.heap[0]].Entry() }
func (m *merging) Err() error    { return m.err }

// Next advances past every source's copy of the current key.
func (m *merging) Next() {
	top := m.heap[0]
	e := m.iters[top].Entry()
	m.cur = Entry{Row: append(m.cur.Row[:0], e.Row...), Family: e.Family, Qualifier: append(m.cur.Qualifier[:0], e.Qualifier...),
		Timestamp: e.Timestamp, End: e.End, Seq: e.Seq, Kind: e.Kind}
	cur := &m.cur
	for len(m.heap) > 0 {
		i := m.heap[0]
		it := m.iters[i]
		if i != top && CompareKey(it.Entry(), cur) != 0 {
			break
		}
		it.Next()
		if it.Valid() {
			m.down(0)
		} else {
			if err := it.Err(); err != nil {
				m.err = err
				m.heap = m.heap[:0]
				return
			}
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap = m.heap[:last]
			m.down(0)
		}
		top = -1
	}
}

func (m *merging) Close() error {
	var errs []error
	for _, it := range m.iters {
		errs = append(errs, it.Close())
	}
	m.heap = nil
	return errors.Join(errs...)
}

// LastRowBefore implements RowFinder: the greatest of the sources' answers.
// Every source must be a RowFinder.
func (m *merging) LastRowBefore(bound []byte) ([]byte, bool, error) {
	var best []byte
	found := false
	for _, it := range m.iters {
		f, ok := it.(RowFinder)
		if !ok {
			return nil, false, fmt.Errorf("memstore: %T cannot find rows backwards", it)
		}
		row, ok, err := f.LastRowBefore(bound)
		if err != nil {
			return nil, false, err
		}
		if ok && (!found || bytes.Compare(row, best) > 0) {
			best, found = row, true
		}
	}
	return best, found, nil
}
