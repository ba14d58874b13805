package memstore

import (
	"fmt"
	"math/rand"
	"testing"

	"bighive/storage/mutation"
)

// BenchmarkApplyRandom inserts one cell per op at a random row of 16
// decimal digits (the bench's keys) with a 1000-byte value, into a buffer
// that already holds 64 Ki entries (about a 64 MiB write buffer):
//
//	go test ./storage/memstore -run '^$' -bench ApplyRandom -count 6
func BenchmarkApplyRandom(b *testing.B) {
	const preload = 64 << 10
	rnd := rand.New(rand.NewSource(1))
	value := make([]byte, 1000)
	row := func() []byte { return []byte(fmt.Sprintf("%016d", rnd.Int63n(1e15))) }
	m := New()
	for i := 0; i < preload; i++ {
		m.Apply([]Entry{{Row: row(), Family: "cf", Qualifier: []byte("q"), Timestamp: 1, Kind: mutation.SetCell, Value: value}})
	}
	rows := make([][]byte, 1<<16)
	for i := range rows {
		rows[i] = row()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Apply([]Entry{{Row: rows[i%len(rows)], Family: "cf", Qualifier: []byte("q"), Timestamp: int64(i), Kind: mutation.SetCell, Value: value}})
	}
}

// BenchmarkIterateRandom walks, as a flush does, a buffer of 256 Ki cells
// at random rows (the bench's keys, 100-byte values), each row written
// twice (the second write overwrites the first, which the walk skips);
// ns/op is per visible cell:
//
//	go test ./storage/memstore -run '^$' -bench IterateRandom -count 6
func BenchmarkIterateRandom(b *testing.B) {
	const rows = 128 << 10
	rnd := rand.New(rand.NewSource(1))
	value := make([]byte, 100)
	keys := make([][]byte, rows)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("%016d", rnd.Int63n(1e15)))
	}
	m := New()
	for pass := range 2 {
		for _, k := range keys {
			m.Apply([]Entry{{Row: k, Family: "cf", Qualifier: []byte("q"), Timestamp: int64(pass), Kind: mutation.SetCell, Value: value}})
		}
	}
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if n == 0 {
			it := m.NewIterator()
			it.First()
			for ; it.Valid(); it.Next() {
				n++
			}
			it.Close()
		}
		n--
	}
}
