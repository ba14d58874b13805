package mutation

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ServerTime as an op timestamp asks the tserver to assign one.
const ServerTime int64 = -1

// Kind is the kind of one op. Values are part of the WAL format.
type Kind uint8

const (
	// SetCell writes Value at (Family, Qualifier, Timestamp).
	SetCell Kind = 1
	// DeleteColumn deletes the cells of (Family, Qualifier) written before
	// it with a timestamp in [Timestamp, End); End == 0 means no upper
	// bound, and Timestamp == 0 with End == 0 deletes every version.
	DeleteColumn Kind = 2
	// DeleteFamily deletes every cell of Family in the row written before it.
	DeleteFamily Kind = 3
	// DeleteRow deletes every cell of the row written before it.
	DeleteRow Kind = 4
	// MergeCell merges Value, an operand, into the cell (Family, Qualifier,
	// Timestamp) of an aggregate family: a read folds the cell's operands
	// with the family's aggregator (sum, min or max of int64s) instead of
	// letting the newest win. Value is the operand as an 8-byte big-endian
	// int64 (what AddToCell adds, or the state MergeToCell merges: for
	// these aggregators they are the same). Operands are blind writes.
	MergeCell Kind = 5
)

func (k Kind) String() string {
	switch k {
	case SetCell:
		return "SetCell"
	case DeleteColumn:
		return "DeleteColumn"
	case DeleteFamily:
		return "DeleteFamily"
	case DeleteRow:
		return "DeleteRow"
	case MergeCell:
		return "MergeCell"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is one operation of a row mutation.
type Op struct {
	Kind      Kind
	Family    string
	Qualifier []byte
	// Timestamp is the cell timestamp in microseconds (SetCell, MergeCell) or the start
	// of the deleted range (DeleteColumn). Tombstones of a family or a row
	// cover every timestamp; they keep the timestamp the tserver assigned
	// only as a record of when they were written. What a tombstone hides is
	// decided by write order (RowMutation.Seq), not by timestamps.
	Timestamp int64
	// End is the exclusive end of a DeleteColumn range (0: unbounded).
	End   int64
	Value []byte
}

// RowMutation is the ops of one row, applied atomically.
type RowMutation struct {
	// Seq is the tablet's write sequence of the mutation's first op:
	// assigned by the tablet before the WAL append, strictly increasing
	// over the tablet's whole life (restarts and moves included). Op i has
	// sequence Seq+i (OpSeq), so the ops of one mutation apply in order: a
	// delete masks a set made earlier in the same mutation, a later set is
	// not masked by an earlier delete. A tombstone hides the cells written
	// at a lower sequence; among equal cells the higher sequence wins. 0
	// means not assigned yet.
	Seq uint64
	Row []byte
	Ops []Op
}

// OpSeq is the write sequence of op i of m.
func (m *RowMutation) OpSeq(i int) uint64 { return m.Seq + uint64(i) }

// LastSeq is the write sequence of m's last op (Seq for a mutation without
// ops): the next mutation's Seq is above it.
func (m *RowMutation) LastSeq() uint64 { return m.Seq + uint64(max(len(m.Ops), 1)) - 1 }

// EncodingVersion is the first byte of an encoding Append makes of a
// mutation without a MergeCell op; MergeVersion that of one with one, so
// that a build that predates MergeCell refuses the record by its version
// (ErrVersion) instead of calling it malformed. Decode reads both and
// rejects other versions with ErrVersion, and a MergeCell op in a
// version-1 encoding with ErrMalformed.
const (
	EncodingVersion = 1
	MergeVersion    = 2
)

// ErrMalformed is returned by Decode for bytes that are not an encoding.
var ErrMalformed = errors.New("mutation: malformed encoding")

// ErrVersion is returned by Decode for an encoding of a version this build
// does not know (written by a newer build, or by one before versions).
var ErrVersion = errors.New("mutation: unknown encoding version")

// Size is an upper bound of the encoded length of m.
func (m *RowMutation) Size() int {
	n := 1 + 3*binary.MaxVarintLen64 + len(m.Row)
	for i := range m.Ops {
		op := &m.Ops[i]
		n += 1 + 5*binary.MaxVarintLen64 + len(op.Family) + len(op.Qualifier) + len(op.Value)
	}
	return n
}

// Append appends the encoding of m to dst.
func (m *RowMutation) Append(dst []byte) []byte {
	v := byte(EncodingVersion)
	for i := range m.Ops {
		if m.Ops[i].Kind == MergeCell {
			v = MergeVersion
			break
		}
	}
	dst = append(dst, v)
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = appendBytes(dst, m.Row)
	dst = binary.AppendUvarint(dst, uint64(len(m.Ops)))
	for i := range m.Ops {
		op := &m.Ops[i]
		dst = append(dst, byte(op.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(op.Family)))
		dst = append(dst, op.Family...)
		dst = appendBytes(dst, op.Qualifier)
		dst = binary.AppendVarint(dst, op.Timestamp)
		dst = binary.AppendVarint(dst, op.End)
		dst = appendBytes(dst, op.Value)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decode parses an encoding made by Append. The returned mutation aliases b
// when alias is true; otherwise it owns copies of every byte slice.
func Decode(b []byte, alias bool) (RowMutation, error) {
	if len(b) == 0 {
		return RowMutation{}, fmt.Errorf("%w: truncated", ErrMalformed)
	}
	version := b[0]
	if version != EncodingVersion && version != MergeVersion {
		return RowMutation{}, fmt.Errorf("%w %d (this build reads versions %d and %d)", ErrVersion, b[0], EncodingVersion, MergeVersion)
	}
	last := DeleteRow
	if version == MergeVersion {
		last = MergeCell
	}
	d := decoder{b: b[1:], alias: alias}
	var m RowMutation
	m.Seq = d.uvarint()
	m.Row = d.bytes()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) { // every op takes at least one byte
		d.fail()
	}
	if d.err == nil && n > 0 {
		m.Ops = make([]Op, 0, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		var op Op
		op.Kind = Kind(d.byte())
		op.Family = string(d.raw())
		op.Qualifier = d.bytes()
		op.Timestamp = d.varint()
		op.End = d.varint()
		op.Value = d.bytes()
		if d.err == nil && (op.Kind < SetCell || op.Kind > last) {
			return RowMutation{}, fmt.Errorf("%w: op %d has kind %d", ErrMalformed, i, op.Kind)
		}
		m.Ops = append(m.Ops, op)
	}
	if d.err != nil {
		return RowMutation{}, d.err
	}
	if len(d.b) != 0 {
		return RowMutation{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return m, nil
}

type decoder struct {
	b     []byte
	alias bool
	err   error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", ErrMalformed)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// raw returns the next length-prefixed bytes, aliasing the input.
func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	v := d.raw()
	if v == nil || d.alias {
		return v
	}
	return append([]byte(nil), v...)
}
