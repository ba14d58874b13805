package tablet

import (
	"bytes"
	"context"
	"math/rand"
	"slices"
	"testing"
	"time"

	"bighive/storage/tablet/blockcache"
)

// BenchmarkMultiGet reads 100 random rows of one warm TSFile per round:
// one Get per row (the old point path) and a scan of the rows as point
// ranges (what a row list read before) against one GetRows of the 100.
// keys/s is the figure to compare.
func BenchmarkMultiGet(b *testing.B) {
	store, files := flushed(b)
	cache := blockcache.New(blockcache.Options{Capacity: 256 << 20})
	tb := benchTablet(b, store, cache, files)
	defer tb.Close()
	ctx := context.Background()
	if err := tb.Scan(ctx, nil, nil, 0, ReadOptions{}, func(Row) bool { return true }); err != nil {
		b.Fatal(err)
	}
	const keys = 100
	batch := func(rng *rand.Rand) [][]byte {
		rows := make([][]byte, keys)
		for i := range rows {
			rows[i] = benchRow(rng.Intn(benchRows))
		}
		return rows
	}
	run := func(b *testing.B, read func(rows [][]byte) int) {
		rng := rand.New(rand.NewSource(3))
		batches := make([][][]byte, 64)
		for i := range batches {
			batches[i] = batch(rng)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if n := read(batches[i%len(batches)]); n != keys {
				b.Fatalf("read %d rows, want %d", n, keys)
			}
		}
		b.ReportMetric(float64(b.N*keys)/time.Since(start).Seconds(), "keys/s")
	}
	b.Run("get-each", func(b *testing.B) {
		run(b, func(rows [][]byte) int {
			n := 0
			for _, row := range rows {
				_, ok, err := tb.Get(ctx, row, ReadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if ok {
					n++
				}
			}
			return n
		})
	})
	b.Run("scan-points", func(b *testing.B) {
		run(b, func(rows [][]byte) int {
			sorted := slices.SortedFunc(slices.Values(rows), bytes.Compare)
			sorted = slices.CompactFunc(sorted, bytes.Equal)
			ranges := make([]KeyRange, len(sorted))
			for i, r := range sorted {
				ranges[i] = KeyRange{Start: r, End: append(bytes.Clone(r), 0)}
			}
			n := 0
			if err := tb.ScanRanges(ctx, ranges, false, 0, ReadOptions{}, func(Row) bool { n++; return true }); err != nil {
				b.Fatal(err)
			}
			return n + len(rows) - len(sorted)
		})
	})
	b.Run("getrows", func(b *testing.B) {
		run(b, func(rows [][]byte) int {
			n := 0
			if err := tb.GetRows(ctx, rows, ReadOptions{}, func(int, Row) bool { n++; return true }); err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
}
