package tablet

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

const (
	benchRows  = 50_000
	benchValue = 1000
)

func benchRow(i int) []byte { return []byte(fmt.Sprintf("user%010d", i)) }

func benchMutation(i int, v []byte) mutation.RowMutation {
	return mutation.RowMutation{Row: benchRow(i), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("field0"), Timestamp: int64(i + 1), Value: v}}}
}

func benchTablet(b *testing.B, store blockstore.Manager, cache *blockcache.Cache, files []FileRef) *Tablet {
	b.Helper()
	tb, err := Open(Options{ID: "bench", Schema: Schema{Families: map[string]FamilyPolicy{"c": {}}}, Store: store, Cache: cache, Files: files})
	if err != nil {
		b.Fatal(err)
	}
	return tb
}

func loadRows(b *testing.B, tb *Tablet) {
	b.Helper()
	v := make([]byte, benchValue)
	rand.New(rand.NewSource(1)).Read(v)
	for i := 0; i < benchRows; i++ {
		m := benchMutation(i, v)
		if err := tb.AssignTimestamps(&m); err != nil {
			b.Fatal(err)
		}
		if err := tb.Apply(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// flushed returns a store holding one TSFile of benchRows rows.
func flushed(b *testing.B) (blockstore.Manager, []FileRef) {
	b.Helper()
	store, _, err := blockstore.Open(blockstore.Options{Dirs: []string{b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	tb := benchTablet(b, store, nil, nil)
	defer tb.Close()
	loadRows(b, tb)
	tb.SwapBuffers()
	info, err := tb.FlushStandby(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return store, []FileRef{{Footer: info.FooterRef()}}
}

func BenchmarkApply(b *testing.B) {
	tb := benchTablet(b, nil, nil, nil)
	defer tb.Close()
	v := make([]byte, benchValue)
	b.SetBytes(benchValue)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m := benchMutation(rand.Intn(1<<30), v)
		if err := tb.AssignTimestamps(&m); err != nil {
			b.Fatal(err)
		}
		if err := tb.Apply(&m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

func benchGets(b *testing.B, tb *Tablet) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(2))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		_, ok, err := tb.Get(ctx, benchRow(rng.Intn(benchRows)), ReadOptions{})
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "gets/s")
}

func BenchmarkGetBuffer(b *testing.B) {
	tb := benchTablet(b, nil, nil, nil)
	defer tb.Close()
	loadRows(b, tb)
	benchGets(b, tb)
}

func BenchmarkGetTSFile(b *testing.B) {
	store, files := flushed(b)
	b.Run("warm", func(b *testing.B) {
		cache := blockcache.New(blockcache.Options{Capacity: 256 << 20})
		tb := benchTablet(b, store, cache, files)
		defer tb.Close()
		if err := tb.Scan(context.Background(), nil, nil, 0, ReadOptions{}, func(Row) bool { return true }); err != nil {
			b.Fatal(err)
		}
		benchGets(b, tb)
		st := cache.Stats()
		b.ReportMetric(float64(st.Hits)/float64(st.Hits+st.Misses), "hit-ratio")
	})
	b.Run("cold", func(b *testing.B) {
		// No block cache: every Get reads and verifies a page from
		// the block store (the OS page cache still holds the file).
		tb := benchTablet(b, store, nil, files)
		defer tb.Close()
		benchGets(b, tb)
	})
}

// benchScan scans every row b.N times; open gives the tablet of one round
// and whether to close it after.
func benchScan(b *testing.B, open func() (*Tablet, bool)) { benchScanDir(b, false, open) }

// benchScanDir is benchScan forward or reversed.
func benchScanDir(b *testing.B, reversed bool, open func() (*Tablet, bool)) {
	b.Helper()
	ctx := context.Background()
	var rows, bytes int64
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tb, closeAfter := open()
		b.StartTimer()
		err := tb.ScanRanges(ctx, []KeyRange{{}}, reversed, 0, ReadOptions{}, func(r Row) bool {
			rows++
			for _, c := range r.Cells {
				bytes += int64(len(r.Key) + len(c.Qualifier) + len(c.Value))
			}
			return true
		})
		if err != nil {
			b.Fatal(err)
		}
		if closeAfter {
			b.StopTimer()
			tb.Close()
			b.StartTimer()
		}
	}
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(rows)/secs, "rows/s")
	b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
}

func BenchmarkScan(b *testing.B) {
	b.Run("buffer", func(b *testing.B) {
		tb := benchTablet(b, nil, nil, nil)
		loadRows(b, tb)
		defer tb.Close()
		benchScan(b, func() (*Tablet, bool) { return tb, false })
	})
	store, files := flushed(b)
	b.Run("tsfile-cold-cache", func(b *testing.B) {
		benchScan(b, func() (*Tablet, bool) {
			return benchTablet(b, store, blockcache.New(blockcache.Options{Capacity: 256 << 20}), files), true
		})
	})
	cache := blockcache.New(blockcache.Options{Capacity: 256 << 20})
	b.Run("tsfile-warm-cache", func(b *testing.B) {
		benchScan(b, func() (*Tablet, bool) { return benchTablet(b, store, cache, files), true })
	})
}

// BenchmarkReverseScan is BenchmarkScan in descending row order.
func BenchmarkReverseScan(b *testing.B) {
	b.Run("buffer", func(b *testing.B) {
		tb := benchTablet(b, nil, nil, nil)
		loadRows(b, tb)
		defer tb.Close()
		benchScanDir(b, true, func() (*Tablet, bool) { return tb, false })
	})
	store, files := flushed(b)
	b.Run("tsfile-cold-cache", func(b *testing.B) {
		benchScanDir(b, true, func() (*Tablet, bool) {
			return benchTablet(b, store, blockcache.New(blockcache.Options{Capacity: 256 << 20}), files), true
		})
	})
	cache := blockcache.New(blockcache.Options{Capacity: 256 << 20})
	b.Run("tsfile-warm-cache", func(b *testing.B) {
		benchScanDir(b, true, func() (*Tablet, bool) { return benchTablet(b, store, cache, files), true })
	})
}
