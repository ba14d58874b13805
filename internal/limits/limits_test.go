package limits

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

func set(row []byte, family string, qual, value []byte) *pb.RowMutation {
	return &pb.RowMutation{RowKey: row, Mutations: []*pb.Mutation{{Mutation: &pb.Mutation_SetCell_{
		SetCell: &pb.Mutation_SetCell{Family: family, Qualifier: qual, TimestampMicros: -1, Value: value}}}}}
}

// rowOf is a row mutation of row "r" counting n bytes toward
// MaxRowMutationBytes: values of one shared buffer (so it costs 100 MiB of
// memory, not n), the last one cut to make up n.
func rowOf(n int) *pb.RowMutation {
	buf := make([]byte, MaxValueBytes)
	m := &pb.RowMutation{RowKey: []byte("r")}
	for q := 0; n > 0; q++ {
		v := buf[:min(len(buf), n-len("f")-1-MutationOpOverhead)]
		m.Mutations = append(m.Mutations, set(nil, "f", []byte{byte(q)}, v).Mutations...)
		n -= len("f") + 1 + len(v) + MutationOpOverhead
	}
	return m
}

func bytesN(n int) []byte { return []byte(strings.Repeat("k", n)) }

// TestLimits shows every limit accepted at the limit and refused with
// InvalidArgument one past it.
func TestLimits(t *testing.T) {
	name := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"table name at limit", ValidateTableName(name(MaxNameBytes)), true},
		{"table name over limit", ValidateTableName(name(MaxNameBytes + 1)), false},
		{"table name all classes", ValidateTableName("Az09_.-"), true},
		{"table name empty", ValidateTableName(""), false},
		{"table name non-UTF-8", ValidateTableName("t\xff"), false},
		{"table name UTF-8 non-ASCII", ValidateTableName("tabellé"), false},
		{"table name space", ValidateTableName("a b"), false},
		{"table name slash", ValidateTableName("a/b"), false},
		{"family name at limit", ValidateFamilyName(name(MaxNameBytes)), true},
		{"family name over limit", ValidateFamilyName(name(MaxNameBytes + 1)), false},
		{"family name empty", ValidateFamilyName(""), false},
		{"family name non-UTF-8", ValidateFamilyName("\xc3\x28"), false},
		{"row key at limit", ValidateRowMutation(set(bytesN(MaxRowKeyBytes), "f", nil, nil)), true},
		{"row key over limit", ValidateRowMutation(set(bytesN(MaxRowKeyBytes+1), "f", nil, nil)), false},
		{"row key empty", ValidateRowMutation(set(nil, "f", nil, nil)), false},
		{"qualifier at limit", ValidateRowMutation(set([]byte("r"), "f", bytesN(MaxQualifierBytes), nil)), true},
		{"qualifier over limit", ValidateRowMutation(set([]byte("r"), "f", bytesN(MaxQualifierBytes+1), nil)), false},
		{"value at limit", ValidateRowMutation(set([]byte("r"), "f", nil, make([]byte, MaxValueBytes))), true},
		{"value over limit", ValidateRowMutation(set([]byte("r"), "f", nil, make([]byte, MaxValueBytes+1))), false},
		{"row mutation at limit", ValidateRowMutation(rowOf(MaxRowMutationBytes)), true},
		{"row mutation over limit", ValidateRowMutation(rowOf(MaxRowMutationBytes + 1)), false},
		{"family in mutation bad", ValidateRowMutation(set([]byte("r"), "f:x", nil, nil)), false},
		{"no operations", ValidateRowMutation(&pb.RowMutation{RowKey: []byte("r")}), false},
		{"operation without kind", ValidateRowMutation(&pb.RowMutation{RowKey: []byte("r"), Mutations: []*pb.Mutation{{}}}), false},
		{"empty time range", ValidateTimestampRange(&pb.TimestampRange{StartMicros: 5, EndMicros: 5}), false},
		{"open time range", ValidateTimestampRange(&pb.TimestampRange{StartMicros: 5}), true},
		{"negative time range", ValidateTimestampRange(&pb.TimestampRange{StartMicros: -2}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ok {
				if tc.err != nil {
					t.Fatalf("refused: %v", tc.err)
				}
				return
			}
			if tc.err == nil {
				t.Fatal("accepted, want InvalidArgument")
			}
			if c := apierr.CodeOf(tc.err); c != codes.InvalidArgument {
				t.Fatalf("code %v, want InvalidArgument (%v)", c, tc.err)
			}
			if tc.err.Error() == "" {
				t.Fatal("empty message")
			}
		})
	}
}

func TestMessageNamesTheLimit(t *testing.T) {
	err := ValidateRowMutation(set(bytesN(MaxRowKeyBytes+1), "f", nil, nil))
	if !strings.Contains(err.Error(), "4097") || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("message %q should name the size and the limit", err)
	}
	err = ValidateRowMutation(rowOf(MaxRowMutationBytes + 1))
	if !strings.Contains(err.Error(), `row "r"`) || !strings.Contains(err.Error(), fmt.Sprint(MaxRowMutationBytes+1)) ||
		!strings.Contains(err.Error(), fmt.Sprint(MaxRowMutationBytes)) {
		t.Fatalf("message %q should name the row, its size and the limit", err)
	}
	err = ValidateTableName("bad name")
	if !strings.Contains(err.Error(), "' '") || !strings.Contains(err.Error(), "[A-Za-z0-9_.-]") {
		t.Fatalf("message %q should name the bad character and the rule", err)
	}
}
