package flatrows

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

type row struct {
	key   string
	cells []cell
}

type cell struct {
	fam, qual string
	ts        int64
	val       string
	labels    []string
}

func encode(rows []row) []byte {
	var w Writer
	for _, r := range rows {
		w.StartRow([]byte(r.key))
		for _, c := range r.cells {
			w.AddCell(c.fam, []byte(c.qual), c.ts, []byte(c.val), c.labels)
		}
		w.EndRow()
	}
	return w.Bytes()
}

// decode reads every row; skipLabels leaves labels unread (NextCell and
// NextRow skip them).
func decode(b []byte, skipLabels bool) ([]row, error) {
	var out []row
	r := NewReader(b)
	for {
		key, n, ok := r.NextRow()
		if !ok {
			break
		}
		rw := row{key: string(key)}
		for i := 0; i < n; i++ {
			c, ok := r.NextCell()
			if !ok {
				break
			}
			cl := cell{fam: string(c.Family), qual: string(c.Qualifier), ts: c.Timestamp, val: string(c.Value)}
			for j := 0; j < c.Labels && !skipLabels; j++ {
				l, _ := r.NextLabel()
				cl.labels = append(cl.labels, string(l))
			}
			rw.cells = append(rw.cells, cl)
		}
		out = append(out, rw)
	}
	return out, r.Err()
}

func TestRoundTrip(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for iter := 0; iter < 200; iter++ {
		var rows []row
		for i := rng.Intn(6); i > 0; i-- {
			r := row{key: fmt.Sprintf("row%d", rng.Intn(1000))}
			for j := rng.Intn(4); j > 0; j-- {
				c := cell{fam: []string{"a", "cf", ""}[rng.Intn(3)], qual: fmt.Sprint(rng.Intn(9)), ts: rng.Int63() - rng.Int63(), val: string(make([]byte, rng.Intn(300)))}
				if rng.Intn(4) == 0 {
					c.labels = []string{"x", "yy"}[:1+rng.Intn(2)]
				}
				r.cells = append(r.cells, c)
			}
			rows = append(rows, r)
		}
		b := encode(rows)
		got, err := decode(b, false)
		if err != nil || !reflect.DeepEqual(got, rows) {
			t.Fatalf("seed %d iter %d: got %+v, %v; want %+v", seed, iter, got, err, rows)
		}
		// Skipping the labels still lands on the next cell and row.
		got, err = decode(b, true)
		for i := range rows {
			for j := range rows[i].cells {
				rows[i].cells[j].labels = nil
			}
		}
		if err != nil || !reflect.DeepEqual(got, rows) {
			t.Fatalf("seed %d iter %d, labels skipped: got %+v, %v; want %+v", seed, iter, got, err, rows)
		}
		// Every truncation fails cleanly with an offset inside the buffer,
		// or (cut between rows) decodes a prefix.
		for cut := 0; cut < len(b); cut++ {
			_, err := decode(b[:cut], false)
			var ce *CorruptError
			if err != nil && (!errors.As(err, &ce) || ce.Offset > cut) {
				t.Fatalf("seed %d: cut at %d: %v", seed, cut, err)
			}
		}
	}
}

func TestGarbageNeverPanics(t *testing.T) {
	cases := map[string][]byte{
		"huge key length":   {0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge cell count":   {1, 'k', 0xff, 0xff, 0xff, 0xff},
		"bad varint":        {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
		"missing count":     {1, 'k', 1},
		"truncated cell":    {1, 'k', 1, 0, 0, 0, 1, 'f'},
		"huge label count":  {1, 'k', 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x7f},
		"negative-ish ts":   {1, 'k', 1, 0, 0, 0, 0, 0, 0x80},
		"empty row is fine": {0, 0, 0, 0, 0},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			rows, err := decode(b, false)
			if name == "empty row is fine" {
				if err != nil || len(rows) != 1 {
					t.Fatalf("got %v, %v", rows, err)
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset > len(b) {
				t.Fatalf("got rows %v, err %v: want a CorruptError within the buffer", rows, err)
			}
		})
	}
}

// BenchmarkReader decodes a scan message's worth of rows as the bench's
// table holds them: 16-byte keys, one cell of 1 000 bytes each.
func BenchmarkReader(b *testing.B) {
	var w Writer
	val := make([]byte, 1000)
	const rows = 1000
	for i := range rows {
		w.StartRow(fmt.Appendf(nil, "%016d", i))
		w.AddCell("f", []byte("q"), int64(i), val, nil)
		w.EndRow()
	}
	chunk := w.Bytes()
	b.SetBytes(int64(len(chunk)))
	for range b.N {
		r := NewReader(chunk)
		n := 0
		for {
			_, cells, ok := r.NextRow()
			if !ok {
				break
			}
			for range cells {
				if _, ok := r.NextCell(); !ok {
					b.Fatal(r.Err())
				}
			}
			n++
		}
		if n != rows || r.Err() != nil {
			b.Fatalf("%d rows, %v", n, r.Err())
		}
	}
}
