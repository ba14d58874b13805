package tablet

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/tsfile"
)

// CompactFiles merges the named TSFiles (their footers, Info.FooterRef;
// they must be adjacent in the read set, see Files) into one new TSFile in
// Options.Store and returns it; the read set is unchanged until
// InstallCompacted. A minor compaction (major false) keeps every entry but
// overwritten duplicates (of one key, the highest write sequence is kept),
// tombstones included: older files may hold the cells they hide. A major
// one also drops the cells that tombstones (by sequence), the family's GC
// rule (max versions, max age, nested unions and intersections) or a
// family's absence from the schema hide; when the run holds the tablet's
// oldest file it drops the tombstones too, since every cell they can hide
// is in the run (of each row, a newer file holds only higher sequences;
// across rows not, after a merge) and replay never applies a record at or
// below the files' largest sequence again (see "Compactions" in the
// package doc). A major compaction always keeps an
// entry of the run's highest sequence, so the files' largest sequence,
// which bounds replay, never goes down: that entry itself, or, for a cell
// it drops, a column tombstone of that cell's timestamp (see
// rowReader.drop). When nothing is left, the returned info has Footer 0
// and no blocks were made.
func (t *Tablet) CompactFiles(ctx context.Context, footers []blockstore.BlockRef, major bool) (TSFileInfo, error) {
	t.mu.RLock()
	picked, at, err := t.pick(footers)
	schema := t.schema
	// The read set is newest first and files only join at its front, so a
	// run that holds the last file stays the oldest until it is installed.
	oldest := err == nil && at+len(picked) == len(t.files)
	if err == nil {
		for _, f := range picked {
			f.acquire()
		}
	}
	t.mu.RUnlock()
	if err != nil {
		return TSFileInfo{}, err
	}
	defer func() {
		for _, f := range picked {
			f.release()
		}
	}()
	its := make([]memstore.Iterator, len(picked))
	for i, f := range picked {
		its[i] = f.r.NewIterator(nil, true)
	}
	var it memstore.Iterator = memstore.Merge(its...)
	if !major {
		it = &foldIter{src: it, schema: &schema}
	}
	if major {
		g := &gcIter{src: it}
		g.rr.init(&schema, &ReadOptions{}, t.opts.Now().UnixMicro())
		g.rr.gc = true
		g.rr.purge = oldest
		for _, f := range picked {
			g.rr.keepSeq = max(g.rr.keepSeq, f.info.MaxSeq)
		}
		g.rr.emit = func(e *memstore.Entry) { g.buf = append(g.buf, e.Clone()) }
		it = g
	}
	defer it.Close()
	info, err := tsfile.Write(ctx, t.opts.Store, it, t.writerOptions())
	if err == tsfile.ErrEmpty {
		return TSFileInfo{}, nil
	}
	if err != nil {
		return TSFileInfo{}, fmt.Errorf("tablet %s: compact %d files: %w", t.opts.ID, len(picked), err)
	}
	return info, nil
}

// pick finds the files in t.files, which must be adjacent. Needs t.mu.
func (t *Tablet) pick(footers []blockstore.BlockRef) ([]*file, int, error) {
	if len(footers) == 0 {
		return nil, 0, fmt.Errorf("%w: no files named", ErrUnknownFile)
	}
	want := map[blockstore.BlockRef]bool{}
	for _, ref := range footers {
		want[ref] = true
	}
	first := -1
	for i, f := range t.files {
		if want[f.info.FooterRef()] {
			first = i
			break
		}
	}
	if first < 0 || first+len(want) > len(t.files) {
		return nil, 0, fmt.Errorf("%w: %v", ErrUnknownFile, footers)
	}
	picked := t.files[first : first+len(want)]
	for _, f := range picked {
		if !want[f.info.FooterRef()] {
			return nil, 0, fmt.Errorf("%w: files %v are not adjacent in the read set", ErrUnknownFile, footers)
		}
	}
	return append([]*file(nil), picked...), first, nil
}

// foldIter is a minor compaction's output: its source's entries, except
// that the MergeCell operands of each cell of an aggregate family are
// folded, with the family's aggregator, into one operand per group of
// operands no tombstone of the run separates. Tombstones stay (older
// files may hold cells they hide), and so a group holds the operands that
// exactly the same tombstones hide: those whose sequence lies between the
// same two sequences of tombstones covering the cell. The folded operand
// has the group's newest sequence, so every tombstone of this run, of a
// newer file or of a later write hides it exactly when it hid the whole
// group (a tombstone of another file is above or below every sequence of
// the run in the row). Operands of a family absent from the schema, or no
// longer an aggregate one, pass unchanged.
type foldIter struct {
	src    memstore.Iterator
	schema *Schema

	// cur is the folded operand when folded is set; else the current
	// entry is src's.
	cur    memstore.Entry
	folded bool

	// The tombstones met so far in the current row (as rowReader).
	row      []byte
	rowSet   bool
	rowTombs []uint64
	fam      string
	famTombs []uint64
	col      []byte
	colSet   bool
	colTombs []colTomb
}

func (f *foldIter) First() {
	f.src.First()
	f.rowSet = false
	f.settle()
}

func (f *foldIter) SeekGE(key *memstore.Entry) {
	f.src.SeekGE(memstore.RowStart(key.Row))
	f.rowSet = false
	f.settle()
	for f.Valid() && bytes.Equal(f.Entry().Row, key.Row) && memstore.CompareKey(f.Entry(), key) < 0 {
		f.Next()
	}
}

func (f *foldIter) Valid() bool { return f.folded || f.src.Valid() }
func (f *foldIter) Err() error  { return f.src.Err() }
func (f *foldIter) Close() error {
	return f.src.Close()
}

func (f *foldIter) Entry() *memstore.Entry {
	if f.folded {
		return &f.cur
	}
	return f.src.Entry()
}

func (f *foldIter) Next() {
	if !f.folded {
		f.src.Next()
	}
	f.settle()
}

// settle makes the entry at src the current one, first folding it with the
// operands after it when it starts a group.
func (f *foldIter) settle() {
	f.folded = false
	if !f.src.Valid() {
		return
	}
	e := f.src.Entry()
	f.track(e)
	if e.Kind != mutation.MergeCell || len(e.Value) != OperandLen {
		return
	}
	p, ok := f.schema.Families[e.Family]
	if !ok || p.Aggregate == NoAggregate {
		return
	}
	group := f.interval(e)
	f.cur = e.Clone()
	acc := int64(binary.BigEndian.Uint64(e.Value))
	for f.src.Next(); f.src.Valid(); f.src.Next() {
		o := f.src.Entry()
		if o.Kind != mutation.MergeCell || o.Timestamp != f.cur.Timestamp || o.Family != f.cur.Family ||
			!bytes.Equal(o.Qualifier, f.cur.Qualifier) || !bytes.Equal(o.Row, f.cur.Row) ||
			len(o.Value) != OperandLen || f.interval(o) != group {
			break
		}
		acc = p.Aggregate.fold(acc, int64(binary.BigEndian.Uint64(o.Value)))
	}
	binary.BigEndian.PutUint64(f.cur.Value, uint64(acc))
	f.folded = true
}

// track records e's tombstone, resetting what a new row, family or column
// leaves behind.
func (f *foldIter) track(e *memstore.Entry) {
	if !f.rowSet || !bytes.Equal(e.Row, f.row) {
		f.row, f.rowSet = append(f.row[:0], e.Row...), true
		f.rowTombs, f.fam, f.famTombs, f.colSet = f.rowTombs[:0], "\x00", f.famTombs[:0], false
	}
	if e.Kind == mutation.DeleteRow {
		f.rowTombs = append(f.rowTombs, e.Seq)
		return
	}
	if e.Family != f.fam {
		f.fam, f.famTombs, f.colSet = e.Family, f.famTombs[:0], false
	}
	if e.Kind == mutation.DeleteFamily {
		f.famTombs = append(f.famTombs, e.Seq)
		return
	}
	if !f.colSet || !bytes.Equal(e.Qualifier, f.col) {
		f.col, f.colTombs, f.colSet = append(f.col[:0], e.Qualifier...), f.colTombs[:0], true
	}
	if e.Kind == mutation.DeleteColumn {
		f.colTombs = append(f.colTombs, colTomb{start: e.Timestamp, end: e.End, seq: e.Seq})
	}
}

// interval names the group of operand e: the lowest sequence of the
// tombstones met that cover it and were written after it (MaxUint64:
// none).
func (f *foldIter) interval(e *memstore.Entry) uint64 {
	id := uint64(math.MaxUint64)
	for _, s := range f.rowTombs {
		if s > e.Seq {
			id = min(id, s)
		}
	}
	for _, s := range f.famTombs {
		if s > e.Seq {
			id = min(id, s)
		}
	}
	for _, c := range f.colTombs {
		if c.seq > e.Seq && e.Timestamp >= c.start && (c.end == 0 || e.Timestamp < c.end) {
			id = min(id, c.seq)
		}
	}
	return id
}

// InstallCompacted replaces the named files (their footers) by the
// compacted one (Footer 0: by nothing) in one step for readers. Call it
// after the tablet metadata names the new file; the replaced files' blocks
// may be deleted, by the store that holds them, once the metadata no
// longer names them (readers still holding them keep their blocks open).
func (t *Tablet) InstallCompacted(replaced []blockstore.BlockRef, info TSFileInfo) error {
	var nf *file
	if info.Footer != 0 {
		var err error
		if nf, err = t.openOwn(info); err != nil {
			return err
		}
	}
	t.mu.Lock()
	old, at, err := t.pick(replaced)
	if err != nil {
		t.mu.Unlock()
		if nf != nil {
			nf.close()
		}
		return err
	}
	files := append([]*file(nil), t.files[:at]...)
	if nf != nil {
		files = append(files, nf)
	}
	files = append(files, t.files[at+len(old):]...)
	t.files = files
	t.mu.Unlock()
	for _, f := range old {
		f.drop()
	}
	return nil
}

// gcIter yields, row by row, the entries a major compaction keeps: the
// visible cells, the tombstones unless the compaction purges them, and the
// entry of sequence keepSeq.
type gcIter struct {
	src memstore.Iterator
	rr  rowReader
	buf []memstore.Entry
	pos int
}

func (g *gcIter) fill() {
	g.buf, g.pos = g.buf[:0], 0
	for len(g.buf) == 0 && g.src.Valid() {
		g.rr.readRow(g.src)
	}
	if g.rr.marked {
		// The tombstone that replaced the cell of sequence keepSeq goes
		// before the column's cells; an older tombstone of the same key
		// hides nothing it does not, so it goes.
		slices.SortStableFunc(g.buf, func(a, b memstore.Entry) int { return memstore.Compare(&a, &b) })
		g.buf = slices.CompactFunc(g.buf, func(a, b memstore.Entry) bool { return memstore.CompareKey(&a, &b) == 0 })
		g.rr.marked = false
	}
}

func (g *gcIter) First() { g.src.First(); g.fill() }

func (g *gcIter) SeekGE(key *memstore.Entry) {
	g.src.SeekGE(memstore.RowStart(key.Row))
	g.fill()
	for g.Valid() && bytes.Equal(g.buf[g.pos].Row, key.Row) && memstore.CompareKey(&g.buf[g.pos], key) < 0 {
		g.Next()
	}
}

func (g *gcIter) Valid() bool            { return g.pos < len(g.buf) }
func (g *gcIter) Entry() *memstore.Entry { return &g.buf[g.pos] }
func (g *gcIter) Err() error             { return g.src.Err() }
func (g *gcIter) Close() error           { return g.src.Close() }

func (g *gcIter) Next() {
	g.pos++
	if g.pos >= len(g.buf) {
		g.fill()
	}
}
