package filter

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// Shorthands for building RowFilter trees.
func chain(fs ...*btpb.RowFilter) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: fs}}}
}

func inter(fs ...*btpb.RowFilter) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: fs}}}
}

func cond(p, t, f *btpb.RowFilter) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Condition_{Condition: &btpb.RowFilter_Condition{PredicateFilter: p, TrueFilter: t, FalseFilter: f}}}
}

func famRE(p string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_FamilyNameRegexFilter{FamilyNameRegexFilter: p}}
}

func qualRE(p string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnQualifierRegexFilter{ColumnQualifierRegexFilter: []byte(p)}}
}

func valRE(p string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte(p)}}
}

func keyRE(p string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_RowKeyRegexFilter{RowKeyRegexFilter: []byte(p)}}
}

func label(l string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_ApplyLabelTransformer{ApplyLabelTransformer: l}}
}

var (
	pass  = &btpb.RowFilter{Filter: &btpb.RowFilter_PassAllFilter{PassAllFilter: true}}
	block = &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}}
	sink  = &btpb.RowFilter{Filter: &btpb.RowFilter_Sink{Sink: true}}
	strip = &btpb.RowFilter{Filter: &btpb.RowFilter_StripValueTransformer{StripValueTransformer: true}}
)

func rowLimit(n int32) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_CellsPerRowLimitFilter{CellsPerRowLimitFilter: n}}
}

func rowOffset(n int32) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_CellsPerRowOffsetFilter{CellsPerRowOffsetFilter: n}}
}

func colLimit(n int32) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_CellsPerColumnLimitFilter{CellsPerColumnLimitFilter: n}}
}

func tsRange(s, e int64) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{StartTimestampMicros: s, EndTimestampMicros: e}}}
}

func sample(p float64) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_RowSampleFilter{RowSampleFilter: p}}
}

// The row of the documented interleave and sink examples, plus a second
// column per family: family, qualifier, timestamp, value.
func fixture() []Cell {
	return []Cell{
		{Family: "A", Qualifier: []byte("A"), Timestamp: 1, Value: []byte("w")},
		{Family: "A", Qualifier: []byte("B"), Timestamp: 2, Value: []byte("x")},
		{Family: "A", Qualifier: []byte("B"), Timestamp: 1, Value: []byte("y")},
		{Family: "B", Qualifier: []byte("B"), Timestamp: 4, Value: []byte("z")},
		{Family: "B", Qualifier: []byte("C"), Timestamp: 3, Value: []byte("")},
	}
}

// show renders cells as "fam:qual@ts=value[label]" joined by spaces.
func show(cs []Cell) string {
	var parts []string
	for _, c := range cs {
		s := fmt.Sprintf("%s:%s@%d=%s", c.Family, c.Qualifier, c.Timestamp, c.Value)
		if len(c.Labels) > 0 {
			s += "[" + strings.Join(c.Labels, ",") + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestApply(t *testing.T) {
	all := show(fixture())
	tests := []struct {
		name string
		f    *btpb.RowFilter
		key  string
		want string
	}{
		{"nil passes all", nil, "r", all},
		{"pass all", pass, "r", all},
		{"block all", block, "r", ""},
		{"row key matches whole key", keyRE("r.*"), "row", all},
		{"row key regex is anchored", keyRE("ow"), "row", ""},
		{"row key alternation anchored as a whole", keyRE("a|row"), "row", all},
		{"family regex", famRE("A"), "r", "A:A@1=w A:B@2=x A:B@1=y"},
		{"family regex anchored", famRE("A|"), "r", "A:A@1=w A:B@2=x A:B@1=y"},
		{"qualifier regex", qualRE("B"), "r", "A:B@2=x A:B@1=y B:B@4=z"},
		{"qualifier regex character class", qualRE("[AC]"), "r", "A:A@1=w B:C@3="},
		{"value regex", valRE("[xz]"), "r", "A:B@2=x B:B@4=z"},
		{"value regex matches the empty value", valRE(""), "r", "B:C@3="},
		{"column range closed-open", &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: &btpb.ColumnRange{
			FamilyName: "A", StartQualifier: &btpb.ColumnRange_StartQualifierClosed{StartQualifierClosed: []byte("A")},
			EndQualifier: &btpb.ColumnRange_EndQualifierOpen{EndQualifierOpen: []byte("B")}}}}, "r", "A:A@1=w"},
		{"column range open-closed", &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: &btpb.ColumnRange{
			FamilyName: "B", StartQualifier: &btpb.ColumnRange_StartQualifierOpen{StartQualifierOpen: []byte("B")},
			EndQualifier: &btpb.ColumnRange_EndQualifierClosed{EndQualifierClosed: []byte("C")}}}}, "r", "B:C@3="},
		{"column range unbounded, one family", &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: &btpb.ColumnRange{
			FamilyName: "B"}}}, "r", "B:B@4=z B:C@3="},
		{"timestamp range [2, 4)", tsRange(2, 4), "r", "A:B@2=x B:C@3="},
		{"timestamp range end 0 unbounded", tsRange(3, 0), "r", "B:B@4=z B:C@3="},
		{"value range [x, z)", &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRangeFilter{ValueRangeFilter: &btpb.ValueRange{
			StartValue: &btpb.ValueRange_StartValueClosed{StartValueClosed: []byte("x")},
			EndValue:   &btpb.ValueRange_EndValueOpen{EndValueOpen: []byte("z")}}}}, "r", "A:B@2=x A:B@1=y"},
		{"value range (x, z]", &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRangeFilter{ValueRangeFilter: &btpb.ValueRange{
			StartValue: &btpb.ValueRange_StartValueOpen{StartValueOpen: []byte("x")},
			EndValue:   &btpb.ValueRange_EndValueClosed{EndValueClosed: []byte("z")}}}}, "r", "A:B@1=y B:B@4=z"},
		{"value range unbounded keeps empty values", &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRangeFilter{ValueRangeFilter: &btpb.ValueRange{}}}, "r", all},
		{"cells per row limit", rowLimit(2), "r", "A:A@1=w A:B@2=x"},
		{"cells per row limit over the row", rowLimit(9), "r", all},
		{"cells per row offset", rowOffset(3), "r", "B:B@4=z B:C@3="},
		{"cells per row offset past the row", rowOffset(5), "r", ""},
		{"cells per row offset 0", rowOffset(0), "r", all},
		{"cells per column limit (latest 1)", colLimit(1), "r", "A:A@1=w A:B@2=x B:B@4=z B:C@3="},
		{"strip value", chain(famRE("A"), strip), "r", "A:A@1= A:B@2= A:B@1="},
		{"apply label", chain(qualRE("A"), label("foo")), "r", "A:A@1=w[foo]"},
		// The documented chain example: family then qualifier.
		{"chain", chain(famRE("A"), qualRE("B")), "r", "A:B@2=x A:B@1=y"},
		{"chain stops at an empty step", chain(block, label("x")), "r", ""},
		// The documented interleave example: duplicates kept, merged in
		// column order, newest first.
		{"interleave keeps duplicates", inter(qualRE("B"), famRE("B")), "r", "A:B@2=x A:B@1=y B:B@4=z B:B@4=z B:C@3="},
		{"interleave of labels", inter(chain(qualRE("A"), label("l1")), chain(famRE("A"), label("l2"))), "r",
			"A:A@1=w[l1] A:A@1=w[l2] A:B@2=x[l2] A:B@1=y[l2]"},
		{"interleave then per-row limit counts duplicates", chain(inter(pass, pass), rowLimit(3)), "r", "A:A@1=w A:A@1=w A:B@2=x"},
		{"interleave then latest-1 per column", chain(inter(famRE("A"), famRE("A")), colLimit(1)), "r", "A:A@1=w A:B@2=x"},
		// Condition: the true filter sees the whole row.
		{"condition true", cond(valRE("z"), famRE("A"), famRE("B")), "r", "A:A@1=w A:B@2=x A:B@1=y"},
		{"condition false", cond(valRE("nope"), famRE("A"), famRE("B")), "r", "B:B@4=z B:C@3="},
		{"condition true, no true filter", cond(pass, nil, pass), "r", ""},
		{"condition false, no false filter", cond(block, pass, nil), "r", ""},
		{"condition predicate labels do not leak", cond(label("p"), pass, nil), "r", all},
		{"condition on row key", cond(keyRE("a.*"), strip, pass), "abc", "A:A@1= A:B@2= A:B@1= B:B@4= B:C@3="},
		// The documented sink example.
		{"sink", chain(famRE("A"), inter(pass, chain(label("foo"), sink)), qualRE("B")), "r",
			// Equal cells keep the tree's output ahead of the sink's (the
			// documentation leaves their mutual order unspecified).
			"A:A@1=w[foo] A:B@2=x A:B@2=x[foo] A:B@1=y A:B@1=y[foo]"},
		{"sink alone returns its input", sink, "r", all},
		{"block after sink keeps the sink's cells", chain(famRE("B"), sink, block), "r", "B:B@4=z B:C@3="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Compile(tt.f)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			in := fixture()
			got, err := f.Apply([]byte(tt.key), in)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if s := show(got); s != tt.want {
				t.Errorf("got  %s\nwant %s", s, tt.want)
			}
			if show(in) != all {
				t.Errorf("Apply modified its input: %s", show(in))
			}
		})
	}
}

func TestRowSample(t *testing.T) {
	f, err := Compile(sample(0.5))
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	const rows = 2000
	for range rows {
		got, err := f.Apply([]byte("r"), fixture())
		if err != nil {
			t.Fatal(err)
		}
		switch len(got) {
		case 0:
		case len(fixture()):
			kept++
		default:
			t.Fatalf("row sample kept part of a row: %s", show(got))
		}
	}
	// Binomial(2000, 0.5): 6 standard deviations is about ±134.
	if kept < 800 || kept > 1200 {
		t.Errorf("row sample at 0.5 kept %d of %d rows", kept, rows)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		f    *btpb.RowFilter
		want string // in the message
	}{
		{"unset filter", &btpb.RowFilter{}, "no type"},
		{"bad row key regex", keyRE("a("), "does not compile"},
		{"empty row key regex", keyRE(""), "must not be empty"},
		{"bad family regex", famRE("[a"), "does not compile"},
		{"bad qualifier regex", qualRE("*"), "does not compile"},
		{"bad value regex", valRE("(?P<x"), "does not compile"},
		{"bad regex deep in the tree", chain(pass, inter(pass, cond(valRE("("), nil, nil))), "filter.chain[1].interleave[1].condition.predicate_filter"},
		{"two labels in a chain", chain(label("a"), label("b")), "only one label"},
		{"two labels in a chain, nested", chain(inter(label("a"), pass), cond(pass, label("b"), nil)), "only one label"},
		{"label with upper case", label("Foo"), "[a-z0-9"},
		{"label too long", label("abcdefghijklmnop"), "at most 15"},
		{"empty label", label(""), "[a-z0-9"},
		{"chain of one", chain(pass), "at least two"},
		{"interleave of none", inter(), "at least two"},
		{"cells per row limit 0", rowLimit(0), "must be > 0"},
		{"cells per row offset negative", rowOffset(-1), "must not be negative"},
		{"cells per column limit 0", colLimit(0), "must be > 0"},
		{"row sample 0", sample(0), "(0, 1)"},
		{"row sample 1", sample(1), "(0, 1)"},
		{"pass all false", &btpb.RowFilter{Filter: &btpb.RowFilter_PassAllFilter{}}, "must be true"},
		{"block all false", &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{}}, "must be true"},
		{"strip false", &btpb.RowFilter{Filter: &btpb.RowFilter_StripValueTransformer{}}, "must be true"},
		{"sink false", &btpb.RowFilter{Filter: &btpb.RowFilter_Sink{}}, "must be true"},
		{"sink in a condition predicate", cond(sink, pass, nil), "sink cannot be used"},
		{"sink in a condition branch", cond(pass, chain(pass, sink), nil), "sink cannot be used"},
		{"condition without predicate", cond(nil, pass, nil), "no predicate"},
		{"negative timestamp", tsRange(-5, 0), "negative"},
		{"value bitmask unsupported", &btpb.RowFilter{Filter: &btpb.RowFilter_ValueBitmaskFilter{}}, "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.f)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}

// An interleave's output is in column order, newest first, whatever the
// order of its sub-filters.
func TestApplyOutputIsSorted(t *testing.T) {
	f, err := Compile(inter(famRE("B"), qualRE("A"), tsRange(2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Apply([]byte("r"), fixture())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(got, cellOrder) {
		t.Errorf("interleave output not in column, newest-first order: %s", show(got))
	}
	if want := "A:A@1=w A:B@2=x B:B@4=z B:C@3="; show(got) != want {
		t.Errorf("got %s, want %s", show(got), want)
	}
}
