package tablet

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/filter"
)

// Column names one column.
type Column struct {
	Family    string
	Qualifier []byte
}

// TimeRange selects timestamps in [Start, End); End 0 means unbounded.
type TimeRange struct {
	Start, End int64
}

// ReadOptions select what a read returns. The zero value reads every
// family and column, every version the GC policy keeps.
type ReadOptions struct {
	// Families and Columns select cells: with both empty, every cell; else
	// a cell of a listed family, or of a listed column.
	Families []string
	Columns  []Column
	// TimeRange limits timestamps; the zero value is unbounded.
	TimeRange TimeRange
	// MaxVersions returns at most the newest N versions of each column
	// (after TimeRange); 0 means all.
	MaxVersions int
	// Filter, when set, is a compiled Bigtable RowFilter evaluated on each
	// row after the selection above (families, columns, time range,
	// versions) and after deletes and the GC policy: it sees the cells the
	// read would otherwise return. A row the filter leaves with no cell is
	// not returned.
	Filter *filter.Filter
	// Stats, when set, counts what the read examines: each row that has a
	// cell after the selection above, deletes and the GC policy, and those
	// cells, before Filter runs on them (rows and cells it drops count
	// too). Not safe for concurrent reads.
	Stats *ReadStats
	// Lent says a scan's caller keeps nothing of a Row once its fn
	// returns (the tserver copies each row into a message): the scan then
	// reuses the memory of the rows it returned, and reads TSFiles with
	// lent iterators (tsfile.NewLentIterator), which read a long scan's
	// pages into buffers of their own without filling the block cache.
	// Ignored by Get and GetRows.
	Lent bool
}

// ReadStats counts the rows and cells a read examined (ReadOptions.Stats).
type ReadStats struct {
	Rows, Cells int64
}

// Cell is one returned version; Labels are set only by a RowFilter's
// apply-label transformer.
type Cell = filter.Cell

// Row is a row's returned cells, in (family, qualifier, timestamp
// descending) order. The slices are shared with the engine: do not modify.
type Row struct {
	Key   []byte
	Cells []Cell
}

// snapshot is a consistent view of the read set.
type snapshot struct {
	t      *Tablet
	schema Schema
	bufs   []memstore.Iterator // active, standby
	files  []*file
}

func (t *Tablet) snapshot() (*snapshot, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return nil, ErrClosed
	}
	// The bound first: every write at or below it is linked in its buffer
	// before the buffer snapshots below are taken (sequence.go).
	bound := t.visible.Load()
	s := &snapshot{t: t, schema: t.schema}
	s.bufs = append(s.bufs, t.active.NewIteratorAt(bound))
	if t.standby != nil {
		s.bufs = append(s.bufs, t.standby.NewIteratorAt(bound))
	}
	s.files = append(s.files, t.files...)
	for _, f := range s.files {
		f.acquire()
	}
	return s, nil
}

func (s *snapshot) release() {
	for _, f := range s.files {
		f.release()
	}
}

// iterator merges the sources, newest first. point skips files whose bloom
// filter rules the row out.
func (s *snapshot) iterator(opts *ReadOptions, pointRow []byte, scan bool) (memstore.Iterator, error) {
	its := append([]memstore.Iterator(nil), s.bufs...)
	fams := opts.families()
	for _, f := range s.files {
		if pointRow != nil {
			ok, err := f.r.MayContainRow(pointRow)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		if scan && opts.Lent {
			its = append(its, f.r.NewLentIterator(fams))
		} else {
			its = append(its, f.r.NewIterator(fams, scan))
		}
	}
	if len(its) == 1 {
		return its[0], nil
	}
	return memstore.Merge(its...), nil
}

// families returns the families a read needs, nil for all.
func (o *ReadOptions) families() []string {
	if len(o.Families) == 0 && len(o.Columns) == 0 {
		return nil
	}
	out := append([]string(nil), o.Families...)
	for _, c := range o.Columns {
		out = append(out, c.Family)
	}
	return out
}

func (o *ReadOptions) selected(fam string, qual []byte) bool {
	if len(o.Families) == 0 && len(o.Columns) == 0 {
		return true
	}
	for _, f := range o.Families {
		if f == fam {
			return true
		}
	}
	for _, c := range o.Columns {
		if c.Family == fam && bytes.Equal(c.Qualifier, qual) {
			return true
		}
	}
	return false
}

// Get reads one row. found is false when no cell of the row is visible.
func (t *Tablet) Get(ctx context.Context, row []byte, opts ReadOptions) (Row, bool, error) {
	if err := ctx.Err(); err != nil {
		return Row{}, false, err
	}
	s, err := t.snapshot()
	if err != nil {
		return Row{}, false, err
	}
	defer s.release()
	it, err := s.iterator(&opts, row, false)
	if err != nil {
		return Row{}, false, fmt.Errorf("tablet %s: get %q: %w", t.opts.ID, row, err)
	}
	defer it.Close()
	it.SeekGE(memstore.RowStart(row))
	var r rowReader
	r.init(&s.schema, &opts, t.opts.Now().UnixMicro())
	if it.Valid() && bytes.Equal(it.Entry().Row, row) {
		r.readRow(it)
	}
	if err := it.Err(); err != nil {
		return Row{}, false, fmt.Errorf("tablet %s: get %q: %w", t.opts.ID, row, err)
	}
	if err := r.filter(); err != nil {
		return Row{}, false, fmt.Errorf("tablet %s: get %q: %w", t.opts.ID, row, err)
	}
	if len(r.row.Cells) == 0 {
		return Row{}, false, nil
	}
	return r.row, true, nil
}

// Scan calls fn for each row with a visible cell in [start, end) (end nil:
// to the end of the tablet), in row order, at most limit rows (0: no
// limit), until fn returns false. The rows reflect one snapshot.
func (t *Tablet) Scan(ctx context.Context, start, end []byte, limit int, opts ReadOptions, fn func(Row) bool) error {
	return t.ScanRanges(ctx, []KeyRange{{Start: start, End: end}}, false, limit, opts, fn)
}

// rowReader resolves one row's merged entries into visible cells.
type rowReader struct {
	schema *Schema
	opts   *ReadOptions
	now    int64
	gc     bool // compaction: apply only tombstones and GC policy
	// purge (gc mode) drops the tombstones too; keepSeq (gc mode) is the
	// sequence of an entry kept whatever it is (0: none), see CompactFiles.
	purge   bool
	keepSeq uint64
	marked  bool // drop replaced the keepSeq cell by a tombstone
	// emit, in gc mode, receives every kept tombstone and cell.
	emit func(e *memstore.Entry)
	row  Row

	rowTomb  uint64 // the highest Seq of the row's tombstones (0: none)
	fam      string
	policy   FamilyPolicy
	known    bool
	famTomb  uint64 // the highest Seq of the family's tombstones (0: none)
	col      []byte
	colTombs []colTomb
	live     int // live versions of the column so far (GC policy)
	returned int // versions returned (read MaxVersions)

	// stay says the iterator is already on the next entry (foldOperands
	// read past a cell's operands); opQual is the qualifier of those.
	stay   bool
	opQual []byte

	// examined counts the rows resolved, visible or not.
	examined int64

	// key, when set, is the row's key to return instead of a copy (a
	// multi-get returns the caller's key).
	key []byte
	// slab and keys hold the cells and keys of the rows returned, one
	// allocation for many rows (see addCell); rowStart is the index in
	// slab of the current row's first cell.
	slab     []Cell
	keys     []byte
	rowStart int
	// lent (a Lent scan, set by ScanRanges) reuses slab, keys and arena
	// from row to row, arena holding the qualifiers and values of the
	// current row's cells.
	lent  bool
	arena []byte
}

// slabCells and slabKeyBytes bound a rowReader's cell and key slabs: one
// allocation serves the rows of a scan or multi-get until it is full; the
// first is small (a Get reads one row), each next one twice as large.
const (
	slabCells    = 256
	slabKeyBytes = 8 << 10
)

// addCell appends c to the current row. The row's cells are contiguous in
// slab; when it is full they move to a new slab, and the rows already
// returned keep the old one (nothing in a slab is written twice).
func (r *rowReader) addCell(c Cell) {
	if r.lent {
		q, v := len(r.arena), len(r.arena)+len(c.Qualifier)
		r.arena = append(append(r.arena, c.Qualifier...), c.Value...)
		c.Qualifier, c.Value = r.arena[q:v:v], r.arena[v:len(r.arena):len(r.arena)]
	}
	if len(r.slab) == cap(r.slab) {
		n := len(r.slab) - r.rowStart
		// Small for a one-row read, doubling for a scan up to slabCells.
		ns := make([]Cell, n, max(2*n, min(2*cap(r.slab), slabCells), 4))
		copy(ns, r.slab[r.rowStart:])
		r.slab, r.rowStart = ns, 0
	}
	r.slab = append(r.slab, c)
}

// cloneKey returns a copy of key from the key slab.
func (r *rowReader) cloneKey(key []byte) []byte {
	if cap(r.keys)-len(r.keys) < len(key) {
		if len(key) > slabKeyBytes/4 {
			return bytes.Clone(key)
		}
		r.keys = make([]byte, 0, max(len(key), min(2*cap(r.keys), slabKeyBytes), 32))
	}
	n := len(r.keys)
	r.keys = append(r.keys, key...)
	return r.keys[n:len(r.keys):len(r.keys)]
}

// colTomb is a column tombstone: it hides the cells of the column written
// before seq with a timestamp in [start, end) (end 0: unbounded).
type colTomb struct {
	start, end int64
	seq        uint64
}

func (r *rowReader) init(s *Schema, o *ReadOptions, now int64) {
	r.schema, r.opts, r.now = s, o, now
}

// readRow consumes every entry of the iterator's current row. r.row holds
// the visible cells (Key aliases the first entry).
func (r *rowReader) readRow(it memstore.Iterator) {
	if r.lent {
		// The last row is the caller's no longer: its memory is reused,
		// and this row's cells are copied out of the iterator's entries
		// (a lent iterator reuses their memory when it reads on).
		r.slab, r.keys, r.arena = r.slab[:0], r.keys[:0], r.arena[:0]
	}
	r.rowStart = len(r.slab)
	r.readCells(it)
	if n := len(r.slab); n > r.rowStart {
		r.row.Cells = r.slab[r.rowStart:n:n]
	}
}

func (r *rowReader) readCells(it memstore.Iterator) {
	first := it.Entry()
	r.examined++
	if r.key != nil {
		r.row = Row{Key: r.key}
	} else if r.gc {
		r.row = Row{Key: bytes.Clone(first.Row)}
	} else {
		r.row = Row{Key: r.cloneKey(first.Row)}
	}
	r.rowTomb, r.fam, r.col, r.colTombs = 0, "\x00", nil, r.colTombs[:0]
	colSet := false
	r.stay = false
	for ; it.Valid(); r.next(it) {
		e := it.Entry()
		if !bytes.Equal(e.Row, r.row.Key) {
			return
		}
		if e.Kind == mutation.DeleteRow {
			r.rowTomb = max(r.rowTomb, e.Seq)
			r.keep(e)
			continue
		}
		if e.Family != r.fam {
			r.fam = e.Family
			r.policy, r.known = r.schema.Families[e.Family]
			r.famTomb = 0
			colSet = false
		}
		if e.Kind == mutation.DeleteFamily {
			r.famTomb = max(r.famTomb, e.Seq)
			r.keep(e)
			continue
		}
		if !colSet || !bytes.Equal(e.Qualifier, r.col) {
			r.col = append(r.col[:0], e.Qualifier...)
			r.colTombs = r.colTombs[:0]
			r.live, r.returned = 0, 0
			colSet = true
		}
		if e.Kind == mutation.DeleteColumn {
			r.colTombs = append(r.colTombs, colTomb{start: e.Timestamp, end: e.End, seq: e.Seq})
			r.keep(e)
			continue
		}
		if e.Kind == mutation.MergeCell {
			// The cell's operands, folded; it is left on the entry after
			// them (r.stay).
			if e = r.foldOperands(it); e == nil {
				continue
			}
		} else if !r.known || r.hidden(e) {
			r.drop(e)
			continue
		}
		r.live++
		if r.policy.garbage(r.live, e.Timestamp, r.now) {
			r.drop(e)
			continue
		}
		if r.gc {
			r.emit(e)
			continue
		}
		{
			if !r.opts.selected(e.Family, e.Qualifier) {
				continue
			}
			tr := r.opts.TimeRange
			if e.Timestamp < tr.Start || (tr.End != 0 && e.Timestamp >= tr.End) {
				continue
			}
			r.returned++
			if r.opts.MaxVersions > 0 && r.returned > r.opts.MaxVersions {
				continue
			}
		}
		r.addCell(Cell{Family: e.Family, Qualifier: e.Qualifier, Timestamp: e.Timestamp, Value: e.Value})
	}
}

// next moves readCells to the next entry, unless foldOperands left the
// iterator on it already.
func (r *rowReader) next(it memstore.Iterator) {
	if r.stay {
		r.stay = false
		return
	}
	it.Next()
}

// foldOperands consumes the MergeCell operands of the cell at the
// iterator (they come together, newest sequence first) and returns the
// cell they make: the visible ones (those no tombstone hides, a prefix in
// that order) folded with the family's aggregator into one operand of the
// newest one's sequence, its value the 8-byte big-endian result. It
// returns nil when none is visible. Hidden operands, and every operand of
// a family absent from the schema, go to drop. The iterator is left on the
// entry after the operands (r.stay set).
func (r *rowReader) foldOperands(it memstore.Iterator) *memstore.Entry {
	first := it.Entry()
	r.opQual = append(r.opQual[:0], first.Qualifier...)
	ts, fam := first.Timestamp, first.Family
	var acc int64
	var seq uint64
	n := 0
	for ; it.Valid(); it.Next() {
		e := it.Entry()
		if e.Kind != mutation.MergeCell || e.Timestamp != ts || e.Family != fam ||
			!bytes.Equal(e.Qualifier, r.opQual) || !bytes.Equal(e.Row, r.row.Key) {
			break
		}
		if !r.known || r.hidden(e) || len(e.Value) != OperandLen {
			r.drop(e)
			continue
		}
		v := int64(binary.BigEndian.Uint64(e.Value))
		if n == 0 {
			acc, seq = v, e.Seq
		} else {
			acc = r.policy.Aggregate.fold(acc, v)
		}
		n++
	}
	r.stay = true
	if n == 0 {
		return nil
	}
	return &memstore.Entry{Row: r.row.Key, Family: fam, Qualifier: bytes.Clone(r.opQual), Timestamp: ts, Seq: seq,
		Kind: mutation.MergeCell, Value: binary.BigEndian.AppendUint64(make([]byte, 0, OperandLen), uint64(acc))}
}

// filter runs the read's RowFilter, if any, on the row just read, and
// counts the row in the read's Stats, if any.
func (r *rowReader) filter() error {
	if st := r.opts.Stats; st != nil && len(r.row.Cells) > 0 {
		st.Rows++
		st.Cells += int64(len(r.row.Cells))
	}
	if r.opts.Filter == nil || len(r.row.Cells) == 0 {
		return nil
	}
	cells, err := r.opts.Filter.Apply(r.row.Key, r.row.Cells)
	if err != nil {
		return err
	}
	r.row.Cells = cells
	return nil
}

// keep is called with every tombstone: a compaction keeps it unless it
// purges tombstones.
func (r *rowReader) keep(e *memstore.Entry) {
	if r.gc && (!r.purge || e.Seq == r.keepSeq) {
		r.emit(e)
	}
}

// drop is called with every cell a read does not return because of a
// tombstone, the GC rule or its family's absence: a compaction drops it.
// If it is the entry of sequence keepSeq (a cell the GC rule or its
// family's absence hides: a tombstone hiding it would have a higher
// sequence), the compaction writes in its place a column tombstone of
// that sequence covering just its timestamp: it keeps the sequence in the
// file, hides only what the cell overwrote, and the cell does not come
// back if the rule is relaxed or the family created again. It sorts before
// the column's cells: marked tells gcIter to sort the row.
func (r *rowReader) drop(e *memstore.Entry) {
	if !r.gc || r.keepSeq == 0 || e.Seq != r.keepSeq {
		return
	}
	end := e.Timestamp + 1
	if e.Timestamp == math.MaxInt64 {
		end = 0 // unbounded: from the cell's timestamp on
	}
	r.emit(&memstore.Entry{Row: e.Row, Family: e.Family, Qualifier: e.Qualifier, Kind: mutation.DeleteColumn,
		Timestamp: e.Timestamp, End: end, Seq: e.Seq})
	r.marked = true
}

// hidden reports whether a tombstone met so far hides cell e: one written
// after e (higher Seq) whose range covers e's timestamp.
func (r *rowReader) hidden(e *memstore.Entry) bool {
	if e.Seq < r.rowTomb || e.Seq < r.famTomb {
		return true
	}
	for _, c := range r.colTombs {
		if e.Seq < c.seq && e.Timestamp >= c.start && (c.end == 0 || e.Timestamp < c.end) {
			return true
		}
	}
	return false
}

// RowKeys returns the keys of the rows in [start, end) (end nil: to the
// end of the tablet) that hold any entry, visible or not (cells hidden by a
// GC rule or of a deleted family count too), in order, at most limit (0:
// no limit). Dropping a row range writes a row tombstone for each, so no
// hidden cell can come back when a rule is relaxed or a family re-added.
func (t *Tablet) RowKeys(ctx context.Context, start, end []byte, limit int) ([][]byte, error) {
	s, err := t.snapshot()
	if err != nil {
		return nil, err
	}
	defer s.release()
	it, err := s.iterator(&ReadOptions{}, nil, true)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var keys [][]byte
	for it.SeekGE(memstore.RowStart(start)); it.Valid(); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		row := it.Entry().Row
		if end != nil && bytes.Compare(row, end) >= 0 {
			break
		}
		key := bytes.Clone(row)
		keys = append(keys, key)
		if limit > 0 && len(keys) >= limit {
			break
		}
		it.SeekGE(memstore.RowStart(append(bytes.Clone(key), 0))) // the next row
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("tablet %s: row keys: %w", t.opts.ID, err)
	}
	return keys, nil
}

// FamilyRowKeys returns the keys of the rows in [start, end) (end nil: to
// the end of the tablet) that hold any entry of family, visible or not,
// in order, at most limit (0: no limit). The family need not be in the
// schema: deleting a family masks its cells with a delete-family tombstone
// on each of these rows.
func (t *Tablet) FamilyRowKeys(ctx context.Context, family string, start, end []byte, limit int) ([][]byte, error) {
	s, err := t.snapshot()
	if err != nil {
		return nil, err
	}
	defer s.release()
	it, err := s.iterator(&ReadOptions{Families: []string{family}}, nil, true)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var keys [][]byte
	for it.SeekGE(memstore.RowStart(start)); it.Valid(); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := it.Entry()
		if end != nil && bytes.Compare(e.Row, end) >= 0 {
			break
		}
		if e.Kind == mutation.DeleteRow || e.Family != family {
			it.Next()
			continue
		}
		key := bytes.Clone(e.Row)
		keys = append(keys, key)
		if limit > 0 && len(keys) >= limit {
			break
		}
		it.SeekGE(memstore.RowStart(append(bytes.Clone(key), 0))) // the next row
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("tablet %s: row keys of family %q: %w", t.opts.ID, family, err)
	}
	return keys, nil
}
