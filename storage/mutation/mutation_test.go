package mutation

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	cases := []RowMutation{
		{Row: []byte("r")},
		{Seq: 1<<40 + 3, Row: []byte("row1"), Ops: []Op{
			{Kind: SetCell, Family: "cf", Qualifier: []byte("q"), Timestamp: 12, Value: []byte("v")},
			{Kind: DeleteColumn, Family: "cf", Qualifier: []byte("q"), Timestamp: 1, End: 10},
			{Kind: DeleteFamily, Family: "f2", Timestamp: ServerTime},
			{Kind: DeleteRow, Timestamp: 99},
		}},
	}
	for _, alias := range []bool{false, true} {
		for i, m := range cases {
			b := m.Append(nil)
			if len(b) > m.Size() {
				t.Fatalf("case %d: encoded %d bytes > Size %d", i, len(b), m.Size())
			}
			got, err := Decode(b, alias)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if got.Seq != m.Seq || !bytes.Equal(got.Row, m.Row) || len(got.Ops) != len(m.Ops) {
				t.Fatalf("case %d: got %+v want %+v", i, got, m)
			}
			for j := range m.Ops {
				w, g := m.Ops[j], got.Ops[j]
				if w.Kind != g.Kind || w.Family != g.Family || !bytes.Equal(w.Qualifier, g.Qualifier) ||
					w.Timestamp != g.Timestamp || w.End != g.End || !bytes.Equal(w.Value, g.Value) {
					t.Fatalf("case %d op %d: got %+v want %+v", i, j, g, w)
				}
			}
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := (&RowMutation{Seq: 7, Row: []byte("row"), Ops: []Op{{Kind: SetCell, Family: "f", Qualifier: []byte("q"), Value: []byte("value")}}}).Append(nil)
	for cut := 0; cut < len(good); cut++ {
		if _, err := Decode(good[:cut], false); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d: err = %v, want ErrMalformed", cut, err)
		}
	}
	bad := append([]byte(nil), good...)
	bad[7] = 9 // the op kind
	if _, err := Decode(bad, false); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad kind: err = %v", err)
	}
	if _, err := Decode(append(good, 0), false); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

func TestDecodeRejectsUnknownVersion(t *testing.T) {
	good := (&RowMutation{Seq: 7, Row: []byte("row"), Ops: []Op{{Kind: DeleteRow}}}).Append(nil)
	for _, v := range []byte{0, 3, 255} {
		bad := append([]byte{v}, good[1:]...)
		_, err := Decode(bad, false)
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("version %d: err = %v, want ErrVersion", v, err)
		}
		if want := fmt.Sprintf("version %d", v); !strings.Contains(err.Error(), want) {
			t.Fatalf("version %d: error %q does not name the version", v, err)
		}
	}
}

// TestMergeCellVersion checks that a mutation with a MergeCell op is
// encoded as MergeVersion and decodes back, that one without keeps
// EncodingVersion, and that a MergeCell op under version 1 is malformed
// (a build before MergeCell must not meet one it calls valid).
func TestMergeCellVersion(t *testing.T) {
	operand := []byte{0, 0, 0, 0, 0, 0, 0, 5}
	tests := []struct {
		name    string
		ops     []Op
		version byte
	}{
		{"plain", []Op{{Kind: SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 1000, Value: []byte("v")}}, EncodingVersion},
		{"merge", []Op{{Kind: MergeCell, Family: "agg", Qualifier: []byte("q"), Timestamp: 1000, Value: operand}}, MergeVersion},
		{"mixed", []Op{{Kind: DeleteColumn, Family: "agg", Qualifier: []byte("q")}, {Kind: MergeCell, Family: "agg", Qualifier: []byte("q"), Timestamp: 2000, Value: operand}}, MergeVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := RowMutation{Seq: 3, Row: []byte("r"), Ops: tc.ops}
			b := m.Append(nil)
			if b[0] != tc.version {
				t.Fatalf("version byte = %d, want %d", b[0], tc.version)
			}
			got, err := Decode(b, false)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("Decode = %+v, want %+v", got, m)
			}
			if tc.version == MergeVersion {
				old := append([]byte{EncodingVersion}, b[1:]...)
				if _, err := Decode(old, false); !errors.Is(err, ErrMalformed) {
					t.Fatalf("MergeCell under version 1: err = %v, want ErrMalformed", err)
				}
			}
		})
	}
	if MergeCell.String() != "MergeCell" {
		t.Errorf("MergeCell.String() = %q", MergeCell.String())
	}
}

func FuzzDecode(f *testing.F) {
	f.Add((&RowMutation{Seq: 9, Row: []byte("r"), Ops: []Op{{Kind: DeleteRow}}}).Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, true)
		if err != nil {
			return
		}
		again, err := Decode(m.Append(nil), false)
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(m)) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}

func normalize(m RowMutation) RowMutation {
	if len(m.Row) == 0 {
		m.Row = nil
	}
	for i := range m.Ops {
		if len(m.Ops[i].Qualifier) == 0 {
			m.Ops[i].Qualifier = nil
		}
		if len(m.Ops[i].Value) == 0 {
			m.Ops[i].Value = nil
		}
	}
	if len(m.Ops) == 0 {
		m.Ops = nil
	}
	return m
}
