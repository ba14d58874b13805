package bench

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"testing"
)

func TestValues(t *testing.T) {
	const size = 1000
	v := newValues(7, size)
	if got := newValues(7, size).of(12345); !bytes.Equal(got, v.of(12345)) {
		t.Error("row 12345's value differs between two pools of the same seed")
	}
	// A page's worth of neighbouring rows: each value its own, and
	// together incompressible.
	var page bytes.Buffer
	for i := range 256 {
		x := v.of(i)
		if len(x) != size || cap(x) != size {
			t.Fatalf("row %d: value of len %d cap %d, want %d", i, len(x), cap(x), size)
		}
		if i > 0 && bytes.Equal(x[:8], v.of(i - 1)[:8]) {
			t.Errorf("rows %d and %d have values of the same first bytes", i-1, i)
		}
		page.Write(x)
	}
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestCompression)
	w.Write(page.Bytes())
	w.Close()
	if z.Len() < page.Len()*98/100 {
		t.Errorf("%d bytes of values deflate to %d", page.Len(), z.Len())
	}
}

// getStore answers every Get with one cell of value.
type getStore struct {
	store
	value []byte
}

func (s getStore) Get(context.Context, string) (int, []byte, int64, error) {
	return 1, s.value, int64(len(s.value)), nil
}

func TestGetOneChecksValue(t *testing.T) {
	r := &runner{opts: Options{ValueSize: 100}, values: newValues(1, 100)}
	ctx := context.Background()
	r.st = getStore{value: r.values.of(8)}
	if _, err := r.getOne(ctx, 8); err != nil {
		t.Errorf("row 8 with its own value: %v", err)
	}
	if _, err := r.getOne(ctx, 9); !errors.Is(err, ErrMismatch) {
		t.Errorf("row 9 with row 8's value: %v, want ErrMismatch", err)
	}
	r.st = getStore{value: r.values.of(8)[:99]}
	if _, err := r.getOne(ctx, 8); !errors.Is(err, ErrMismatch) {
		t.Errorf("row 8 with 99 bytes: %v, want ErrMismatch", err)
	}
}
