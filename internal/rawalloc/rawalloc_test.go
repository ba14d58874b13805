package rawalloc

import (
	"bytes"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, n := range []int{0, 1, 7, 256, 4096, 16 << 10, 1<<20 + 3, 4 << 20} {
		b := Bytes(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("Bytes(%d): len %d cap %d, want %d and %d", n, len(b), cap(b), n, n)
		}
		// Every byte is the caller's to write and read back.
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		for i := range b {
			if b[i] != byte(i*7+n) {
				t.Fatalf("Bytes(%d)[%d] = %d after writing %d", n, i, b[i], byte(i*7+n))
			}
		}
	}
}

func TestBytesAreDistinct(t *testing.T) {
	// Two live slices never share memory: writing one leaves the other.
	a, b := Bytes(64<<10), Bytes(64<<10)
	for i := range a {
		a[i] = 1
	}
	for i := range b {
		b[i] = 2
	}
	if !bytes.Equal(a, bytes.Repeat([]byte{1}, len(a))) {
		t.Fatal("writing the second slice changed the first")
	}
}

func TestBytesNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Bytes(-1) did not panic")
		}
	}()
	Bytes(-1)
}

func BenchmarkBytes(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		b.Run(sizeName(size)+"/rawalloc", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				sink = Bytes(size)
			}
		})
		b.Run(sizeName(size)+"/make", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				sink = make([]byte, size)
			}
		})
	}
}

var sink []byte

func sizeName(n int) string {
	if n >= 1<<20 {
		return "1MiB"
	}
	return "16KiB"
}
