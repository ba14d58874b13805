package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
	"bighive/testkit/wait"
)

// BenchmarkWAL measures durable appends of 1000-byte values at 1, 16, 64
// and 256 appenders, next to two baselines on a pre-zeroed file in the
// same run: one writer doing write+fdatasync per record, and a bare
// group-commit loop (one flusher, no framing, no checksums) at the same
// concurrency. It also compares pre-zeroed with fallocated files and
// padded with unpadded flushes. Run:
//
//	go test -run '^$' -bench BenchmarkWAL -benchtime 2s ./storage/wal/
//
// and read the table it prints at the end.
func BenchmarkWAL(b *testing.B) {
	const valueSize = 1000
	// Files stay until the whole benchmark ends: deleting them in between
	// makes the filesystem discard their blocks (mounted with -o discard
	// here) while the next measurement syncs.
	benchRoot = b.TempDir()
	// The directory goes when this benchmark ends; later benchmarks make
	// their own (benchDir).
	b.Cleanup(func() { benchRoot = "" })
	results := map[string]benchResult{}
	run := func(name string, fn func(b *testing.B) benchResult) {
		b.Run(name, func(b *testing.B) {
			r := fn(b)
			b.ReportMetric(r.perSec, "appends/s")
			b.ReportMetric(float64(r.p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(r.p99.Microseconds()), "p99-µs")
			results[name] = r // the last (largest) run wins
		})
	}
	run("fdatasync-per-record/zeroed", func(b *testing.B) benchResult { return benchSyncPerRecord(b, valueSize, true) })
	run("fdatasync-per-record/fallocated", func(b *testing.B) benchResult { return benchSyncPerRecord(b, valueSize, false) })
	conc := []int{1, 16, 64, 256}
	for _, n := range conc {
		run(fmt.Sprintf("bare/zeroed/appenders=%d", n), func(b *testing.B) benchResult { return benchBare(b, n, valueSize, true, false) })
		run(fmt.Sprintf("wal/zeroed/appenders=%d", n), func(b *testing.B) benchResult { return benchLog(b, n, valueSize, PreallocZero) })
	}
	run("bare/zeroed-padded/appenders=64", func(b *testing.B) benchResult { return benchBare(b, 64, valueSize, true, true) })
	run("bare/fallocated/appenders=64", func(b *testing.B) benchResult { return benchBare(b, 64, valueSize, false, false) })
	run("wal/fallocated/appenders=64", func(b *testing.B) benchResult { return benchLog(b, 64, valueSize, PreallocFallocate) })

	var sb strings.Builder
	single := results["fdatasync-per-record/zeroed"]
	fmt.Fprintf(&sb, "\n| appenders | WAL appends/s | p50 | p99 | bare loop appends/s | WAL / bare | WAL / fdatasync-per-record (%.0f/s) |\n|---|---|---|---|---|---|---|\n", single.perSec)
	for _, n := range conc {
		w, bare := results[fmt.Sprintf("wal/zeroed/appenders=%d", n)], results[fmt.Sprintf("bare/zeroed/appenders=%d", n)]
		fmt.Fprintf(&sb, "| %d | %.0f | %v | %v | %.0f | %.2f | %.1f |\n", n, w.perSec, w.p50.Round(time.Microsecond),
			w.p99.Round(time.Microsecond), bare.perSec, w.perSec/bare.perSec, w.perSec/single.perSec)
	}
	fmt.Fprintf(&sb, "\nfiles at 64 appenders: WAL zeroed %.0f/s vs fallocated %.0f/s; bare zeroed %.0f/s vs fallocated %.0f/s vs zeroed+4KiB-padded %.0f/s; fdatasync-per-record zeroed %.0f/s vs fallocated %.0f/s\n",
		results["wal/zeroed/appenders=64"].perSec, results["wal/fallocated/appenders=64"].perSec,
		results["bare/zeroed/appenders=64"].perSec, results["bare/fallocated/appenders=64"].perSec,
		results["bare/zeroed-padded/appenders=64"].perSec, single.perSec, results["fdatasync-per-record/fallocated"].perSec)
	fmt.Println(sb.String()) // b.Log of a parent benchmark is not shown
}

type benchResult struct {
	perSec   float64
	p50, p99 time.Duration
}

// runAppenders runs b.N calls of op split over n goroutines and measures
// each call's latency.
func runAppenders(b *testing.B, n int, op func(w int) error) benchResult {
	var next atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			l := make([]time.Duration, 0, b.N/n+1)
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				if err := op(w); err != nil {
					failed.Store(err)
					return
				}
				l = append(l, time.Since(t))
			}
			lat[w] = l
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return benchResult{perSec: float64(b.N) / el.Seconds(), p50: all[len(all)/2], p99: all[len(all)*99/100]}
}

func benchLog(b *testing.B, n, valueSize int, mode Prealloc) benchResult {
	opts := Options{Root: benchDir(b), Prefix: testPrefix, Prealloc: mode}
	l, err := Open(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	waitPrepared(l)
	muts := make([]*mutation.RowMutation, n)
	for w := range muts {
		muts[w] = &mutation.RowMutation{Row: fmt.Appendf(nil, "row-%08d", w), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 1, Value: make([]byte, valueSize)}}}
	}
	ctx := context.Background()
	r := runAppenders(b, n, func(w int) error {
		_, err := l.Append(ctx, "tablet-0001", muts[w])
		return err
	})
	st := l.Stats()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Batches), "records/batch")
		b.ReportMetric(float64(st.SyncTime.Microseconds())/float64(st.Syncs), "sync-µs")
	}
	return r
}

// waitPrepared waits until the background preparer holds the next file, so
// that the first timed seconds do not compete with its zeroing.
func waitPrepared(l *Log) {
	if l.opts.Prealloc == PreallocNone {
		return
	}
	_ = wait.Until(context.Background(), func() error {
		if len(l.prep.ready) == 0 {
			return errors.New("no file prepared")
		}
		return nil
	})
}

// benchFile makes a file of size bytes, written with zeros (zeroed) or
// fallocated, and synced.
func benchFile(b *testing.B, size int64, zeroed bool) vfs.File {
	b.Helper()
	f, err := vfs.Default.Create(filepath.Join(benchDir(b), "bench.dat"))
	if err != nil {
		b.Fatal(err)
	}
	if zeroed {
		zero := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(zero)) {
			if _, err := f.WriteAt(zero, off); err != nil {
				b.Fatal(err)
			}
		}
	} else if err := f.Preallocate(0, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

func benchSyncPerRecord(b *testing.B, valueSize int, zeroed bool) benchResult {
	f := benchFile(b, int64(b.N+1)*int64(valueSize)+1<<20, zeroed)
	rec := make([]byte, valueSize)
	var off int64
	return runAppenders(b, 1, func(int) error {
		if _, err := f.WriteAt(rec, off); err != nil {
			return err
		}
		off += int64(len(rec))
		return f.Datasync()
	})
}

// benchBare is the bare group-commit loop: appenders copy their record into
// a shared buffer; one flusher swaps it, writes it and fdatasyncs; the
// batch's appenders are released. No framing, no checksums, no files.
func benchBare(b *testing.B, n, valueSize int, zeroed, pad bool) benchResult {
	size := int64(b.N+1)*int64(valueSize) + 1<<20
	if pad {
		size += int64(b.N+1) * 4096
	}
	f := benchFile(b, size, zeroed)
	type group struct {
		done chan struct{}
		err  error
	}
	var mu sync.Mutex
	buf := make([]byte, 0, 1<<20)
	cur := &group{done: make(chan struct{})}
	kick := make(chan struct{}, 1)
	stop := make(chan struct{})
	flushed := make(chan struct{})
	var syncs int
	var syncTime time.Duration
	go func() {
		defer close(flushed)
		var spare []byte
		var off int64
		defer func() {
			b.ReportMetric(float64(b.N)/float64(syncs), "records/batch")
			b.ReportMetric(float64(syncTime.Microseconds())/float64(syncs), "sync-µs")
		}()
		for {
			mu.Lock()
			if len(buf) == 0 {
				mu.Unlock()
				select {
				case <-kick:
					continue
				case <-stop:
					return
				}
			}
			g := cur
			out := buf
			buf, cur = spare[:0], &group{done: make(chan struct{})}
			mu.Unlock()
			if pad && len(out)%4096 != 0 {
				out = append(out, make([]byte, 4096-len(out)%4096)...)
			}
			_, g.err = f.WriteAt(out, off)
			off += int64(len(out))
			if g.err == nil {
				t := time.Now()
				g.err = f.Datasync()
				syncTime += time.Since(t)
				syncs++
			}
			close(g.done)
			spare = out
		}
	}()
	rec := make([]byte, valueSize)
	r := runAppenders(b, n, func(int) error {
		mu.Lock()
		first := len(buf) == 0
		buf = append(buf, rec...)
		g := cur
		mu.Unlock()
		if first {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
		<-g.done
		return g.err
	})
	close(stop)
	<-flushed
	return r
}

var benchRoot string

func benchDir(b *testing.B) string {
	b.Helper()
	if benchRoot == "" {
		return b.TempDir()
	}
	d, err := os.MkdirTemp(benchRoot, "run")
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkRecycle compares durable appends with and without recycling of
// retired files, side by side: 64 appenders, 1000-byte values, files
// pre-zeroed in the background, and a collector that, like the
// checkpoint's log GC, deletes every file but the last two as the log
// rolls. With recycling the deleted files become the next ones instead of
// new files being zeroed. Two cases: "full", 4 MiB files that roll when
// full (several times a second; the zeroing per byte logged is that of
// 64 MiB files), and "rolled", 64 MiB files rolled every 2 MiB logged, as
// checkpoints roll a tserver's log long before its file is full (each
// roll then zeroes a whole new file). Each iteration count runs both
// settings, b.N appends each, in alternating order, so that one result
// line holds a pair measured under the same load. It reports each
// one's rate and the CPU time of the whole process per append (getrusage
// user+sys, and sys alone), which includes the background preparation.
// Run:
//
//	go test -run '^$' -bench BenchmarkRecycle -benchtime 3s -count 3 ./storage/wal/
func BenchmarkRecycle(b *testing.B) {
	b.Run("full", func(b *testing.B) { benchRecycle(b, 4<<20, 0) })
	b.Run("rolled", func(b *testing.B) { benchRecycle(b, 64<<20, 2<<20) })
}

func benchRecycle(b *testing.B, fileSize int64, rollEvery uint64) {
	type result struct {
		perSec, cpu, sys float64
		files, recycled  uint64
	}
	run := func(recycle int) result {
		b.StartTimer() // runAppenders resets it and stops it at the end
		opts := Options{Root: benchDir(b), Prefix: testPrefix, FileSize: fileSize, RecycleFiles: recycle}
		l, err := Open(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		waitPrepared(l)
		stop := make(chan struct{})
		gcDone := make(chan struct{})
		go func() {
			defer close(gcDone)
			positions := []Position{l.Position()}
			var rolledAt uint64
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if bytes := l.Stats().Bytes; rollEvery > 0 && bytes-rolledAt >= rollEvery {
					rolledAt = bytes
					if _, err := l.Roll(); err != nil {
						b.Error(err)
						return
					}
				}
				if p := l.Position(); p != positions[len(positions)-1] {
					positions = append(positions, p)
					if _, err := l.DeleteBefore(positions[len(positions)-2]); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
		const n = 64
		muts := make([]*mutation.RowMutation, n)
		for w := range muts {
			muts[w] = &mutation.RowMutation{Row: fmt.Appendf(nil, "row-%08d", w), Ops: []mutation.Op{
				{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 1, Value: make([]byte, 1000)}}}
		}
		ctx := context.Background()
		u0, s0 := rusage(b)
		r := runAppenders(b, n, func(w int) error {
			_, err := l.Append(ctx, "tablet-0001", muts[w])
			return err
		})
		u1, s1 := rusage(b)
		close(stop)
		<-gcDone
		st := l.Stats()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		return result{perSec: r.perSec, cpu: float64((u1-u0)+(s1-s0)) / 1e3 / float64(b.N),
			sys: float64(s1-s0) / 1e3 / float64(b.N), files: st.Files, recycled: st.Recycled}
	}
	var off, on result
	if benchRecycleTurn++; benchRecycleTurn%2 == 0 { // alternate which goes first
		off, on = run(-1), run(DefaultRecycleFiles)
	} else {
		on, off = run(DefaultRecycleFiles), run(-1)
	}
	b.ReportMetric(off.perSec, "off-appends/s")
	b.ReportMetric(on.perSec, "on-appends/s")
	b.ReportMetric(off.cpu, "off-cpu-µs/append")
	b.ReportMetric(on.cpu, "on-cpu-µs/append")
	b.ReportMetric(off.sys, "off-sys-µs/append")
	b.ReportMetric(on.sys, "on-sys-µs/append")
	b.ReportMetric(float64(on.files), "on-files")
	b.ReportMetric(float64(on.recycled), "on-recycled")
}

var benchRecycleTurn int

// rusage returns the user and system CPU time of the process in ns.
func rusage(b *testing.B) (user, sys int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano(), ru.Stime.Nano()
}

// BenchmarkPrepareZeroed measures what recycling saves: the CPU time of the
// whole process to prepare one new pre-zeroed 64 MiB file (write zeros,
// start write-out, fdatasync), and that cost per 1066-byte record (a
// 1000-byte value with framing) that the file then holds. Run:
//
//	go test -run '^$' -bench BenchmarkPrepareZeroed -count 3 ./storage/wal/
func BenchmarkPrepareZeroed(b *testing.B) {
	const size = 64 << 20
	p := newPreparer(vfs.Default, benchDir(b), size, PreallocZero, 0, nil)
	u0, s0 := rusage(b)
	for i := 0; i < b.N; i++ {
		pf, err := p.prepare(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		pf.f.Close()
		os.Remove(pf.f.Name())
	}
	u1, s1 := rusage(b)
	perFile := float64((u1-u0)+(s1-s0)) / 1e6 / float64(b.N)
	b.ReportMetric(perFile, "cpu-ms/file")
	b.ReportMetric(float64(s1-s0)/1e6/float64(b.N), "sys-ms/file")
	b.ReportMetric(perFile*1e3/(size/1066), "cpu-µs/record")
}
