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
