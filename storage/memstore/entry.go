package memstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"bighive/storage/mutation"
)

// Entry is one cell or tombstone. Kind reuses the WAL's op kinds.
//
// For SetCell, Timestamp is the cell's timestamp and Value its value. For
// DeleteColumn, [Timestamp, End) is the deleted range (End 0: unbounded).
// DeleteFamily and DeleteRow cover every timestamp (their Timestamp is only
// the time they were written); a DeleteRow has Family "" and no qualifier.
// Seq is the write sequence of the op the entry came from (see
// mutation.RowMutation.OpSeq): a tombstone hides exactly the cells it covers
// whose Seq is lower than its own.
type Entry struct {
	Row       []byte
	Family    string
	Qualifier []byte
	Timestamp int64
	End       int64
	Seq       uint64
	Kind      mutation.Kind
	Value     []byte
}

func (e *Entry) String() string {
	return fmt.Sprintf("%s{%q %s:%q @%d end=%d seq=%d len(v)=%d}", e.Kind, e.Row, e.Family, e.Qualifier, e.Timestamp, e.End, e.Seq, len(e.Value))
}

// Clone returns a deep copy of e.
func (e *Entry) Clone() Entry {
	c := *e
	c.Row = bytes.Clone(e.Row)
	c.Qualifier = bytes.Clone(e.Qualifier)
	c.Value = bytes.Clone(e.Value)
	return c
}

// Level orders the scopes inside a row: row tombstones, family tombstones,
// then columns.
func (e *Entry) level() int {
	switch e.Kind {
	case mutation.DeleteRow:
		return 0
	case mutation.DeleteFamily:
		return 1
	}
	return 2
}

func (e *Entry) rank() int {
	if e.Kind == mutation.DeleteColumn {
		return 0
	}
	return 1
}

// rowPrefix is a row's first 16 bytes as two big-endian words, padded with
// zeros. Rows whose prefixes differ compare as their prefixes do: at the
// first differing byte either both rows have a byte, or one row ended there
// (a zero pad) and is a prefix of the other, whose byte there is not zero.
// Equal prefixes decide nothing (the rows may differ later, or only in
// length, as "a" and "a\x00" do). The skiplist keeps one per node, so that
// most steps of a search compare two words in the node instead of loading
// the row's bytes (a cache miss) for bytes.Compare.
type rowPrefix struct{ hi, lo uint64 }

func prefixOf(row []byte) rowPrefix {
	var b [16]byte
	copy(b[:], row)
	return rowPrefix{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// compare returns -1, 0 or 1; 0 means undecided.
func (p rowPrefix) compare(q rowPrefix) int {
	switch {
	case p.hi != q.hi:
		if p.hi < q.hi {
			return -1
		}
		return 1
	case p.lo != q.lo:
		if p.lo < q.lo {
			return -1
		}
		return 1
	}
	return 0
}

// Compare orders entries as the package doc describes: by key (see
// CompareKey), then by Seq descending, so the newest write of a key comes
// first. It returns 0 only for entries of the same key and Seq.
func Compare(a, b *Entry) int {
	if c := CompareKey(a, b); c != 0 {
		return c
	}
	switch {
	case a.Seq > b.Seq:
		return -1
	case a.Seq < b.Seq:
		return 1
	}
	return 0
}

// CompareKey orders entries by key alone. It returns 0 for two cells of
// the same (row, family, qualifier, timestamp) whatever their values and
// sequences, and for tombstones of the same scope and range: of such
// entries only the one with the highest Seq counts (a cell written again
// overwrites; the later of two equal tombstones hides everything the
// earlier one hides). A MergeCell operand is the exception: its Seq is part
// of its key, so every operand of a cell is kept and a read folds them (an
// operand replayed again has the same key and Seq and still counts once).
func CompareKey(a, b *Entry) int {
	if c := bytes.Compare(a.Row, b.Row); c != 0 {
		return c
	}
	if c := strings.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	if la, lb := a.level(), b.level(); la != lb {
		return la - lb
	}
	if c := bytes.Compare(a.Qualifier, b.Qualifier); c != 0 {
		return c
	}
	if ra, rb := a.rank(), b.rank(); ra != rb {
		return ra - rb
	}
	switch {
	case a.Timestamp > b.Timestamp:
		return -1
	case a.Timestamp < b.Timestamp:
		return 1
	}
	if a.Kind == mutation.DeleteColumn {
		switch {
		case a.End < b.End:
			return -1
		case a.End > b.End:
			return 1
		}
		return 0
	}
	// Operands of an aggregate cell (MergeCell) do not overwrite each
	// other: their Seq is part of their key, newest first, after any
	// SetCell of the same cell.
	if ma, mb := a.Kind == mutation.MergeCell, b.Kind == mutation.MergeCell; ma != mb {
		if ma {
			return 1
		}
		return -1
	} else if ma {
		switch {
		case a.Seq > b.Seq:
			return -1
		case a.Seq < b.Seq:
			return 1
		}
	}
	return 0
}

// RowStart is the smallest entry of row: seeking to it positions an
// iterator at the row's first entry.
func RowStart(row []byte) *Entry {
	return &Entry{Row: row, Kind: mutation.DeleteRow, Timestamp: 1<<63 - 1, Seq: 1<<64 - 1}
}

// Iterator walks entries in Compare order. Entry's slices stay valid until
// the next call that moves the iterator; callers that keep them Clone.
type Iterator interface {
	// SeekGE positions the iterator at the first entry whose key is >=
	// key's (CompareKey: key.Seq is ignored).
	SeekGE(key *Entry)
	// First positions the iterator at the first entry.
	First()
	Valid() bool
	Entry() *Entry
	Next()
	// Err is the error that made the iterator invalid, if any.
	Err() error
	Close() error
}

// RowFinder is an Iterator that can also find the row before a bound, for
// reverse scans: a reader walks rows backwards by finding the row below
// the last one, then reads that row forwards with SeekGE.
type RowFinder interface {
	Iterator
	// LastRowBefore returns the greatest row key below bound (nil: the
	// greatest row key) that holds an entry, or ok false if none does. It
	// may return a row whose entries are all invisible to the iterator (a
	// caller that seeks to it then lands past it), but it never passes
	// over a row with a visible entry. It does not move the iterator; the
	// returned slice is the caller's.
	LastRowBefore(bound []byte) (row []byte, ok bool, err error)
}
