package client

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"bighive/internal/flatrows"
)

// TestDecodeFlat checks decodeFlat against the rows a flatrows.Writer
// encoded: every shape of row, and rows that shrink after the first (the
// first row sizes the slices, which must then grow).
func TestDecodeFlat(t *testing.T) {
	big := make([]byte, 4000)
	for i := range big {
		big[i] = byte(i)
	}
	tests := []struct {
		name string
		rows []Row
	}{
		{"one row one cell", []Row{{Key: "r1", Cells: []Cell{{Family: "cf", Qualifier: "q", Timestamp: 7, Value: []byte("v")}}}}},
		{"a row without cells first", []Row{{Key: "cut"}, {Key: "r2", Cells: []Cell{{Family: "cf", Qualifier: "q", Timestamp: -1, Value: []byte("v")}}}}},
		{"families change within a row and across rows", []Row{
			{Key: "a", Cells: []Cell{{Family: "f1", Qualifier: "x", Value: []byte("1")}, {Family: "f2", Qualifier: "y", Value: []byte("2")}}},
			{Key: "b", Cells: []Cell{{Family: "f2", Qualifier: "y", Value: []byte("3")}, {Family: "f1", Qualifier: "", Value: nil}}},
		}},
		{"labels", []Row{{Key: "l", Cells: []Cell{{Family: "cf", Qualifier: "q", Value: []byte("v"), Labels: []string{"one", "two"}}}}}},
		{"a big first row, then small ones", append([]Row{{Key: "big", Cells: []Cell{{Family: "cf", Qualifier: "q", Value: big}}}}, smallRows(50)...)},
		{"small rows, then a big one", append(smallRows(50), Row{Key: "zz", Cells: []Cell{{Family: "cf", Qualifier: "q", Value: big}}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunk := encodeFlat(tc.rows)
			got, err := decodeFlat(chunk)
			if err != nil {
				t.Fatalf("decodeFlat: %v", err)
			}
			if len(got) != len(tc.rows) {
				t.Fatalf("decoded %d rows, want %d", len(got), len(tc.rows))
			}
			for i := range got {
				if !sameRow(got[i], tc.rows[i]) {
					t.Fatalf("row %d: got %+v, want %+v", i, got[i], tc.rows[i])
				}
			}
			// A value is capped at its end: appending to it leaves the
			// bytes after it, the next row's key among them, alone.
			for _, r := range got {
				for _, c := range r.Cells {
					_ = append(c.Value, "XXXXXXXXXXXXXXXX"...)
				}
			}
			for i := range got {
				if !sameRow(got[i], tc.rows[i]) {
					t.Fatalf("after appending to values, row %d: got %+v, want %+v", i, got[i], tc.rows[i])
				}
			}
		})
	}
}

// TestDecodeFlatCorrupt checks that every truncation of a chunk is an
// error or a prefix of its rows, never a panic.
func TestDecodeFlatCorrupt(t *testing.T) {
	rows := smallRows(5)
	chunk := encodeFlat(rows)
	for n := 0; n < len(chunk); n++ {
		got, err := decodeFlat(chunk[:n:n])
		if err != nil {
			var ce *flatrows.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("truncated to %d bytes: error %v is not a *flatrows.CorruptError", n, err)
			}
			continue
		}
		for i := range got {
			if got[i].Key != rows[i].Key {
				t.Fatalf("truncated to %d bytes: row %d is %q, want %q", n, i, got[i].Key, rows[i].Key)
			}
		}
	}
}

func smallRows(n int) []Row {
	var rows []Row
	for i := 0; i < n; i++ {
		rows = append(rows, Row{Key: fmt.Sprintf("row%04d", i), Cells: []Cell{{Family: "cf", Qualifier: "q", Timestamp: int64(i), Value: []byte{byte(i)}}}})
	}
	return rows
}

func encodeFlat(rows []Row) []byte {
	var w flatrows.Writer
	for _, r := range rows {
		w.StartRow([]byte(r.Key))
		for _, c := range r.Cells {
			w.AddCell(c.Family, []byte(c.Qualifier), c.Timestamp, c.Value, c.Labels)
		}
		w.EndRow()
	}
	return append([]byte(nil), w.Bytes()...)
}

// sameRow compares rows, a nil and an empty value or label list alike.
func sameRow(a, b Row) bool {
	if a.Key != b.Key || len(a.Cells) != len(b.Cells) {
		return false
	}
	for i := range a.Cells {
		x, y := a.Cells[i], b.Cells[i]
		if x.Family != y.Family || x.Qualifier != y.Qualifier || x.Timestamp != y.Timestamp || string(x.Value) != string(y.Value) {
			return false
		}
		if len(x.Labels) != len(y.Labels) || (len(x.Labels) > 0 && !reflect.DeepEqual(x.Labels, y.Labels)) {
			return false
		}
	}
	return true
}

// BenchmarkDecodeFlat decodes a scan message of 1 000 rows of one
// 1 000-byte cell, the bench's scan.
func BenchmarkDecodeFlat(b *testing.B) {
	value := make([]byte, 1000)
	var rows []Row
	for i := 0; i < 1000; i++ {
		rows = append(rows, Row{Key: fmt.Sprintf("%016d", i), Cells: []Cell{{Family: "cf", Qualifier: "v", Timestamp: int64(i), Value: value}}})
	}
	chunk := encodeFlat(rows)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeFlat(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
