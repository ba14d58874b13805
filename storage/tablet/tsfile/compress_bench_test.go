package tsfile

import (
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/tablet/blockcache"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// codecFile is one TSFile of the benchmark data under one codec.
type codecFile struct {
	c       Compression
	info    Info
	r       *Reader
	pages   [][]byte      // stored pages of family cf
	scanNs  time.Duration // wall time of the scans
	scanCPU time.Duration // CPU time of the scans
	scans   int
	encCPU  time.Duration
	decCPU  time.Duration
}

// scanAll reads every entry of the file through a cache much smaller than
// the file, so every page is read from the store, verified and (if
// compressed) decompressed, as a scan of data not in memory is.
func scanAll(b *testing.B, r *Reader) int64 {
	it := r.NewIterator(nil, true)
	defer it.Close()
	var n int64
	for it.First(); it.Valid(); it.Next() {
		n += int64(len(it.Entry().Value))
	}
	if err := it.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkCompression compares none, snappy and zstd side by side on
// 1000-byte values, each half repeated text and half random: the file
// bytes each stores relative to none, the scan throughput (MB of values
// per second, from the store through a small block cache), and the CPU per
// MB of raw page bytes to compress and to decompress (checksum included,
// into reused buffers). Each iteration runs every codec, in a rotating
// order, so load on the machine falls on all three alike; each scan's
// time includes collecting its garbage.
//
//	go test ./storage/tablet/tsfile/ -run '^$' -bench BenchmarkCompression -benchtime 20x
func BenchmarkCompression(b *testing.B) {
	const rows, valueLen = 16000, 1000
	rng := rand.New(rand.NewSource(1))
	entries := mixedEntries(rng, rows, valueLen, "cf")
	ms := memstore.New()
	ms.Apply(entries)
	mgr, _, err := blockstore.Open(blockstore.Options{Dirs: []string{b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	var files []*codecFile
	for _, c := range []Compression{CompressionNone, CompressionSnappy, CompressionZstd} {
		info, err := Write(b.Context(), mgr, ms.NewIterator(), WriterOptions{TabletID: "bench", Compression: func(string) Compression { return c }})
		if err != nil {
			b.Fatal(err)
		}
		cache := blockcache.New(blockcache.Options{Capacity: 1 << 20})
		r, err := Open(mgr, info.FooterRef(), ReaderOptions{Cache: cache})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		m := r.meta("cf")
		idx, err := r.index(m)
		if err != nil {
			b.Fatal(err)
		}
		blk, err := r.readBlock(m.data, m.dataSize)
		if err != nil {
			b.Fatal(err)
		}
		f := &codecFile{c: c, info: info, r: r}
		for _, p := range idx {
			f.pages = append(f.pages, blk[p.off:p.off+p.length])
		}
		files = append(files, f)
	}
	// The raw page bodies, from the uncompressed file.
	var bodies [][]byte
	var rawBytes int64
	for _, pg := range files[0].pages {
		body, err := decodePage(0, 0, pg)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
		rawBytes += int64(len(body))
	}
	dst := make([]byte, MaxPageBytes/64) // reused: the figure is the codec's, not the allocator's
	for _, body := range bodies {
		if len(body) > len(dst) {
			b.Fatalf("page of %d bytes", len(body))
		}
	}
	var valueBytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range files {
			f := files[(i+k)%len(files)] // each codec takes each place in turn
			// Each scan starts on a collected heap and pays for collecting
			// its own garbage, not for the scan before it.
			runtime.GC()
			start, cpu := time.Now(), cpuTime()
			valueBytes = scanAll(b, f.r)
			runtime.GC()
			f.scanNs += time.Since(start)
			f.scanCPU += cpuTime() - cpu
			f.scans++

			c0 := cpuTime()
			var scratch, out []byte
			for _, body := range bodies {
				if out, scratch, err = encodePage(out[:0], scratch, body, f.c); err != nil {
					b.Fatal(err)
				}
			}
			c1 := cpuTime()
			for _, pg := range f.pages {
				sp, err := verifyPage(0, 0, pg)
				if err == nil {
					_, err = sp.inflate(dst[:0:sp.raw])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			f.encCPU += c1 - c0
			f.decCPU += cpuTime() - c1
		}
	}
	b.StopTimer()
	const mb = 1 << 20
	per := func(f *codecFile, d time.Duration) float64 {
		return float64(f.scans) * float64(valueBytes) / d.Seconds() / mb
	}
	baseWall, baseCPU := per(files[0], files[0].scanNs), per(files[0], files[0].scanCPU)
	b.Logf("%d rows of %d-byte values (half repeated text, half random); %.1f MB of values, %.1f MB of raw pages; %d iterations",
		rows, valueLen, float64(valueBytes)/mb, float64(rawBytes)/mb, b.N)
	b.Logf("%-7s %10s %8s | %9s %8s | %12s %8s | %13s %15s", "codec", "file bytes", "vs none", "scan MB/s", "vs none",
		"MB/CPU-second", "vs none", "compress ms/MB", "decompress ms/MB")
	for _, f := range files {
		wall, cpu := per(f, f.scanNs), per(f, f.scanCPU)
		ratio := float64(f.info.Size) / float64(files[0].info.Size)
		enc := f.encCPU.Seconds() * 1000 / float64(f.scans) / (float64(rawBytes) / mb)
		dec := f.decCPU.Seconds() * 1000 / float64(f.scans) / (float64(rawBytes) / mb)
		b.Logf("%-7s %10d %7.3fx | %9.0f %+7.1f%% | %12.0f %+7.1f%% | %14.2f %16.2f", f.c, f.info.Size, ratio,
			wall, 100*(wall/baseWall-1), cpu, 100*(cpu/baseCPU-1), enc, dec)
		b.ReportMetric(ratio, f.c.String()+"-size-ratio")
		b.ReportMetric(wall, f.c.String()+"-scan-MB/s")
		b.ReportMetric(cpu, f.c.String()+"-scan-MB/CPU-s")
		b.ReportMetric(enc, f.c.String()+"-compress-CPU-ms/MB")
		b.ReportMetric(dec, f.c.String()+"-decompress-CPU-ms/MB")
	}
}
