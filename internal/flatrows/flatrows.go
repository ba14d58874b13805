package flatrows

import (
	"encoding/binary"
	"fmt"
)

// Writer appends rows to a buffer. The zero value is ready to use.
type Writer struct {
	buf     []byte
	countAt int // where the open row's cell count goes
	cells   uint32
	open    bool
}

// StartRow begins a row; EndRow must end it.
func (w *Writer) StartRow(key []byte) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)))
	w.buf = append(w.buf, key...)
	w.countAt, w.cells, w.open = len(w.buf), 0, true
	w.buf = append(w.buf, 0, 0, 0, 0)
}

// AddCell appends a cell to the open row.
func (w *Writer) AddCell(family string, qualifier []byte, timestamp int64, value []byte, labels []string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(family)))
	w.buf = append(w.buf, family...)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(qualifier)))
	w.buf = append(w.buf, qualifier...)
	w.buf = binary.AppendVarint(w.buf, timestamp)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(value)))
	w.buf = append(w.buf, value...)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(labels)))
	for _, l := range labels {
		w.buf = binary.AppendUvarint(w.buf, uint64(len(l)))
		w.buf = append(w.buf, l...)
	}
	w.cells++
}

// EndRow ends the open row.
func (w *Writer) EndRow() {
	if w.open {
		binary.LittleEndian.PutUint32(w.buf[w.countAt:], w.cells)
		w.open = false
	}
}

// Len is the buffer's length so far.
func (w *Writer) Len() int { return len(w.buf) }

// Bytes returns the buffer (valid until the next call that writes).
func (w *Writer) Bytes() []byte { return w.buf }

// SetBuffer makes the Writer empty and append to b[:0] from now on; it no
// longer refers to its former buffer, which is the caller's again.
func (w *Writer) SetBuffer(b []byte) { w.buf, w.open = b[:0], false }

// Cell is one decoded cell; its slices alias the Reader's buffer.
type Cell struct {
	Family, Qualifier []byte
	Timestamp         int64
	Value             []byte
	// Labels counts the cell's labels; NextLabel returns them.
	Labels int
}

// CorruptError reports a malformed buffer.
type CorruptError struct {
	Offset int
	What   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("flat rows: %s at byte %d", e.What, e.Offset)
}

// Reader walks a buffer's rows: NextRow, then NextCell for each of the
// row's cells (and NextLabel for each of a cell's labels). Skipped cells
// or labels are skipped over by the next NextRow or NextCell.
type Reader struct {
	b      []byte
	pos    int
	cells  uint32 // cells left in the current row
	labels uint64 // labels left in the current cell
	err    error
}

// NewReader returns a Reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Reset makes r read b from its start.
func (r *Reader) Reset(b []byte) { *r = Reader{b: b} }

// Offset is how many bytes of the buffer the Reader has consumed.
func (r *Reader) Offset() int { return r.pos }

// Err is the error that stopped the iteration, if any.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail(what string) {
	if r.err == nil {
		r.err = &CorruptError{Offset: r.pos, What: what}
	}
	r.pos = len(r.b)
}

// uvarint reads a varint; what names it in the error, and lengthOf
// says it is the length of what. (The message is built only on failure:
// built on every call, it was a tenth of a scanning client's decoding.)
func (r *Reader) uvarint(what string, lengthOf bool) uint64 {
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		if lengthOf {
			r.fail("bad length of " + what)
		} else {
			r.fail("bad " + what)
		}
		return 0
	}
	r.pos += n
	return v
}

func (r *Reader) bytes(what string) []byte {
	n := r.uvarint(what, true)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail(what + " longer than the buffer")
		return nil
	}
	b := r.b[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return b
}

// NextRow moves to the next row: its key and cell count; ok is false at
// the end or on an error (see Err).
func (r *Reader) NextRow() (key []byte, cells int, ok bool) {
	for r.labels > 0 && r.err == nil {
		r.NextLabel()
	}
	for r.cells > 0 && r.err == nil {
		r.NextCell()
	}
	for r.labels > 0 && r.err == nil {
		r.NextLabel()
	}
	if r.err != nil || r.pos >= len(r.b) {
		return nil, 0, false
	}
	key = r.bytes("row key")
	if r.err != nil {
		return nil, 0, false
	}
	if len(r.b)-r.pos < 4 {
		r.fail("truncated cell count")
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	// Every cell takes at least 5 bytes: a bound on what a count may claim.
	if uint64(n)*5 > uint64(len(r.b)-r.pos) {
		r.pos -= 4
		r.fail(fmt.Sprintf("cell count %d beyond the buffer", n))
		return nil, 0, false
	}
	r.cells = n
	return key, int(n), true
}

// NextCell decodes the current row's next cell; ok is false when the row
// has no more or on an error.
func (r *Reader) NextCell() (c Cell, ok bool) {
	for r.labels > 0 && r.err == nil {
		r.NextLabel()
	}
	if r.cells == 0 || r.err != nil {
		return Cell{}, false
	}
	r.cells--
	c.Family = r.bytes("family")
	c.Qualifier = r.bytes("qualifier")
	if r.err == nil {
		v, n := binary.Varint(r.b[r.pos:])
		if n <= 0 {
			r.fail("bad timestamp")
		} else {
			c.Timestamp, r.pos = v, r.pos+n
		}
	}
	c.Value = r.bytes("value")
	nl := r.uvarint("label count", false)
	if r.err != nil {
		return Cell{}, false
	}
	if nl > uint64(len(r.b)-r.pos) {
		r.fail(fmt.Sprintf("label count %d beyond the buffer", nl))
		return Cell{}, false
	}
	r.labels, c.Labels = nl, int(nl)
	return c, true
}

// NextLabel returns the current cell's next label.
func (r *Reader) NextLabel() ([]byte, bool) {
	if r.labels == 0 || r.err != nil {
		return nil, false
	}
	r.labels--
	l := r.bytes("label")
	return l, r.err == nil
}
