package filter

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// ErrInvalid marks a filter the server refuses: an unknown or empty filter
// type, a regex that does not compile, an out-of-range argument, a label on
// a cell that already has one, or a sink inside a condition. Callers map it
// to InvalidArgument.
var ErrInvalid = errors.New("filter: invalid row filter")

// Cell is one cell of a row, as the tablet read path produces it and the
// evaluator returns it. Labels is set only by the apply-label transformer.
type Cell struct {
	Family    string
	Qualifier []byte
	Timestamp int64
	Value     []byte
	Labels    []string
}

// Filter is a compiled RowFilter. A Filter evaluates rows one at a time and
// is not safe for concurrent use (row sample draws from its own source).
type Filter struct {
	root *node
	rnd  *rand.Rand
}

type kind int

const (
	kPass kind = iota
	kBlock
	kChain
	kInterleave
	kCondition
	kSink
	kRowKey
	kRowSample
	kFamily
	kQualifier
	kColumnRange
	kTimestamp
	kValueRegex
	kValueRange
	kRowOffset
	kRowLimit
	kColumnLimit
	kStrip
	kLabel
)

type node struct {
	kind kind
	subs []*node // chain, interleave; condition: predicate, true, false (nil: absent)
	re   *bytesRegexp
	// family for a column range; label for apply label.
	str string
	// lo/hi bound a column or value range; hasLo/hasHi false: unbounded.
	lo, hi         []byte
	hasLo, hasHi   bool
	loOpen, hiOpen bool
	tsStart, tsEnd int64
	n              int
	rate           float64
	label          bool // the subtree applies a label
	sink           bool // the subtree contains a sink
}

// Compile validates f and compiles its regexes once, for the rows of one
// request. A nil f passes every cell.
func Compile(f *btpb.RowFilter) (*Filter, error) {
	if f == nil {
		return nil, nil
	}
	n, err := compile(f, "filter")
	if err != nil {
		return nil, err
	}
	return &Filter{root: n, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}, nil
}

func invalid(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, path, fmt.Sprintf(format, args...))
}

// anchored compiles a Bigtable regex: RE2 syntax in raw byte mode
// (RE2::Latin1: each byte of the pattern and of the field is one
// character), matched against the whole field. Go's regexp reads UTF-8,
// so the pattern is rewritten by latin1Pattern and fields are matched
// through latin1 (each byte becomes the rune of its value).
func anchored(path string, pat []byte) (*bytesRegexp, error) {
	p, err := latin1Pattern(pat)
	if err == nil {
		var re *regexp.Regexp
		if re, err = regexp.Compile(`\A(?:` + p + `)\z`); err == nil {
			return &bytesRegexp{re}, nil
		}
	}
	return nil, invalid(path, "regex %q does not compile: %v", pat, err)
}

// bytesRegexp matches a Latin-1 regex against raw bytes.
type bytesRegexp struct{ re *regexp.Regexp }

func (r *bytesRegexp) Match(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return r.re.Match(latin1(b))
		}
	}
	return r.re.Match(b)
}

func (r *bytesRegexp) MatchString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return r.re.Match(latin1([]byte(s)))
		}
	}
	return r.re.MatchString(s)
}

// latin1 returns b with every byte as the UTF-8 encoding of the rune of
// its value (bytes below 0x80 stay as they are).
func latin1(b []byte) []byte {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// latin1Pattern rewrites an RE2 pattern read as Latin-1 into the Go
// regexp that matches the latin1 form of the same fields: a byte above
// 0x7f becomes \x{HH} (inside \Q...\E it leaves the quote for it), and
// \C (any byte) becomes (?s:.). A backslash before a byte above 0x7f
// (an unknown escape) is an error, as in RE2; \C inside a character
// class is left for regexp to refuse, as RE2 does.
func latin1Pattern(pat []byte) (string, error) {
	var b strings.Builder
	quoted, class := false, false
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch {
		case quoted:
			if c == '\\' && i+1 < len(pat) && pat[i+1] == 'E' {
				quoted = false
				b.WriteString(`\E`)
				i++
			} else if c >= utf8.RuneSelf {
				fmt.Fprintf(&b, `\E\x{%02X}\Q`, c)
			} else {
				b.WriteByte(c)
			}
		case c == '\\' && i+1 < len(pat):
			next := pat[i+1]
			i++
			switch {
			case next >= utf8.RuneSelf:
				return "", fmt.Errorf("invalid escape sequence: a backslash before byte 0x%02x", next)
			case next == 'Q' && !class:
				quoted = true
				b.WriteString(`\Q`)
			case next == 'C' && !class:
				b.WriteString(`(?s:.)`)
			default:
				b.WriteByte(c)
				b.WriteByte(next)
			}
		case c >= utf8.RuneSelf:
			fmt.Fprintf(&b, `\x{%02X}`, c)
		case class:
			if c == '[' && i+1 < len(pat) && pat[i+1] == ':' {
				// A POSIX class [:name:] inside a class: copy it whole.
				if end := bytes.Index(pat[i+2:], []byte(":]")); end >= 0 {
					b.Write(pat[i : i+2+end+2])
					i += 2 + end + 1
					continue
				}
			}
			if c == ']' {
				class = false
			}
			b.WriteByte(c)
		case c == '[':
			class = true
			b.WriteByte(c)
			// A ']' first in the class (after an optional '^') is literal.
			if i+1 < len(pat) && pat[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(pat) && pat[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

var labelRE = regexp.MustCompile(`\A[a-z0-9\-]+\z`)

func compile(f *btpb.RowFilter, path string) (*node, error) {
	if f == nil {
		return nil, invalid(path, "missing filter")
	}
	switch x := f.Filter.(type) {
	case *btpb.RowFilter_PassAllFilter:
		if !x.PassAllFilter {
			return nil, invalid(path, "pass_all_filter must be true if set")
		}
		return &node{kind: kPass}, nil
	case *btpb.RowFilter_BlockAllFilter:
		if !x.BlockAllFilter {
			return nil, invalid(path, "block_all_filter must be true if set")
		}
		return &node{kind: kBlock}, nil
	case *btpb.RowFilter_Sink:
		if !x.Sink {
			return nil, invalid(path, "sink must be true if set")
		}
		return &node{kind: kSink, sink: true}, nil
	case *btpb.RowFilter_Chain_:
		fs := x.Chain.GetFilters()
		if len(fs) < 2 {
			return nil, invalid(path, "chain must contain at least two filters, has %d", len(fs))
		}
		n := &node{kind: kChain}
		labels := 0
		for i, sub := range fs {
			s, err := compile(sub, fmt.Sprintf("%s.chain[%d]", path, i))
			if err != nil {
				return nil, err
			}
			if s.label {
				labels++
			}
			n.sink = n.sink || s.sink
			n.subs = append(n.subs, s)
		}
		// A cell carries at most one label; Bigtable refuses a chain in
		// which two sub-filters could each label the same cell.
		if labels > 1 {
			return nil, invalid(path, "chain has %d sub-filters that apply a label; a cell can carry only one label", labels)
		}
		n.label = labels > 0
		return n, nil
	case *btpb.RowFilter_Interleave_:
		fs := x.Interleave.GetFilters()
		if len(fs) < 2 {
			return nil, invalid(path, "interleave must contain at least two filters, has %d", len(fs))
		}
		n := &node{kind: kInterleave}
		for i, sub := range fs {
			s, err := compile(sub, fmt.Sprintf("%s.interleave[%d]", path, i))
			if err != nil {
				return nil, err
			}
			n.label = n.label || s.label
			n.sink = n.sink || s.sink
			n.subs = append(n.subs, s)
		}
		return n, nil
	case *btpb.RowFilter_Condition_:
		c := x.Condition
		if c.GetPredicateFilter() == nil {
			return nil, invalid(path, "condition has no predicate_filter")
		}
		n := &node{kind: kCondition, subs: make([]*node, 3)}
		for i, sub := range []*btpb.RowFilter{c.GetPredicateFilter(), c.GetTrueFilter(), c.GetFalseFilter()} {
			if sub == nil {
				continue
			}
			name := [...]string{"predicate_filter", "true_filter", "false_filter"}[i]
			s, err := compile(sub, path+".condition."+name)
			if err != nil {
				return nil, err
			}
			if s.sink {
				return nil, invalid(path, "a sink cannot be used inside the %s of a condition", name)
			}
			if i > 0 {
				n.label = n.label || s.label
			}
			n.subs[i] = s
		}
		return n, nil
	case *btpb.RowFilter_RowKeyRegexFilter:
		if len(x.RowKeyRegexFilter) == 0 {
			return nil, invalid(path, "row_key_regex_filter must not be empty")
		}
		re, err := anchored(path+".row_key_regex_filter", x.RowKeyRegexFilter)
		return &node{kind: kRowKey, re: re}, err
	case *btpb.RowFilter_RowSampleFilter:
		p := x.RowSampleFilter
		if !(p > 0 && p < 1) {
			return nil, invalid(path, "row_sample_filter must be in (0, 1), is %v", p)
		}
		return &node{kind: kRowSample, rate: p}, nil
	case *btpb.RowFilter_FamilyNameRegexFilter:
		re, err := anchored(path+".family_name_regex_filter", []byte(x.FamilyNameRegexFilter))
		return &node{kind: kFamily, re: re}, err
	case *btpb.RowFilter_ColumnQualifierRegexFilter:
		re, err := anchored(path+".column_qualifier_regex_filter", x.ColumnQualifierRegexFilter)
		return &node{kind: kQualifier, re: re}, err
	case *btpb.RowFilter_ValueRegexFilter:
		re, err := anchored(path+".value_regex_filter", x.ValueRegexFilter)
		return &node{kind: kValueRegex, re: re}, err
	case *btpb.RowFilter_ColumnRangeFilter:
		r := x.ColumnRangeFilter
		n := &node{kind: kColumnRange, str: r.GetFamilyName()}
		switch s := r.GetStartQualifier().(type) {
		case *btpb.ColumnRange_StartQualifierClosed:
			n.lo, n.hasLo = s.StartQualifierClosed, true
		case *btpb.ColumnRange_StartQualifierOpen:
			n.lo, n.hasLo, n.loOpen = s.StartQualifierOpen, true, true
		}
		switch e := r.GetEndQualifier().(type) {
		case *btpb.ColumnRange_EndQualifierClosed:
			n.hi, n.hasHi = e.EndQualifierClosed, true
		case *btpb.ColumnRange_EndQualifierOpen:
			n.hi, n.hasHi, n.hiOpen = e.EndQualifierOpen, true, true
		}
		return n, nil
	case *btpb.RowFilter_TimestampRangeFilter:
		r := x.TimestampRangeFilter
		if r.GetStartTimestampMicros() < 0 || r.GetEndTimestampMicros() < 0 {
			return nil, invalid(path, "timestamp_range_filter bounds must not be negative")
		}
		return &node{kind: kTimestamp, tsStart: r.GetStartTimestampMicros(), tsEnd: r.GetEndTimestampMicros()}, nil
	case *btpb.RowFilter_ValueRangeFilter:
		r := x.ValueRangeFilter
		n := &node{kind: kValueRange}
		switch s := r.GetStartValue().(type) {
		case *btpb.ValueRange_StartValueClosed:
			n.lo, n.hasLo = s.StartValueClosed, true
		case *btpb.ValueRange_StartValueOpen:
			n.lo, n.hasLo, n.loOpen = s.StartValueOpen, true, true
		}
		switch e := r.GetEndValue().(type) {
		case *btpb.ValueRange_EndValueClosed:
			n.hi, n.hasHi = e.EndValueClosed, true
		case *btpb.ValueRange_EndValueOpen:
			n.hi, n.hasHi, n.hiOpen = e.EndValueOpen, true, true
		}
		return n, nil
	case *btpb.RowFilter_CellsPerRowOffsetFilter:
		if x.CellsPerRowOffsetFilter < 0 {
			return nil, invalid(path, "cells_per_row_offset_filter must not be negative, is %d", x.CellsPerRowOffsetFilter)
		}
		return &node{kind: kRowOffset, n: int(x.CellsPerRowOffsetFilter)}, nil
	case *btpb.RowFilter_CellsPerRowLimitFilter:
		if x.CellsPerRowLimitFilter <= 0 {
			return nil, invalid(path, "cells_per_row_limit_filter must be > 0, is %d", x.CellsPerRowLimitFilter)
		}
		return &node{kind: kRowLimit, n: int(x.CellsPerRowLimitFilter)}, nil
	case *btpb.RowFilter_CellsPerColumnLimitFilter:
		if x.CellsPerColumnLimitFilter <= 0 {
			return nil, invalid(path, "cells_per_column_limit_filter must be > 0, is %d", x.CellsPerColumnLimitFilter)
		}
		return &node{kind: kColumnLimit, n: int(x.CellsPerColumnLimitFilter)}, nil
	case *btpb.RowFilter_StripValueTransformer:
		if !x.StripValueTransformer {
			return nil, invalid(path, "strip_value_transformer must be true if set")
		}
		return &node{kind: kStrip}, nil
	case *btpb.RowFilter_ApplyLabelTransformer:
		l := x.ApplyLabelTransformer
		if len(l) > 15 || !labelRE.MatchString(l) {
			return nil, invalid(path, "apply_label_transformer %q must match [a-z0-9\\-]+ and be at most 15 characters", l)
		}
		return &node{kind: kLabel, str: l, label: true}, nil
	case nil:
		return nil, invalid(path, "filter has no type set")
	default:
		return nil, invalid(path, "filter type %T is not supported", x)
	}
}

// Apply evaluates the filter on one row: key and its cells in (family,
// qualifier, timestamp descending) order. It returns the cells that pass,
// in that order, duplicates (from interleaves and sinks) kept. A nil
// Filter returns cells unchanged. Apply does not modify cells' backing
// values; a returned cell may share them.
func (f *Filter) Apply(key []byte, cells []Cell) ([]Cell, error) {
	if f == nil || len(cells) == 0 {
		return cells, nil
	}
	var sink []Cell
	out, err := f.eval(f.root, key, cells, &sink)
	if err != nil {
		return nil, err
	}
	if len(sink) > 0 {
		out = merge(append(out, sink...))
	}
	return out, nil
}

// cellOrder orders cells by column then newest first; a stable sort keeps
// equal cells in the order the sub-filters produced them.
func cellOrder(a, b Cell) int {
	if c := cmp.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	if c := bytes.Compare(a.Qualifier, b.Qualifier); c != 0 {
		return c
	}
	return cmp.Compare(b.Timestamp, a.Timestamp)
}

func merge(cs []Cell) []Cell {
	slices.SortStableFunc(cs, cellOrder)
	return cs
}

func (f *Filter) eval(n *node, key []byte, in []Cell, sink *[]Cell) ([]Cell, error) {
	if len(in) == 0 {
		return nil, nil
	}
	switch n.kind {
	case kPass:
		return in, nil
	case kBlock:
		return nil, nil
	case kSink:
		*sink = append(*sink, in...)
		return nil, nil
	case kChain:
		cur := in
		for _, s := range n.subs {
			var err error
			if cur, err = f.eval(s, key, cur, sink); err != nil {
				return nil, err
			}
			if len(cur) == 0 {
				return nil, nil
			}
		}
		return cur, nil
	case kInterleave:
		var out []Cell
		for _, s := range n.subs {
			o, err := f.eval(s, key, in, sink)
			if err != nil {
				return nil, err
			}
			out = append(out, o...)
		}
		return merge(out), nil
	case kCondition:
		var none []Cell // a sink is refused inside a condition
		p, err := f.eval(n.subs[0], key, in, &none)
		if err != nil {
			return nil, err
		}
		branch := n.subs[2]
		if len(p) > 0 {
			branch = n.subs[1]
		}
		if branch == nil {
			return nil, nil
		}
		return f.eval(branch, key, in, sink)
	case kRowKey:
		if n.re.Match(key) {
			return in, nil
		}
		return nil, nil
	case kRowSample:
		if f.rnd.Float64() < n.rate {
			return in, nil
		}
		return nil, nil
	case kRowOffset:
		if n.n >= len(in) {
			return nil, nil
		}
		return in[n.n:], nil
	case kRowLimit:
		return in[:min(n.n, len(in))], nil
	case kColumnLimit:
		out := make([]Cell, 0, len(in))
		k := 0
		for i, c := range in {
			if i == 0 || c.Family != in[i-1].Family || !bytes.Equal(c.Qualifier, in[i-1].Qualifier) {
				k = 0
			}
			if k < n.n {
				out = append(out, c)
			}
			k++
		}
		return out, nil
	case kStrip:
		out := make([]Cell, len(in))
		for i, c := range in {
			c.Value = nil
			out[i] = c
		}
		return out, nil
	case kLabel:
		out := make([]Cell, len(in))
		for i, c := range in {
			if len(c.Labels) > 0 {
				return nil, invalid("filter", "cell %s:%q@%d would carry two labels (%q and %q)", c.Family, c.Qualifier, c.Timestamp, c.Labels[0], n.str)
			}
			c.Labels = []string{n.str}
			out[i] = c
		}
		return out, nil
	}
	// Per-cell predicates.
	out := make([]Cell, 0, len(in))
	for _, c := range in {
		if n.match(&c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (n *node) match(c *Cell) bool {
	switch n.kind {
	case kFamily:
		return n.re.MatchString(c.Family)
	case kQualifier:
		return n.re.Match(c.Qualifier)
	case kValueRegex:
		return n.re.Match(c.Value)
	case kColumnRange:
		return c.Family == n.str && n.inRange(c.Qualifier)
	case kValueRange:
		return n.inRange(c.Value)
	case kTimestamp:
		return c.Timestamp >= n.tsStart && (n.tsEnd == 0 || c.Timestamp < n.tsEnd)
	}
	return false
}

func (n *node) inRange(v []byte) bool {
	if n.hasLo {
		c := bytes.Compare(v, n.lo)
		if c < 0 || (c == 0 && n.loOpen) {
			return false
		}
	}
	if n.hasHi {
		c := bytes.Compare(v, n.hi)
		if c > 0 || (c == 0 && n.hiOpen) {
			return false
		}
	}
	return true
}
