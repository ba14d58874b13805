package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// peakRSS is VmHWM of this process in bytes.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkSustainedWrites: 64 writers of 1000-byte values across the
// tablets, with Run checkpointing at MemLimit and compacting, on a real
// disk, for at least ten checkpoints. It reports throughput, write latency
// quantiles overall and for writes that started during a checkpoint, the
// lock window and the peak RSS. Run one size per process for an honest
// peak RSS: -bench 'SustainedWrites/tablets=64'.
func BenchmarkSustainedWrites(b *testing.B) {
	for _, tablets := range []int{64, 1000} {
		b.Run(fmt.Sprintf("tablets=%d", tablets), func(b *testing.B) { benchSustained(b, tablets) })
	}
}

func benchSustained(b *testing.B, tablets int) {
	const (
		writers  = 64
		memLimit = 64 << 20
		minCkpts = 10
	)
	dir := b.TempDir()
	var inCkpt atomic.Bool
	hook := func(step int) error {
		switch step {
		case 1:
			inCkpt.Store(true)
		case 7:
			inCkpt.Store(false)
		}
		return nil
	}
	cfg := nodeConfig{fs: vfs.Default, root: dir, metaPath: filepath.Join(dir, "meta.db"), tablets: tablets, logFileSize: 64 << 20,
		opts: checkpoint.WithHook(checkpoint.Options{MemLimit: memLimit, MaxTSFiles: 4, FlushParallelism: 4}, hook)}
	ctx := context.Background()
	n, err := openNode(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer n.close()
	n.run()
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	type sample struct {
		d    time.Duration
		ckpt bool
	}
	per := make([][]sample, writers)
	var next atomic.Int64
	total := int64(b.N)
	// Enough data for minCkpts checkpoints (an entry costs ~1.1 kB).
	if need := int64(minCkpts+1) * memLimit / 1100; total < need {
		total = need
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				m := &mutation.RowMutation{Row: fmt.Appendf(nil, "row%010d", i),
					Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: i, Value: value}}}
				id := tabletID(int(i) % tablets)
				t0 := time.Now()
				during := inCkpt.Load()
				if err := n.coord.Throttle(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := n.write(ctx, id, m); err != nil {
					b.Error(err)
					return
				}
				per[w] = append(per[w], sample{time.Since(t0), during || inCkpt.Load()})
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	var all, dur []time.Duration
	for _, s := range per {
		for _, x := range s {
			all = append(all, x.d)
			if x.ckpt {
				dur = append(dur, x.d)
			}
		}
	}
	slices.Sort(all)
	slices.Sort(dur)
	st := n.coord.Stats()
	p50, p99, mx := n.coord.LockWindows()
	w50, w99, wmx := n.coord.LockWaits()
	q := checkpoint.Quantile
	b.ReportMetric(float64(total)/el.Seconds(), "writes/s")
	b.ReportMetric(float64(q(all, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(p99.Microseconds()), "lock-p99-µs")
	b.ReportMetric(float64(peakRSS()>>20), "peakRSS-MiB")
	b.Logf("tablets=%d writes=%d in %v: %.0f writes/s, %.1f MB/s; latency p50 %v p99 %v p999 %v max %v; "+
		"during checkpoints (%d writes) p50 %v p99 %v p999 %v; checkpoints %d, compactions %d; "+
		"lock held p50 %v p99 %v max %v; lock wait p50 %v p99 %v max %v; peak RSS %d MiB (MemLimit %d MiB, HardLimit %d MiB)",
		tablets, total, el.Round(time.Millisecond), float64(total)/el.Seconds(), float64(total)*1000/el.Seconds()/1e6,
		q(all, 0.5), q(all, 0.99), q(all, 0.999), all[len(all)-1],
		len(dur), q(dur, 0.5), q(dur, 0.99), q(dur, 0.999),
		st.Checkpoints, st.Compactions, p50, p99, mx, w50, w99, wmx, peakRSS()>>20, memLimit>>20, 2*memLimit>>20)
	if st.Checkpoints < minCkpts {
		b.Errorf("only %d checkpoints", st.Checkpoints)
	}
}
