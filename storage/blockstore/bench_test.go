package blockstore

import (
	"sync/atomic"
	"testing"

	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
)

// BenchmarkCommit commits 1000 blocks of 64 KiB per iteration, in one
// creation transaction vs closed one by one, on the real filesystem, and
// reports blocks/s and fsyncs (file syncs + directory syncs) per block.
func BenchmarkCommit(b *testing.B) {
	const nBlocks, size = 1000, 64 << 10
	data := payload(1, size)
	for _, kind := range managerKinds {
		for _, mode := range []string{"transaction", "one-by-one"} {
			b.Run(kind+"/"+mode, func(b *testing.B) {
				syncs := errorfs.NewCounter(errorfs.Kinds(errorfs.OpSync, errorfs.OpSyncDir))
				m, _, err := Open(Options{Kind: kind, Dirs: []string{b.TempDir()}, FS: errorfs.Wrap(vfs.Default, syncs), Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				start := syncs.Count()
				b.SetBytes(nBlocks * size)
				b.ResetTimer()
				for range b.N {
					tx := m.NewCreationTransaction()
					for range nBlocks {
						w, err := m.CreateBlock(CreateBlockOptions{TabletID: "bench"})
						if err != nil {
							b.Fatal(err)
						}
						if err := w.Append(data); err != nil {
							b.Fatal(err)
						}
						if mode == "transaction" {
							w.Finalize()
							tx.AddCreatedBlock(w)
						} else if err := w.Close(); err != nil {
							b.Fatal(err)
						}
					}
					if mode == "transaction" {
						if err := tx.CommitCreatedBlocks(); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				total := float64(b.N * nBlocks)
				b.ReportMetric(total/b.Elapsed().Seconds(), "blocks/s")
				b.ReportMetric(float64(syncs.Count()-start)/total, "fsyncs/block")
			})
		}
	}
}

// BenchmarkReadV reads committed 64 KiB blocks with ReadV (2 buffers each)
// from 4 goroutines; MB/s is the page-cache read rate.
func BenchmarkReadV(b *testing.B) {
	const nBlocks, size = 256, 64 << 10
	for _, kind := range managerKinds {
		b.Run(kind, func(b *testing.B) {
			m, _, err := Open(Options{Kind: kind, Dirs: []string{b.TempDir()}, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			tx := m.NewCreationTransaction()
			var ids []BlockID
			for i := range nBlocks {
				w, _ := m.CreateBlock(CreateBlockOptions{})
				w.Append(payload(BlockID(i), size))
				w.Finalize()
				tx.AddCreatedBlock(w)
				ids = append(ids, w.ID())
			}
			if err := tx.CommitCreatedBlocks(); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.SetBytes(size)
			b.SetParallelism(2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				h, t := make([]byte, 4096), make([]byte, size-4096)
				for pb.Next() {
					id := ids[next.Add(1)%nBlocks]
					r, err := m.OpenBlock(id)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.ReadV(0, h, t); err != nil {
						b.Fatal(err)
					}
					r.Close()
				}
			})
		})
	}
}
