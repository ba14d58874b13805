package client

import (
	"fmt"
	"strings"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// A Filter is a server-side row filter (a Cloud Bigtable RowFilter) that
// Get and Scan apply through the RowFilter read option. The constructors
// have the Cloud Bigtable Go client's names and shapes. The tserver
// evaluates the filter row by row inside the tablet, so a selective filter
// moves only what it returns over the wire.
type Filter interface {
	String() string
	proto() *btpb.RowFilter
}

type protoFilter struct {
	s string
	p *btpb.RowFilter
}

func (f protoFilter) String() string         { return f.s }
func (f protoFilter) proto() *btpb.RowFilter { return f.p }

func subProtos(sub []Filter) ([]*btpb.RowFilter, string) {
	ps := make([]*btpb.RowFilter, len(sub))
	ss := make([]string, len(sub))
	for i, f := range sub {
		ps[i], ss[i] = f.proto(), f.String()
	}
	return ps, strings.Join(ss, ", ")
}

// ChainFilters applies each filter to the output of the one before: a cell
// passes when it passes them all. Bigtable requires at least two.
func ChainFilters(sub ...Filter) Filter {
	ps, s := subProtos(sub)
	return protoFilter{"(" + strings.ReplaceAll(s, ", ", " | ") + ")", &btpb.RowFilter{
		Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: ps}}}}
}

// InterleaveFilters applies each filter to the row and returns the union
// of their outputs, in column and newest-first order, duplicates kept.
// Bigtable requires at least two.
func InterleaveFilters(sub ...Filter) Filter {
	ps, s := subProtos(sub)
	return protoFilter{"(" + strings.ReplaceAll(s, ", ", " + ") + ")", &btpb.RowFilter{
		Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: ps}}}}
}

// ConditionFilter returns trueFilter applied to the row when
// predicateFilter outputs any cell of it, else falseFilter; a nil branch
// returns nothing.
func ConditionFilter(predicateFilter, trueFilter, falseFilter Filter) Filter {
	c := &btpb.RowFilter_Condition{PredicateFilter: predicateFilter.proto()}
	s := "cond(" + predicateFilter.String() + " ? "
	if trueFilter != nil {
		c.TrueFilter = trueFilter.proto()
		s += trueFilter.String()
	} else {
		s += "<none>"
	}
	s += " : "
	if falseFilter != nil {
		c.FalseFilter = falseFilter.proto()
		s += falseFilter.String()
	} else {
		s += "<none>"
	}
	return protoFilter{s + ")", &btpb.RowFilter{Filter: &btpb.RowFilter_Condition_{Condition: c}}}
}

// RowKeyFilter keeps rows whose whole key matches the RE2 pattern.
func RowKeyFilter(pattern string) Filter {
	return protoFilter{fmt.Sprintf("row(%s)", pattern), &btpb.RowFilter{
		Filter: &btpb.RowFilter_RowKeyRegexFilter{RowKeyRegexFilter: []byte(pattern)}}}
}

// FamilyFilter keeps cells whose whole family name matches the RE2 pattern.
func FamilyFilter(pattern string) Filter {
	return protoFilter{fmt.Sprintf("family(%s)", pattern), &btpb.RowFilter{
		Filter: &btpb.RowFilter_FamilyNameRegexFilter{FamilyNameRegexFilter: pattern}}}
}

// ColumnFilter keeps cells whose whole qualifier matches the RE2 pattern.
func ColumnFilter(pattern string) Filter {
	return protoFilter{fmt.Sprintf("col(%s)", pattern), &btpb.RowFilter{
		Filter: &btpb.RowFilter_ColumnQualifierRegexFilter{ColumnQualifierRegexFilter: []byte(pattern)}}}
}

// ValueFilter keeps cells whose whole value matches the RE2 pattern.
func ValueFilter(pattern string) Filter {
	return protoFilter{fmt.Sprintf("value_match(%s)", pattern), &btpb.RowFilter{
		Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte(pattern)}}}
}

// ColumnRangeFilter keeps cells of family with a qualifier in [start, end);
// start "" is unbounded below and end "" unbounded above.
func ColumnRangeFilter(family, start, end string) Filter {
	r := &btpb.ColumnRange{FamilyName: family}
	if start != "" {
		r.StartQualifier = &btpb.ColumnRange_StartQualifierClosed{StartQualifierClosed: []byte(start)}
	}
	if end != "" {
		r.EndQualifier = &btpb.ColumnRange_EndQualifierOpen{EndQualifierOpen: []byte(end)}
	}
	return protoFilter{fmt.Sprintf("columnRangeFilter(%s,%s,%s)", family, start, end), &btpb.RowFilter{
		Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: r}}}
}

// ValueRangeFilter keeps cells with a value in [start, end); a nil start
// or end is unbounded (a non-nil empty end matches nothing).
func ValueRangeFilter(start, end []byte) Filter {
	r := &btpb.ValueRange{}
	if start != nil {
		r.StartValue = &btpb.ValueRange_StartValueClosed{StartValueClosed: start}
	}
	if end != nil {
		r.EndValue = &btpb.ValueRange_EndValueOpen{EndValueOpen: end}
	}
	return protoFilter{fmt.Sprintf("valueRangeFilter(%q,%q)", start, end), &btpb.RowFilter{
		Filter: &btpb.RowFilter_ValueRangeFilter{ValueRangeFilter: r}}}
}

// TimestampRangeFilter keeps cells with a timestamp in [startTime,
// endTime); a zero endTime is unbounded. Times are truncated to
// milliseconds, as in the Cloud Bigtable client.
func TimestampRangeFilter(startTime, endTime time.Time) Filter {
	var start, end int64
	if !startTime.IsZero() {
		start = startTime.Truncate(time.Millisecond).UnixMicro()
	}
	if !endTime.IsZero() {
		end = endTime.Truncate(time.Millisecond).UnixMicro()
	}
	return TimestampRangeFilterMicros(start, end)
}

// TimestampRangeFilterMicros keeps cells with a timestamp in [start, end)
// microseconds, both truncated to milliseconds as in the Cloud Bigtable
// client; end 0 is unbounded.
func TimestampRangeFilterMicros(start, end int64) Filter {
	start, end = start-start%1000, end-end%1000
	return protoFilter{fmt.Sprintf("timestamp_range(%d,%d)", start, end), &btpb.RowFilter{
		Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{
			StartTimestampMicros: start, EndTimestampMicros: end}}}}
}

// CellsPerRowOffsetFilter skips the first n cells of each row.
func CellsPerRowOffsetFilter(n int) Filter {
	return protoFilter{fmt.Sprintf("cells_per_row_offset(%d)", n), &btpb.RowFilter{
		Filter: &btpb.RowFilter_CellsPerRowOffsetFilter{CellsPerRowOffsetFilter: int32(n)}}}
}

// CellsPerRowLimitFilter keeps the first n cells of each row.
func CellsPerRowLimitFilter(n int) Filter {
	return protoFilter{fmt.Sprintf("cells_per_row_limit(%d)", n), &btpb.RowFilter{
		Filter: &btpb.RowFilter_CellsPerRowLimitFilter{CellsPerRowLimitFilter: int32(n)}}}
}

// LatestNFilter keeps the newest n cells of each column.
func LatestNFilter(n int) Filter {
	return protoFilter{fmt.Sprintf("latest(%d)", n), &btpb.RowFilter{
		Filter: &btpb.RowFilter_CellsPerColumnLimitFilter{CellsPerColumnLimitFilter: int32(n)}}}
}

// StripValueFilter replaces every value with the empty value: a key-only
// read.
func StripValueFilter() Filter {
	return protoFilter{"strip_value()", &btpb.RowFilter{
		Filter: &btpb.RowFilter_StripValueTransformer{StripValueTransformer: true}}}
}

// LabelFilter labels every cell (Cell.Labels); label matches
// [a-z0-9-]{1,15}, and a cell carries at most one label.
func LabelFilter(label string) Filter {
	return protoFilter{fmt.Sprintf("apply_label(%s)", label), &btpb.RowFilter{
		Filter: &btpb.RowFilter_ApplyLabelTransformer{ApplyLabelTransformer: label}}}
}

// PassAllFilter keeps every cell.
func PassAllFilter() Filter {
	return protoFilter{"passall()", &btpb.RowFilter{Filter: &btpb.RowFilter_PassAllFilter{PassAllFilter: true}}}
}

// BlockAllFilter keeps no cell.
func BlockAllFilter() Filter {
	return protoFilter{"blockall()", &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}}}
}

// RowSampleFilter keeps each row, whole, with probability p in (0, 1).
func RowSampleFilter(p float64) Filter {
	return protoFilter{fmt.Sprintf("row_sample(%f)", p), &btpb.RowFilter{
		Filter: &btpb.RowFilter_RowSampleFilter{RowSampleFilter: p}}}
}

// SinkFilter sends the cells that reach it straight to the read's output,
// past any filter after it (Bigtable's sink; not in the Cloud Bigtable Go
// client). It cannot appear inside a ConditionFilter.
func SinkFilter() Filter {
	return protoFilter{"sink()", &btpb.RowFilter{Filter: &btpb.RowFilter_Sink{Sink: true}}}
}

// RowFilter applies f on the tserver to each row Get or Scan reads, after
// the Families, Column, TimeRange and LatestN selection. Rows the filter
// leaves with no cell are not returned. Several RowFilter options chain.
func RowFilter(f Filter) ReadOption {
	return readOptionFunc(func(s *readSettings) {
		if s.rowFilter != nil {
			f = ChainFilters(s.rowFilter, f)
		}
		s.rowFilter = f
	})
}

// marshalFilter serializes the read's filter for the native request.
func marshalFilter(f Filter) ([]byte, error) {
	if f == nil {
		return nil, nil
	}
	b, err := proto.Marshal(f.proto())
	if err != nil {
		return nil, fmt.Errorf("client: marshal row filter %s: %w", f, err)
	}
	return b, nil
}

// ProtoFilter is a Filter from a Cloud Bigtable RowFilter message, as a
// Bigtable API request carries it; the tserver validates it. It is for
// servers that pass a caller's filter through (the Bigtable API frontend);
// a nil p is nil.
func ProtoFilter(p *btpb.RowFilter) Filter {
	if p == nil {
		return nil
	}
	return rawFilter{p}
}

type rawFilter struct{ p *btpb.RowFilter }

func (f rawFilter) String() string         { return prototext.MarshalOptions{}.Format(f.p) }
func (f rawFilter) proto() *btpb.RowFilter { return f.p }
