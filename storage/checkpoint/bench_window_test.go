package checkpoint_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// BenchmarkScaleCheckpointWindow: a single-node tserver (real WAL, block
// store and local metadata on disk, the tserver's write path) with many
// small tablets; each round writes one row to every tablet and runs one
// checkpoint over all of them. It reports the lock window (the exclusive
// state lock, steps 2-5) over the rounds and the whole checkpoint's time
// (issue 21; docs/scale.md, 'A tserver with 10 000 tablets'):
//
//	go test ./storage/checkpoint -run XXX -bench ScaleCheckpointWindow -benchtime 1x
func BenchmarkScaleCheckpointWindow(b *testing.B) {
	for _, tablets := range []int{500, 10000} {
		b.Run(fmt.Sprintf("tablets=%d", tablets), func(b *testing.B) { benchWindow(b, tablets) })
	}
}

func benchWindow(b *testing.B, tablets int) {
	const rounds = 3
	dir := b.TempDir()
	cfg := nodeConfig{fs: vfs.Default, root: dir, metaPath: filepath.Join(dir, "meta.db"), tablets: tablets, logFileSize: 64 << 20,
		opts: checkpoint.Options{MemLimit: 1 << 40, FlushParallelism: 4}}
	ctx := context.Background()
	n, err := openNode(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer n.close()
	b.ResetTimer()
	var took []time.Duration
	for r := range rounds * b.N {
		for i := range tablets {
			m := &mutation.RowMutation{Row: fmt.Appendf(nil, "row%d", r),
				Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: int64(r + 1), Value: []byte("v")}}}
			if err := n.write(ctx, tabletID(i), m); err != nil {
				b.Fatal(err)
			}
		}
		began := time.Now()
		res, err := n.coord.Checkpoint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(began))
		if res.Swapped != tablets {
			b.Fatalf("round %d swapped %d tablets, want %d", r, res.Swapped, tablets)
		}
	}
	b.StopTimer()
	p50, p99, mx := n.coord.LockWindows()
	b.ReportMetric(float64(p99.Microseconds()), "lock-p99-µs")
	b.Logf("tablets=%d, %d checkpoints of one row per tablet: lock window p50 %v p99 %v max %v; whole checkpoint p50 %v max %v",
		tablets, len(took), p50, p99, mx, median(took), maxOf(took))
}

func median(s []time.Duration) time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return checkpoint.Quantile(c, 0.5)
}

func maxOf(s []time.Duration) time.Duration { return slices.Max(s) }
