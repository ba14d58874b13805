package client

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"bighive/internal/apierr"
	"bighive/internal/limits"
)

// RowSet is a set of rows to read: a RowList, a RowRange or a
// RowRangeList, as in cloud.google.com/go/bigtable.
type RowSet interface {
	// spans returns the set as sorted, disjoint half-open spans, or an
	// error for a set that names nothing.
	spans() ([]span, error)
}

// span is the half-open row range [start, end); end "" is unbounded.
type span struct{ start, end string }

func (s span) contains(row string) bool {
	return s.start <= row && (s.end == "" || row < s.end)
}

// RowList is a list of row keys, read in key order whatever their order
// here; a key listed twice is read once. An empty RowList is an error
// ("empty row set"), not the whole table.
type RowList []string

func (r RowList) spans() ([]span, error) {
	if len(r) == 0 {
		return nil, apierr.InvalidArgument("empty row set: a RowList with no keys")
	}
	out := make([]span, 0, len(r))
	for _, k := range r {
		if err := limits.ValidateRowKey([]byte(k)); err != nil {
			return nil, err
		}
		out = append(out, span{k, k + "\x00"})
	}
	return normalize(out), nil
}

type boundType int8

const (
	unbounded boundType = iota
	open
	closed
)

// RowRange is a range of rows between a start and an end key, each bound
// open, closed or unbounded. An empty key is an unbounded bound.
type RowRange struct {
	startBound boundType
	start      string
	endBound   boundType
	end        string
}

func newRowRange(sb boundType, start string, eb boundType, end string) RowRange {
	if start == "" {
		sb = unbounded
	}
	if end == "" {
		eb = unbounded
	}
	return RowRange{startBound: sb, start: start, endBound: eb, end: end}
}

// NewRange returns the range [begin, end).
func NewRange(begin, end string) RowRange { return newRowRange(closed, begin, open, end) }

// NewClosedOpenRange returns the range [start, end).
func NewClosedOpenRange(start, end string) RowRange { return newRowRange(closed, start, open, end) }

// NewOpenClosedRange returns the range (start, end].
func NewOpenClosedRange(start, end string) RowRange { return newRowRange(open, start, closed, end) }

// NewOpenRange returns the range (start, end).
func NewOpenRange(start, end string) RowRange { return newRowRange(open, start, open, end) }

// NewClosedRange returns the range [start, end].
func NewClosedRange(start, end string) RowRange { return newRowRange(closed, start, closed, end) }

// PrefixRange returns the range of the keys that start with prefix.
func PrefixRange(prefix string) RowRange {
	return newRowRange(closed, prefix, open, prefixSuccessor(prefix))
}

// InfiniteRange returns the range of the keys at least start: [start, ∞).
func InfiniteRange(start string) RowRange { return newRowRange(closed, start, unbounded, "") }

// InfiniteReverseRange returns the range of the keys at most end: (∞, end].
func InfiniteReverseRange(end string) RowRange { return newRowRange(unbounded, "", closed, end) }

// Unbounded reports whether either end of the range is unbounded.
func (r RowRange) Unbounded() bool { return r.startBound == unbounded || r.endBound == unbounded }

// Contains reports whether row is in the range.
func (r RowRange) Contains(row string) bool {
	switch r.startBound {
	case open:
		if row <= r.start {
			return false
		}
	case closed:
		if row < r.start {
			return false
		}
	}
	switch r.endBound {
	case open:
		if row >= r.end {
			return false
		}
	case closed:
		if row > r.end {
			return false
		}
	}
	return true
}

// String describes the range, as "[\"a\",\"b\")" or "(∞,\"b\"]".
func (r RowRange) String() string {
	var b strings.Builder
	switch r.startBound {
	case open:
		b.WriteString("(" + strconv.Quote(r.start))
	case closed:
		b.WriteString("[" + strconv.Quote(r.start))
	default:
		b.WriteString("(∞")
	}
	b.WriteString(",")
	switch r.endBound {
	case open:
		b.WriteString(strconv.Quote(r.end) + ")")
	case closed:
		b.WriteString(strconv.Quote(r.end) + "]")
	default:
		b.WriteString("∞)")
	}
	return b.String()
}

// span is the range as a half-open span: (s is [s+"\x00", and e] is
// e+"\x00"). ok is false for a range that holds no row.
func (r RowRange) span() (span, bool) {
	var s span
	switch r.startBound {
	case open:
		s.start = r.start + "\x00"
	case closed:
		s.start = r.start
	}
	switch r.endBound {
	case open:
		s.end = r.end
	case closed:
		s.end = r.end + "\x00"
	}
	return s, s.end == "" || s.start < s.end
}

// spans of a range that holds no row (start after end) is empty: it reads
// nothing, as in cloud.google.com/go/bigtable.
func (r RowRange) spans() ([]span, error) {
	if s, ok := r.span(); ok {
		return []span{s}, nil
	}
	return nil, nil
}

// RowRangeList is the union of its ranges, which may overlap and come in
// any order: each row is read once, in key order. An empty list is an
// error ("empty row set"); so is a range whose start is after its end
// beside ranges that hold rows.
type RowRangeList []RowRange

func (r RowRangeList) spans() ([]span, error) {
	if len(r) == 0 {
		return nil, apierr.InvalidArgument("empty row set: a RowRangeList with no ranges")
	}
	var out []span
	var inverted *RowRange
	for i, rr := range r {
		if s, ok := rr.span(); ok {
			out = append(out, s)
		} else if rr.startBound != unbounded && rr.endBound != unbounded && rr.start > rr.end {
			inverted = &r[i]
		}
	}
	// As with Cloud Bigtable: a list of ranges none of which holds a row
	// reads nothing, but a range whose start is after its end beside
	// others is refused.
	if inverted != nil && len(out) > 0 {
		return nil, apierr.InvalidArgument("row range %v: start is after end", *inverted)
	}
	return normalize(out), nil
}

// SingleRow returns the set of one row.
func SingleRow(row string) RowSet { return RowList{row} }

// prefixSuccessor returns the smallest key greater than every key with
// the prefix, or "" (unbounded) if there is none.
func prefixSuccessor(prefix string) string {
	n := len(prefix) - 1
	for n >= 0 && prefix[n] == 0xff {
		n--
	}
	if n < 0 {
		return ""
	}
	return prefix[:n] + string([]byte{prefix[n] + 1})
}

// normalize sorts spans and merges those that overlap or touch.
func normalize(in []span) []span {
	sort.Slice(in, func(i, j int) bool { return in[i].start < in[j].start })
	var out []span
	for _, s := range in {
		if n := len(out); n > 0 && (out[n-1].end == "" || s.start <= out[n-1].end) {
			if out[n-1].end != "" && (s.end == "" || s.end > out[n-1].end) {
				out[n-1].end = s.end
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// after keeps the rows of spans at or after row.
func after(spans []span, row string) []span {
	var out []span
	for _, s := range spans {
		if s.end != "" && s.end <= row {
			continue
		}
		if s.start < row {
			s.start = row
		}
		out = append(out, s)
	}
	return out
}

// before keeps the rows of spans below row.
func before(spans []span, row string) []span {
	var out []span
	for _, s := range spans {
		if s.start >= row {
			continue
		}
		if s.end == "" || s.end > row {
			s.end = row
		}
		out = append(out, s)
	}
	return out
}

func inSpans(spans []span, row string) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].start > row }) - 1
	return i >= 0 && spans[i].contains(row)
}

// describeSpans names spans in an error message: the first few of them.
func describeSpans(spans []span) string {
	const most = 3
	var b strings.Builder
	for i, s := range spans {
		if i == most {
			fmt.Fprintf(&b, " and %d more", len(spans)-most)
			break
		}
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "[%q, %q)", s.start, s.end)
	}
	if len(spans) == 0 {
		return "(none)"
	}
	return b.String()
}
