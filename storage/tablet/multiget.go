package tablet

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"bighive/storage/memstore"
	"bighive/storage/tablet/tsfile"
)

// GetRows reads many rows from one snapshot: what Get returns for each of
// rows, without a snapshot, an iterator stack and a bloom lookup per row.
// It calls fn(i, row) for each rows[i] that has a visible cell, in
// ascending key order (the indexes of equal keys in turn, with the same
// Row), until fn returns false. rows may be in any order and repeat.
//
// The rows are sorted once; each TSFile's bloom filter is probed for all
// of them with one hash per row, and a file no row may be in is not
// opened; the sources are then walked forward once: a source already at
// or past the next row is not sought again, and a TSFile iterator that
// seeks within the page it is on decodes on from where it is instead of
// looking the page up again. A row's Key is the caller's slice; its cells
// come from one slab for many rows.
func (t *Tablet) GetRows(ctx context.Context, rows [][]byte, opts ReadOptions, fn func(i int, row Row) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	s, err := t.snapshot()
	if err != nil {
		return err
	}
	defer s.release()
	g := getRowsPool.Get().(*multiGet)
	defer g.reset()
	err = g.run(ctx, s, rows, &opts, t.opts.Now().UnixMicro(), fn)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("tablet %s: get %d rows: %w", t.opts.ID, len(rows), err)
	}
	return err
}

// multiGet is the reusable state of one GetRows (pooled: the order, hash
// and bloom arrays of a batch are not allocated per call).
type multiGet struct {
	order  []int
	hashes []uint64
	may    []bool   // may[f*n+k]: file f may hold sorted row k
	srcs   []source // buffers, then the files some row may be in
	fileOf []int    // source nbuf+j reads file fileOf[j]
	its    []memstore.Iterator
	key    memstore.Entry
}

var getRowsPool = sync.Pool{New: func() any { return new(multiGet) }}

func (g *multiGet) reset() {
	clear(g.srcs)
	clear(g.its)
	g.order, g.hashes, g.may, g.fileOf = g.order[:0], g.hashes[:0], g.may[:0], g.fileOf[:0]
	g.srcs, g.its = g.srcs[:0], g.its[:0]
	g.key = memstore.Entry{}
	getRowsPool.Put(g)
}

func (g *multiGet) run(ctx context.Context, s *snapshot, rows [][]byte, opts *ReadOptions, now int64, fn func(int, Row) bool) error {
	n := len(rows)
	for i := range rows {
		g.order = append(g.order, i)
	}
	slices.SortStableFunc(g.order, func(a, b int) int { return bytes.Compare(rows[a], rows[b]) })
	for _, i := range g.order {
		g.hashes = append(g.hashes, tsfile.RowHash(rows[i]))
	}
	for _, b := range s.bufs {
		g.srcs = append(g.srcs, source{it: b, on: true})
	}
	nbuf := len(g.srcs)
	// Each file's bloom filter, probed for every row: a file none of the
	// rows may be in gets no iterator.
	g.may = slices.Grow(g.may, len(s.files)*n)[:len(s.files)*n]
	fams := opts.families()
	for f, file := range s.files {
		may := g.may[f*n : (f+1)*n]
		if err := file.r.MayContainHashes(g.hashes, may); err != nil {
			return err
		}
		if slices.Contains(may, true) {
			g.srcs = append(g.srcs, source{it: file.r.NewIterator(fams, false)})
			g.fileOf = append(g.fileOf, f)
		}
	}
	for i := range g.srcs {
		g.its = append(g.its, &g.srcs[i])
	}
	var it memstore.Iterator = memstore.Merge(g.its...)
	if len(g.its) == 1 {
		it = g.its[0]
	}
	defer it.Close()

	var r rowReader
	r.init(&s.schema, opts, now)
	for k := 0; k < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		row := rows[g.order[k]]
		// The indexes of this key: order[k:next].
		next := k + 1
		for next < n && bytes.Equal(rows[g.order[next]], row) {
			next++
		}
		for j := nbuf; j < len(g.srcs); j++ {
			g.srcs[j].on = g.may[g.fileOf[j-nbuf]*n+k]
		}
		g.key = *memstore.RowStart(row)
		it.SeekGE(&g.key)
		found := false
		if it.Valid() && bytes.Equal(it.Entry().Row, row) {
			r.key = row
			r.readRow(it)
			if err := r.filter(); err != nil {
				return err
			}
			found = len(r.row.Cells) > 0
		}
		if err := it.Err(); err != nil {
			return err
		}
		if found {
			for _, i := range g.order[k:next] {
				if !fn(i, r.row) {
					return nil
				}
			}
		}
		k = next
	}
	return nil
}

// source is one source of a multi-get. Switched off (the file's bloom
// filter rules the row out), it is invalid for that row and keeps its
// position. Its seeks go to ascending row starts only, and every entry it
// has passed belongs to an earlier row, so a source already at or past a
// row's start, or exhausted, is left where it is.
type source struct {
	it     memstore.Iterator
	on     bool
	sought bool
}

func (s *source) SeekGE(key *memstore.Entry) {
	if !s.on {
		return
	}
	if s.sought && s.it.Err() == nil && (!s.it.Valid() || bytes.Compare(s.it.Entry().Row, key.Row) >= 0) {
		return
	}
	s.it.SeekGE(key)
	s.sought = true
}

func (s *source) First()                 { s.it.First(); s.sought = true }
func (s *source) Valid() bool            { return s.on && s.it.Valid() }
func (s *source) Entry() *memstore.Entry { return s.it.Entry() }
func (s *source) Next()                  { s.it.Next() }
func (s *source) Close() error           { return s.it.Close() }

func (s *source) Err() error {
	if !s.on {
		return nil
	}
	return s.it.Err()
}
