package blockstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
)

// eioUnder fails every operation under one of the armed directories with
// EIO, as a dying disk does.
type eioUnder struct {
	mu   sync.Mutex
	dirs []string
}

func (e *eioUnder) fail(dir string) { e.mu.Lock(); e.dirs = append(e.dirs, dir); e.mu.Unlock() }

func (e *eioUnder) MaybeError(op errorfs.Op) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.dirs {
		if op.Path == d || strings.HasPrefix(op.Path, d+"/") {
			return syscall.EIO
		}
	}
	return nil
}

func TestDiskFailureIsolation(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := t.TempDir()
		dirs := []string{filepath.Join(base, "d0"), filepath.Join(base, "d1"), filepath.Join(base, "d2")}
		inj := &eioUnder{}
		var mu sync.Mutex
		reported := map[string][]string{}
		opts := Options{Kind: kind, Dirs: dirs, FS: errorfs.Wrap(vfs.Default, inj), TargetDirsPerTablet: 1,
			PreallocateStep: 64 << 10, Logger: quietLogger(), PlacementSeed: 7,
			OnTabletsFailed: func(uuid, dir string, tablets []string) {
				mu.Lock()
				reported[uuid] = tablets
				mu.Unlock()
			}}
		fm := mustFs(t, opts)
		const tablets = 12
		groups := map[string]*storagepb.FsDataDirGroup{}
		for i := range tablets {
			id := fmt.Sprintf("tab%02d", i)
			g, err := fm.CreateDataDirGroup(id)
			if err != nil {
				t.Fatal(err)
			}
			groups[id] = g
		}
		failUUID := fm.DirUUID(dirs[1])
		affected := fm.TabletsInDir(failUUID)
		if len(affected) == 0 || len(affected) == tablets {
			t.Fatalf("%d of %d tablets in the failing dir", len(affected), tablets)
		}
		// Writers per tablet; the disk fails halfway.
		var written sync.Map // BlockID → tablet
		var failedOnce atomic.Bool
		var wg sync.WaitGroup
		for i := range tablets {
			id := fmt.Sprintf("tab%02d", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range 30 {
					if n == 15 && i == 0 {
						inj.fail(dirs[1])
						failedOnce.Store(true)
					}
					b, err := fm.CreateBlock(CreateBlockOptions{TabletID: id})
					if err != nil {
						if !slices.Contains(affected, id) {
							t.Errorf("tablet %s in a healthy dir: create: %v", id, err)
						}
						continue
					}
					b.Append(payload(BlockID(n), 3000))
					if err := b.Close(); err != nil {
						if !slices.Contains(affected, id) {
							t.Errorf("tablet %s in a healthy dir: close: %v", id, err)
						}
						continue
					}
					written.Store(b.ID(), id)
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		got := reported[failUUID]
		mu.Unlock()
		if !slices.Equal(got, affected) {
			t.Fatalf("reported tablets %v, want %v", got, affected)
		}
		if fd := fm.FailedDirs(); len(fd) != 1 || fd[0] != dirs[1] {
			t.Fatalf("failed dirs %v", fd)
		}
		// Healthy tablets read back; the failed dir's blocks fail cleanly.
		healthy := 0
		written.Range(func(k, v any) bool {
			id, tab := k.(BlockID), v.(string)
			r, err := fm.OpenBlock(id)
			if slices.Contains(affected, tab) {
				if err == nil {
					r.Close()
				} else if !errors.Is(err, ErrDirFailed) {
					t.Errorf("block of affected tablet: %v", err)
				}
				return true
			}
			healthy++
			if err != nil {
				t.Errorf("block %s of healthy tablet %s: %v", id, tab, err)
				return true
			}
			r.Close()
			return true
		})
		if healthy < (tablets-len(affected))*30 {
			t.Errorf("only %d blocks of healthy tablets written", healthy)
		}
		if _, err := fm.CreateBlock(CreateBlockOptions{TabletID: affected[0]}); !errors.Is(err, ErrDirFailed) {
			t.Errorf("create in an all-failed group: %v", err)
		}
		fm.Close()

		// Reopen with the disk still dead: it is skipped.
		fm = mustFs(t, opts)
		if fd := fm.FailedDirs(); len(fd) != 1 || fd[0] != dirs[1] {
			t.Errorf("failed dirs at open %v", fd)
		}
		for id, g := range groups {
			err := fm.LoadDataDirGroup(id, g)
			if slices.Contains(affected, id) != errors.Is(err, ErrDirFailed) {
				t.Errorf("load group of %s: %v", id, err)
			}
		}
		n := 0
		written.Range(func(k, v any) bool {
			if !slices.Contains(affected, v.(string)) {
				if got := readAllBlock(t, fm, k.(BlockID)); len(got) != 3000 {
					t.Errorf("block %v lost", k)
				}
				n++
			}
			return true
		})
		w := writeBlock(t, fm, payload(99, 10))
		if err := w.Close(); err != nil {
			t.Fatalf("write after reopen: %v", err)
		}
		fm.Close()
		// Every disk dead: Open fails.
		inj.fail(dirs[0])
		inj.fail(dirs[2])
		if _, _, err := OpenFs(opts); !errors.Is(err, ErrAllDirsFailed) {
			t.Fatalf("all failed: %v", err)
		}
	})
}
