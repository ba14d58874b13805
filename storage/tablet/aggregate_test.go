package tablet

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"bighive/storage/mutation"
)

func operand(fam, q string, ts, v int64) mutation.Op {
	return mutation.Op{Kind: mutation.MergeCell, Family: fam, Qualifier: []byte(q), Timestamp: ts, Value: binary.BigEndian.AppendUint64(nil, uint64(v))}
}

// TestValidateAggregates checks what a client's write into an aggregate
// family may be, and that a logged record (replay: assigned timestamps,
// any family) applies whatever the schema says now.
func TestValidateAggregates(t *testing.T) {
	s := Schema{Families: map[string]FamilyPolicy{"sum": {Aggregate: Sum}, "p": {}}, Granularity: Millis}
	set := mutation.Op{Kind: mutation.SetCell, Family: "sum", Qualifier: []byte("c"), Timestamp: 1000, Value: []byte("x")}
	short := operand("sum", "c", 1000, 1)
	short.Value = short.Value[:4]
	tests := []struct {
		name             string
		op               mutation.Op
		assigned, anyFam bool
		want             string // "" accepted
	}{
		{"an operand", operand("sum", "c", 1000, 1), false, false, ""},
		{"deletes of an aggregate family", mutation.Op{Kind: mutation.DeleteColumn, Family: "sum", Qualifier: []byte("c")}, false, false, ""},
		{"a set into an aggregate family", set, false, false, `sets a cell of aggregate family "sum"`},
		{"an operand into a plain family", operand("p", "c", 1000, 1), false, false, `family "p"`},
		{"an operand into a missing family", operand("nofam", "c", 1000, 1), false, false, "unknown column family"},
		{"an operand at server time", operand("sum", "c", mutation.ServerTime, 1), false, false, "no timestamp"},
		{"an operand off the millisecond granularity", operand("sum", "c", 1500, 1), false, false, "granularity"},
		{"a 4-byte operand", short, false, false, "4-byte operand"},
		{"a logged operand of a family no longer aggregate", operand("p", "c", 1500, 1), true, true, ""},
		{"a logged set into a family now aggregate", set, true, true, ""},
	}
	for _, tc := range tests {
		m := &mutation.RowMutation{Seq: 1, Row: []byte("r"), Ops: []mutation.Op{tc.op}}
		err := s.validate(m, tc.assigned, tc.anyFam)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) ||
			!(errors.Is(err, ErrInvalidMutation) || errors.Is(err, ErrUnknownFamily)) {
			t.Errorf("%s: %v, want an invalid mutation saying %s", tc.name, err, tc.want)
		}
	}
}

// TestAggregateReadStats: a read's Stats count a cell made of several
// operands once, as the API's request stats count cells seen.
func TestAggregateReadStats(t *testing.T) {
	tb, err := Open(Options{ID: "t", Schema: Schema{Families: map[string]FamilyPolicy{"sum": {Aggregate: Sum}}}, Store: newStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	m := &mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{operand("sum", "c", 10, 1), operand("sum", "c", 10, 2), operand("sum", "c", 10, 3), operand("sum", "d", 10, 4)}}
	if err := tb.AssignTimestamps(m); err != nil {
		t.Fatal(err)
	}
	if err := tb.Apply(m); err != nil {
		t.Fatal(err)
	}
	var st ReadStats
	row, ok, err := tb.Get(context.Background(), []byte("r"), ReadOptions{Stats: &st})
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if st.Rows != 1 || st.Cells != 2 || len(row.Cells) != 2 {
		t.Fatalf("stats %+v and %d cells, want 1 row, 2 cells", st, len(row.Cells))
	}
	if v := int64(binary.BigEndian.Uint64(row.Cells[0].Value)); v != 6 {
		t.Fatalf("sum:c = %d, want 6", v)
	}
}
