package checkpoint_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/vfs"
	"bighive/testkit/wait"
)

// The sizes of the storage-efficiency targets: small in CI, full size by
// flag (docs/performance.md, "Storage efficiency").
var (
	overwriteRows = flag.Int("space.overwrite-rows", 400, "rows TestOverwriteSpace writes 10 times (1000-byte values)")
	deleteMB      = flag.Int("space.delete-mb", 8, "MB of 1000-byte values TestDeleteSpace writes and then deletes")
	starveFor     = flag.Duration("space.starve", 0, "duration of each side of TestCompactionStarvation (0: skip it)")
)

// spaceNode opens a node of one tablet on the real disk with opts.
func spaceNode(t testing.TB, opts checkpoint.Options) *node {
	t.Helper()
	dir := t.TempDir()
	n, err := openNode(context.Background(), nodeConfig{fs: vfs.Default, root: dir, metaPath: filepath.Join(dir, "meta.db"),
		tablets: 1, logFileSize: 16 << 20, opts: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.close)
	return n
}

// putValues writes rows [0, rows) of family fam, 1000 random bytes each, by
// 16 writers through the real write path (WAL group commit).
func putValues(t testing.TB, n *node, rows int, fam string, rng *rand.Rand, del bool) {
	t.Helper()
	ctx := context.Background()
	values := make([][]byte, rows)
	for i := range values {
		values[i] = make([]byte, 1000)
		rng.Read(values[i])
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < rows; i += 16 {
				op := mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: values[i]}
				if del {
					op = mutation.Op{Kind: mutation.DeleteRow}
				}
				if err := n.coord.Throttle(ctx); err != nil {
					errs <- err
					return
				}
				if err := n.write(ctx, tabletID(0), &mutation.RowMutation{Row: fmt.Appendf(nil, "row%08d", i), Ops: []mutation.Op{op}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func fileBytes(files []tsfile.Info) int64 {
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return n
}

// settle waits until Run has nothing left to compact under the default
// policy (at most 6 files, a garbage share of at most 0.2 or a single
// file) and has compacted nothing for 50 intervals.
func settle(t testing.TB, n *node) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last, quiet := n.coord.Stats().Compactions, 0
	due := func() bool {
		tb := n.byID[tabletID(0)]
		share, err := tb.GarbageShare()
		if err != nil {
			t.Fatal(err)
		}
		files := len(tb.Files())
		return files > 6 || files > 1 && share > 0.2
	}
	for quiet < 50 || due() {
		if time.Now().After(deadline) {
			t.Fatal("compactions did not settle within 60 s")
		}
		time.Sleep(5 * time.Millisecond)
		if c := n.coord.Stats().Compactions; c != last {
			last, quiet = c, 0
		} else {
			quiet++
		}
	}
}

// TestOverwriteSpace (target "Overwrites"): a family of MaxVersions 1,
// each row written 10 times with a checkpoint after each pass, the
// default compaction policy running: once its compactions settle, the
// tablet's file bytes are at most 1.3× those of one version. It prints
// the write amplification (bytes flushed and compacted over bytes
// flushed) and the read amplification (files per read) it saw.
func TestOverwriteSpace(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	n := spaceNode(t, checkpoint.Options{MemLimit: 64 << 20, CompactionRate: -1, Interval: 5 * time.Millisecond})
	n.run()
	ctx := context.Background()
	var one int64
	maxFiles := 0
	for pass := range 10 {
		putValues(t, n, *overwriteRows, "one", rng, false)
		if _, err := n.coord.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		files := n.byID[tabletID(0)].Files()
		maxFiles = max(maxFiles, len(files))
		if pass == 0 {
			one = fileBytes(files)
		}
	}
	settle(t, n)
	files := n.byID[tabletID(0)].Files()
	got := fileBytes(files)
	st := n.coord.Stats()
	ratio := float64(got) / float64(one)
	wa := float64(st.FlushedBytes+st.CompactedBytes) / float64(st.FlushedBytes)
	t.Logf("overwrites: %d rows × 10 passes of 1000 B: one version %d B, settled %d B in %d files = %.3f× one version; "+
		"write amplification %.2f (flushed %d B, compacted %d B; %d compactions, %d major, %d for garbage); files per read ≤ %d during the run",
		*overwriteRows, one, got, len(files), ratio, wa, st.FlushedBytes, st.CompactedBytes, st.Compactions, st.MajorCompacts, st.GarbageMajors, maxFiles)
	if ratio > 1.3 {
		t.Fatalf("settled file bytes %.3f× one version's, want ≤ 1.3×", ratio)
	}
	for i := 0; i < *overwriteRows; i += max(1, *overwriteRows/50) {
		if got, err := readRow(n.byID[tabletID(0)], fmt.Appendf(nil, "row%08d", i)); err != nil || len(got) != 1 {
			t.Fatalf("row %d after the compactions: %v %v", i, got, err)
		}
	}
}

// allocatedBytes is the bytes the file system allocated (st_blocks) to
// the files under dir.
func allocatedBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		n += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeleteSpace (target "Deletes"): after writing -space.delete-mb MB
// and deleting every row, a requested major compaction (what `bighive
// compact --major` asks for) leaves file bytes < 1 % of before, and once
// the deleted blocks' holes are punched the block store's live bytes and
// its allocated disk space are < 5 % of before.
func TestDeleteSpace(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	// Only the requested compaction runs: no trigger may compact first.
	n := spaceNode(t, checkpoint.Options{MemLimit: 16 << 20, MaxTSFiles: -1, MajorEvery: -1, GarbageShare: -1})
	n.run()
	ctx := context.Background()
	rows := *deleteMB * 1000
	putValues(t, n, rows, "f", rng, false)
	if _, err := n.coord.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	tb := n.byID[tabletID(0)]
	stats := n.mgr.(interface{ Stats() blockstore.Stats })
	blocksDir := filepath.Join(n.cfg.root, "blocks")
	filesBefore, liveBefore, allocBefore := fileBytes(tb.Files()), stats.Stats().LiveBytes, allocatedBytes(t, blocksDir)
	putValues(t, n, rows, "f", rng, true)
	if _, err := n.coord.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.coord.Compact(ctx, tb, true); err != nil {
		t.Fatal(err)
	}
	filesAfter := fileBytes(tb.Files())
	// Hole punching runs in the background of the block store.
	var liveAfter, allocAfter int64
	punched, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = wait.Until(punched, func() error { // checked below
		if liveAfter, allocAfter = stats.Stats().LiveBytes, allocatedBytes(t, blocksDir); allocAfter*20 >= allocBefore {
			return errors.New("not punched yet")
		}
		return nil
	})
	t.Logf("deletes: %d rows of 1000 B: file bytes %d → %d (%.3f %%), block store live bytes %d → %d (%.3f %%), allocated %d → %d (%.3f %%)",
		rows, filesBefore, filesAfter, 100*float64(filesAfter)/float64(filesBefore),
		liveBefore, liveAfter, 100*float64(liveAfter)/float64(liveBefore), allocBefore, allocAfter, 100*float64(allocAfter)/float64(allocBefore))
	if filesAfter*100 >= filesBefore {
		t.Fatalf("file bytes %d after compact --major, want < 1 %% of %d", filesAfter, filesBefore)
	}
	if liveAfter*20 >= liveBefore || allocAfter*20 >= allocBefore {
		t.Fatalf("block store live bytes %d → %d, allocated %d → %d; want both < 5 %%", liveBefore, liveAfter, allocBefore, allocAfter)
	}
	for i := 0; i < rows; i += max(1, rows/50) {
		if got, err := readRow(tb, fmt.Appendf(nil, "row%08d", i)); err != nil || len(got) != 0 {
			t.Fatalf("deleted row %d: %v %v", i, got, err)
		}
	}
}

// TestCompactionStarvation (target "No starvation"; runs only with
// -space.starve D): 64 writers overwrite random rows of 4 tablets (a
// family of MaxVersions 1, 1000-byte values, 100 000 rows) for D with
// the default compaction policy, backlog rule included, then for D on a
// fresh node with every compaction off. Writers call Throttle and
// SlowWrite, as the tserver's write path does. It prints, for each side,
// the throughput, the longest hard-limit stall (Stats.MaxThrottle), the
// most files a tablet had during the run and at the end, the major and
// backlog-mode compactions, the write amplification and the write
// slowdown, then the ratio; it fails if the ratio is below 0.8 or a
// stall reached 1 s.
func TestCompactionStarvation(t *testing.T) {
	if *starveFor <= 0 {
		t.Skip("run with -space.starve D")
	}
	const (
		writers = 64
		tablets = 4
		keys    = 100_000
	)
	side := func(name string, opts checkpoint.Options) (float64, time.Duration) {
		dir := t.TempDir()
		opts.MemLimit = 16 << 20
		n, err := openNode(context.Background(), nodeConfig{fs: vfs.Default, root: dir, metaPath: filepath.Join(dir, "meta.db"),
			tablets: tablets, logFileSize: 64 << 20, opts: opts})
		if err != nil {
			t.Fatal(err)
		}
		defer n.close()
		n.run()
		ctx, cancel := context.WithTimeout(context.Background(), *starveFor)
		defer cancel()
		var wg sync.WaitGroup
		counts := make([]int64, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(w)))
				value := make([]byte, 1000)
				for ctx.Err() == nil {
					rng.Read(value[:500]) // half random, half repeated
					k := rng.Intn(keys)
					m := &mutation.RowMutation{Row: fmt.Appendf(nil, "row%08d", k),
						Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "one", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: value}}}
					id := tabletID(k % tablets)
					if n.coord.SlowWrite(ctx, id) != nil || n.coord.Throttle(ctx) != nil {
						return
					}
					if err := n.write(ctx, id, m); err != nil {
						if ctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					counts[w]++
				}
			}()
		}
		wg.Wait()
		var total int64
		for _, c := range counts {
			total += c
		}
		st := n.coord.Stats()
		files := 0
		for _, tb := range n.tabs {
			files = max(files, len(tb.Files()))
		}
		wa := float64(st.FlushedBytes+st.CompactedBytes) / float64(max(1, st.FlushedBytes))
		t.Logf("%s: %d writes in %v = %.0f writes/s; checkpoints %d, compactions %d (%d major, %d for garbage, %d in backlog mode); "+
			"write amplification %.2f; longest hard-limit stall %v; files per tablet at most %d during the run, %d at the end; "+
			"writes slowed %d, %v in all, longest %v",
			name, total, *starveFor, float64(total)/starveFor.Seconds(), st.Checkpoints, st.Compactions, st.MajorCompacts, st.GarbageMajors,
			st.BacklogCompactions, wa, st.MaxThrottle, st.MaxFiles, files, st.SlowedWrites, st.SlowdownTime.Round(time.Millisecond), st.MaxSlowdown)
		return float64(total) / starveFor.Seconds(), st.MaxThrottle
	}
	on, stallOn := side("compaction on", checkpoint.Options{})
	off, stallOff := side("compaction off", checkpoint.Options{MaxTSFiles: -1, MajorEvery: -1, GarbageShare: -1})
	t.Logf("throughput with compaction / without: %.3f; longest stall %v with, %v without", on/off, stallOn, stallOff)
	if on < 0.8*off || stallOn >= time.Second {
		t.Fatalf("with compaction %.0f writes/s (%.2f× of %.0f), longest stall %v; want ≥ 0.8× and < 1 s", on, on/off, off, stallOn)
	}
}
