package tablet

import (
	"context"
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
	"bighive/storage/tablet/tsfile"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScanCompression scans, through the tablet engine, one TSFile
// per codec of the same rows (1000-byte values, half repeated text and
// half random) with a block cache far smaller than the file, so every
// page is read, verified and decompressed: the scan a user sees of data
// not in memory. Every iteration scans each tablet, in a rotating order,
// each scan starting on a collected heap and paying for collecting its own
// garbage; wall and CPU throughput are printed side by side.
//
//	go test ./storage/tablet/ -run '^$' -bench BenchmarkScanCompression -benchtime 20x
func BenchmarkScanCompression(b *testing.B) {
	ctx := context.Background()
	const rows = 16000
	store, _, err := blockstore.Open(blockstore.Options{Dirs: []string{b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	type run struct {
		codec     tsfile.Compression
		tb        *Tablet
		size      int64
		wall, cpu time.Duration
		bytes     int64
	}
	var runs []*run
	for _, c := range []tsfile.Compression{tsfile.CompressionNone, tsfile.CompressionSnappy, tsfile.CompressionZstd} {
		rng := rand.New(rand.NewSource(1))
		opts := Options{ID: "bench-" + c.String(), Schema: Schema{Families: map[string]FamilyPolicy{"c": {Compression: c}}}, Store: store}
		tb, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < rows; i++ {
			m := mutation.RowMutation{Row: benchRow(i), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("field0"),
				Timestamp: int64(i + 1), Value: mixedValue(rng, 1000)}}}
			if err := tb.AssignTimestamps(&m); err != nil {
				b.Fatal(err)
			}
			if err := tb.Apply(&m); err != nil {
				b.Fatal(err)
			}
		}
		tb.SwapBuffers()
		info, err := tb.FlushStandby(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tb.Close()
		opts.Files = []FileRef{{Footer: info.FooterRef()}}
		opts.Cache = blockcache.New(blockcache.Options{Capacity: 1 << 20})
		if tb, err = Open(opts); err != nil {
			b.Fatal(err)
		}
		defer tb.Close()
		runs = append(runs, &run{codec: c, tb: tb, size: info.Size})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range runs {
			r := runs[(i+k)%len(runs)]
			runtime.GC()
			start, cpu := time.Now(), processCPU()
			err := r.tb.Scan(ctx, nil, nil, 0, ReadOptions{}, func(row Row) bool {
				for _, c := range row.Cells {
					r.bytes += int64(len(row.Key) + len(c.Qualifier) + len(c.Value))
				}
				return true
			})
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			r.wall += time.Since(start)
			r.cpu += processCPU() - cpu
		}
	}
	b.StopTimer()
	const mb = 1 << 20
	mbps := func(r *run, d time.Duration) float64 { return float64(r.bytes) / d.Seconds() / mb }
	b.Logf("%d rows, %d iterations; MB are key+qualifier+value bytes returned", rows, b.N)
	b.Logf("%-7s %10s %8s | %9s %8s | %13s %8s", "codec", "file bytes", "vs none", "scan MB/s", "vs none", "MB/CPU-second", "vs none")
	for _, r := range runs {
		w, c := mbps(r, r.wall), mbps(r, r.cpu)
		w0, c0 := mbps(runs[0], runs[0].wall), mbps(runs[0], runs[0].cpu)
		b.Logf("%-7s %10d %7.3fx | %9.0f %+7.1f%% | %13.0f %+7.1f%%", r.codec, r.size, float64(r.size)/float64(runs[0].size), w, 100*(w/w0-1), c, 100*(c/c0-1))
		b.ReportMetric(w, r.codec.String()+"-scan-MB/s")
		b.ReportMetric(c, r.codec.String()+"-scan-MB/CPU-s")
	}
}
