package tablet

import (
	"bytes"
	"context"
	"fmt"

	"bighive/storage/memstore"
)

// KeyRange is the half-open row range [Start, End); End nil is unbounded.
type KeyRange struct {
	Start, End []byte
}

// ScanRanges calls fn for each row with a visible cell in one of ranges
// (sorted by Start, non-overlapping), until fn returns false, at most
// limit rows in all (0: no limit). Forward, rows come in ascending key
// order; reversed, in descending key order, each row's cells still in
// their usual order (family, qualifier, timestamp descending). Both
// directions see the same cells: one snapshot, the same deletes, GC policy
// and RowFilter. A reverse scan walks backwards one row at a time: it asks
// every source for the greatest row below the last one (an O(log n)
// predecessor search in a buffer, one page per file), then reads that row
// forwards; it holds one row in memory, never a range.
func (t *Tablet) ScanRanges(ctx context.Context, ranges []KeyRange, reversed bool, limit int, opts ReadOptions, fn func(Row) bool) error {
	for i := 1; i < len(ranges); i++ {
		if p := ranges[i-1]; p.End == nil || bytes.Compare(p.End, ranges[i].Start) > 0 {
			return fmt.Errorf("tablet %s: scan: ranges not sorted and disjoint at %d", t.opts.ID, i)
		}
	}
	s, err := t.snapshot()
	if err != nil {
		return err
	}
	defer s.release()
	it, err := s.iterator(&opts, nil, !reversed)
	if err != nil {
		return err
	}
	defer it.Close()
	sc := rangeScan{ctx: ctx, it: it, limit: limit, fn: fn}
	sc.r.init(&s.schema, &opts, t.opts.Now().UnixMicro())
	sc.r.lent = opts.Lent
	defer func() { t.rowsExamined.Add(sc.r.examined) }()
	if reversed {
		f, ok := it.(memstore.RowFinder)
		if !ok {
			return fmt.Errorf("tablet %s: reverse scan: %T cannot find rows backwards", t.opts.ID, it)
		}
		for i := len(ranges) - 1; i >= 0 && !sc.stop; i-- {
			err = sc.backward(f, ranges[i])
			if err != nil {
				break
			}
		}
	} else {
		for i := 0; i < len(ranges) && !sc.stop; i++ {
			err = sc.forward(ranges[i])
			if err != nil {
				break
			}
		}
	}
	if err == nil {
		err = it.Err()
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("tablet %s: scan: %w", t.opts.ID, err)
	}
	return err
}

// rangeScan is the state of one ScanRanges.
type rangeScan struct {
	ctx   context.Context
	it    memstore.Iterator
	r     rowReader
	limit int
	n     int
	fn    func(Row) bool
	stop  bool           // fn said stop or the limit is reached
	key   memstore.Entry // the seek key of a reverse step, reused
}

// row resolves the row at the iterator and hands it to fn if visible.
func (sc *rangeScan) row() error {
	// Per row examined, not per row returned: a scan over rows that are
	// all deleted or filtered out must stop too.
	if err := sc.ctx.Err(); err != nil {
		return err
	}
	sc.r.readRow(sc.it)
	if err := sc.r.filter(); err != nil {
		return err
	}
	if len(sc.r.row.Cells) == 0 {
		return nil
	}
	sc.n++
	if !sc.fn(sc.r.row) || (sc.limit > 0 && sc.n >= sc.limit) {
		sc.stop = true
	}
	return nil
}

func (sc *rangeScan) forward(kr KeyRange) error {
	it := sc.it
	for it.SeekGE(memstore.RowStart(kr.Start)); it.Valid() && !sc.stop; {
		if kr.End != nil && bytes.Compare(it.Entry().Row, kr.End) >= 0 {
			break
		}
		if err := sc.row(); err != nil {
			return err
		}
	}
	return it.Err()
}

func (sc *rangeScan) backward(f memstore.RowFinder, kr KeyRange) error {
	bound := kr.End
	for !sc.stop {
		if err := sc.ctx.Err(); err != nil {
			return err
		}
		row, ok, err := f.LastRowBefore(bound)
		if err != nil {
			return err
		}
		if !ok || bytes.Compare(row, kr.Start) < 0 {
			return nil
		}
		sc.key = *memstore.RowStart(nil)
		sc.key.Row = row
		f.SeekGE(&sc.key)
		if err := f.Err(); err != nil {
			return err
		}
		if f.Valid() && bytes.Equal(f.Entry().Row, row) {
			if err := sc.row(); err != nil {
				return err
			}
		}
		bound = row
	}
	return nil
}
