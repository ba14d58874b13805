package blockstore

import (
	"fmt"
	"math/rand/v2"
	"path"
	"sync"
	"testing"

	"bighive/storage/vfs/errorfs"
)

// BenchmarkStartup opens a store of 1 000 full containers holding 200 000
// blocks, 20% of them deleted, read-only (no repair), before and after the
// metadata compaction that repair performs (CompactLiveRatio 0.85 makes
// these 80%-live containers eligible).
//
//	go test -run '^$' -bench BenchmarkStartup -benchtime 10x ./storage/blockstore
func BenchmarkStartup(b *testing.B) {
	const containers, perContainer, deleted = 1000, 200, 40
	dir := b.TempDir()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := w; c < containers; c += 4 {
				ids := make([]BlockID, perContainer)
				sizes := make([]int, perContainer)
				for j := range ids {
					ids[j] = BlockID(c*perContainer + j + 1)
					sizes[j] = 1000 + j
				}
				writeSyntheticContainer(b, dir, ids, sizes, ids[:deleted], true)
			}
		}()
	}
	wg.Wait()
	opts := Options{Dirs: []string{dir}, MaxBlocksPerContainer: perContainer, Logger: quietLogger()}
	fm, _, err := OpenFs(Options{Dirs: []string{dir}, Logger: quietLogger()}) // format: instance files
	if err != nil {
		b.Fatal(err)
	}
	fm.Close()
	open := func(b *testing.B) {
		ro := opts
		ro.ReadOnly = true
		for b.Loop() {
			m, rep, err := Open(ro)
			if err != nil {
				b.Fatal(err)
			}
			if rep.LiveBlocks != containers*(perContainer-deleted) {
				b.Fatalf("%d live blocks", rep.LiveBlocks)
			}
			m.Close()
		}
	}
	b.Run("before_compaction", open)
	rw := opts
	rw.CompactLiveRatio = 0.85
	m, rep, err := Open(rw)
	if err != nil {
		b.Fatal(err)
	}
	m.Close()
	if n := len(rep.Of(LowLiveContainer)); n != containers {
		b.Fatalf("%d containers compacted", n)
	}
	b.Run("after_compaction", open)
}

// BenchmarkPlacement creates groups of 3 for 1 000 tablets over 8
// directories and reports the most and fewest tablets per directory, for
// the power of two choices and, as a baseline, plain random choice.
//
//	go test -run '^$' -bench BenchmarkPlacement ./storage/blockstore
func BenchmarkPlacement(b *testing.B) {
	const tablets, ndirs = 1000, 8
	b.Run("two_choices", func(b *testing.B) {
		var lo, hi int
		for i := 0; b.Loop(); i++ {
			var dirs []string
			for d := range ndirs {
				dirs = append(dirs, path.Join("/", fmt.Sprint(d)))
			}
			fm, _, err := OpenFs(Options{Dirs: dirs, FS: errorfs.NewCrashableMem(), Logger: quietLogger(), PlacementSeed: uint64(i + 1)})
			if err != nil {
				b.Fatal(err)
			}
			for t := range tablets {
				if _, err := fm.CreateDataDirGroup(fmt.Sprint(t)); err != nil {
					b.Fatal(err)
				}
			}
			lo, hi = tablets, 0
			for _, d := range dirs {
				n := len(fm.TabletsInDir(fm.DirUUID(d)))
				lo, hi = min(lo, n), max(hi, n)
			}
			fm.Close()
		}
		b.ReportMetric(float64(hi), "max/dir")
		b.ReportMetric(float64(lo), "min/dir")
	})
	b.Run("random", func(b *testing.B) {
		var lo, hi int
		for i := 0; b.Loop(); i++ {
			rng := rand.New(rand.NewPCG(uint64(i+1), 1))
			counts := make([]int, ndirs)
			for range tablets {
				for _, d := range rng.Perm(ndirs)[:3] {
					counts[d]++
				}
			}
			lo, hi = tablets, 0
			for _, n := range counts {
				lo, hi = min(lo, n), max(hi, n)
			}
		}
		b.ReportMetric(float64(hi), "max/dir")
		b.ReportMetric(float64(lo), "min/dir")
	})
}
