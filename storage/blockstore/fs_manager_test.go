package blockstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
)

func mustFs(t *testing.T, opts Options) *FsManager {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	fm, rep, err := OpenFs(opts)
	if err != nil {
		t.Fatalf("OpenFs: %v\n%v", err, rep)
	}
	return fm
}

func dirUUIDOf(t *testing.T, dir string) string {
	t.Helper()
	di, err := readDirInstance(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return di.GetDirSet().GetUuid()
}

func TestInstanceFilesNewFileSystem(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := t.TempDir()
		dirs := []string{filepath.Join(base, "a"), filepath.Join(base, "b", "nested")}
		fm := mustFs(t, Options{Kind: kind, Dirs: dirs})
		uuid := fm.UUID()
		if !validUUID(uuid) {
			t.Fatalf("uuid %q", uuid)
		}
		fm.Close()
		var dirUUIDs []string
		for _, d := range dirs {
			inst, err := readInstance(vfs.Default, d)
			if err != nil || inst.GetUuid() != uuid || inst.GetFormatTimeUs() == 0 {
				t.Fatalf("instance of %s: %v %v", d, inst, err)
			}
			di, err := readDirInstance(vfs.Default, d)
			if err != nil || di.GetDirType() != kind || di.GetFilesystemBlockSizeBytes() == 0 {
				t.Fatalf("dir instance of %s: %v %v", d, di, err)
			}
			dirUUIDs = append(dirUUIDs, di.GetDirSet().GetUuid())
			if len(di.GetDirSet().GetAllUuids()) != 2 {
				t.Errorf("%s: all_uuids %v", d, di.GetDirSet().GetAllUuids())
			}
		}
		if dirUUIDs[0] == dirUUIDs[1] {
			t.Error("two dirs share a uuid")
		}
		// Reopen: same identities; a symlinked and repeated root is one root.
		link := filepath.Join(base, "link")
		if err := os.Symlink(dirs[0], link); err != nil {
			t.Fatal(err)
		}
		fm = mustFs(t, Options{Kind: kind, Dirs: []string{link, dirs[1], dirs[0] + "/"}})
		defer fm.Close()
		if fm.UUID() != uuid || len(fm.DataDirs()) != 2 || fm.DataDirs()[0] != dirs[0] {
			t.Errorf("reopen: uuid %s dirs %v", fm.UUID(), fm.DataDirs())
		}
		if fm.DirUUID(dirs[1]) != dirUUIDs[1] {
			t.Errorf("dir uuid changed")
		}
	})
}

func TestUUIDMismatchRefused(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mustFs(t, Options{Dirs: []string{a}}).Close()
	mustFs(t, Options{Dirs: []string{b}}).Close()
	ia, _ := readInstance(vfs.Default, a)
	ib, _ := readInstance(vfs.Default, b)
	_, _, err := OpenFs(Options{Dirs: []string{a, b}, Logger: quietLogger()})
	if !errors.Is(err, ErrUUIDMismatch) {
		t.Fatalf("err %v", err)
	}
	for _, s := range []string{a, b, ia.GetUuid(), ib.GetUuid()} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

func TestNewRootGetsExistingUUID(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	fm := mustFs(t, Options{Dirs: []string{a}})
	uuid := fm.UUID()
	w := writeBlock(t, fm, payload(1, 5000))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fm.Close()
	fm = mustFs(t, Options{Dirs: []string{a, b}})
	if fm.UUID() != uuid {
		t.Fatalf("uuid %s, want %s", fm.UUID(), uuid)
	}
	if got := readAllBlock(t, fm, w.ID()); len(got) != 5000 {
		t.Fatal("block lost")
	}
	fm.Close()
	if ib, err := readInstance(vfs.Default, b); err != nil || ib.GetUuid() != uuid {
		t.Fatalf("new root: %v %v", ib, err)
	}
	// The old dir learnt the new dir's UUID.
	da, _ := readDirInstance(vfs.Default, a)
	if ub := dirUUIDOf(t, b); len(da.GetDirSet().GetAllUuids()) != 2 || da.GetDirSet().GetAllUuids()[1] != ub {
		t.Errorf("all_uuids of %s: %v", a, da.GetDirSet().GetAllUuids())
	}
	// A new root that is not empty is refused.
	c := t.TempDir()
	os.WriteFile(filepath.Join(c, "stranger"), []byte("x"), 0o644)
	if _, _, err := OpenFs(Options{Dirs: []string{a, b, c}, Logger: quietLogger()}); !errors.Is(err, ErrRootNotEmpty) {
		t.Fatalf("non-empty new root: %v", err)
	}
}

func TestOpenRollsBack(t *testing.T) {
	base := t.TempDir()
	a := filepath.Join(base, "a")
	mustFs(t, Options{Dirs: []string{a}}).Close()
	before, _ := os.ReadFile(filepath.Join(a, dirInstanceFile))
	// A container whose metadata is garbage after the header: fatal at replay.
	bad := filepath.Join(a, newUUID())
	os.WriteFile(bad+dataSuffix, nil, 0o644)
	os.WriteFile(bad+metaSuffix, append(encodeMetaHeader(), make([]byte, 40)...), 0o644)
	newRoot := filepath.Join(base, "new", "deep", "b")
	_, rep, err := OpenFs(Options{Dirs: []string{a, newRoot}, Logger: quietLogger()})
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v\n%v", err, rep)
	}
	if _, err := os.Stat(filepath.Join(base, "new")); !os.IsNotExist(err) {
		t.Errorf("created directories left behind: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(a, dirInstanceFile))
	if string(before) != string(after) {
		t.Error("existing dir instance file changed by a failed open")
	}
	// And a brand new file system whose open fails leaves nothing.
	fresh := filepath.Join(base, "fresh")
	inj := errorfs.Always(errorfs.And(errorfs.Kinds(errorfs.OpReadDir), errorfs.PathMatch(fresh)))
	if _, _, err := OpenFs(Options{Dirs: []string{fresh}, FS: errorfs.Wrap(vfs.Default, inj), Logger: quietLogger()}); err == nil {
		t.Fatal("open succeeded")
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("fresh root left behind: %v", err)
	}
}

func TestDirKindMismatch(t *testing.T) {
	d := t.TempDir()
	mustFs(t, Options{Kind: KindFile, Dirs: []string{d}}).Close()
	_, _, err := OpenFs(Options{Kind: KindLog, Dirs: []string{d}, Logger: quietLogger()})
	if !errors.Is(err, ErrKindMismatch) || !strings.Contains(err.Error(), `"file"`) {
		t.Fatalf("err %v", err)
	}
}

func TestCorruptInstanceFile(t *testing.T) {
	d := t.TempDir()
	mustFs(t, Options{Dirs: []string{d}}).Close()
	p := filepath.Join(d, instanceFile)
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 0xff
	os.WriteFile(p, b, 0o644)
	_, _, err := OpenFs(Options{Dirs: []string{d}, Logger: quietLogger()})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != p {
		t.Fatalf("err %v", err)
	}
}

func TestLockContention(t *testing.T) {
	d := t.TempDir()
	fm := mustFs(t, Options{Dirs: []string{d}})
	_, _, err := OpenFs(Options{Dirs: []string{d}, Logger: quietLogger()})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second read-write open: %v", err)
	}
	// Read-only opens are allowed beside the owner.
	ro := mustFs(t, Options{Dirs: []string{d}, ReadOnly: true})
	if ro.UUID() != fm.UUID() {
		t.Error("read-only open sees another uuid")
	}
	ro.Close()
	fm.Close()
	// Released by Close.
	mustFs(t, Options{Dirs: []string{d}}).Close()
}

func TestTempFilesRemovedOnReadWriteOpen(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		d, meta := t.TempDir(), t.TempDir()
		mustFs(t, Options{Kind: kind, Dirs: []string{d}, MetadataDir: meta}).Close()
		tmps := []string{filepath.Join(d, instanceFile+vfs.TempSuffix), filepath.Join(d, "x"+vfs.TempSuffix),
			filepath.Join(meta, instanceFile+vfs.TempSuffix)}
		for _, p := range tmps {
			os.WriteFile(p, []byte("junk"), 0o644)
		}
		mustFs(t, Options{Kind: kind, Dirs: []string{d}, MetadataDir: meta, ReadOnly: true}).Close()
		for _, p := range tmps {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("read-only open removed %s", p)
			}
		}
		fm := mustFs(t, Options{Kind: kind, Dirs: []string{d}, MetadataDir: meta})
		if fm.MetadataRoot() != meta {
			t.Errorf("metadata root %s", fm.MetadataRoot())
		}
		fm.Close()
		for _, p := range tmps {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s survived a read-write open", p)
			}
		}
	})
}

func TestReadOnlyUnformatted(t *testing.T) {
	if _, _, err := OpenFs(Options{Dirs: []string{t.TempDir()}, ReadOnly: true, Logger: quietLogger()}); !errors.Is(err, ErrNotFormatted) {
		t.Fatalf("err %v", err)
	}
}

// slowFS delays every container metadata open, so that Open runs long
// enough to watch its progress.
type slowFS struct {
	vfs.FS
	delay time.Duration
}

func (s slowFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, metaSuffix) {
		time.Sleep(s.delay)
	}
	return s.FS.OpenFile(name, flag, perm)
}

func TestProgressFromAnotherGoroutine(t *testing.T) {
	d := t.TempDir()
	fm := mustFs(t, Options{Dirs: []string{d}, MaxBlocksPerContainer: 1, PreallocateStep: -1})
	tx := fm.NewCreationTransaction()
	for i := range 40 {
		b, err := fm.CreateBlock(CreateBlockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Append(payload(BlockID(i), 100))
		tx.AddCreatedBlock(b)
	}
	if err := tx.CommitCreatedBlocks(); err != nil {
		t.Fatal(err)
	}
	fm.Close()
	var p Progress
	var seen []int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !p.Done() {
			seen = append(seen, p.ContainersProcessed())
			time.Sleep(time.Millisecond)
		}
	}()
	fm = mustFs(t, Options{Dirs: []string{d}, FS: slowFS{vfs.Default, 2 * time.Millisecond}, Progress: &p, OpenWorkersPerDir: 2})
	wg.Wait()
	fm.Close()
	if p.ContainersTotal() != 40 || p.ContainersProcessed() != 40 || p.StartupTime() <= 0 {
		t.Fatalf("progress %d/%d in %v", p.ContainersProcessed(), p.ContainersTotal(), p.StartupTime())
	}
	mid := false
	for _, n := range seen {
		if n > 0 && n < 40 {
			mid = true
		}
	}
	if !mid {
		t.Errorf("no intermediate progress seen: %v", seen)
	}
}

// fakeSpace is a settable Options.FreeSpace.
type fakeSpace struct {
	mu    sync.Mutex
	avail map[string]int64
}

func (f *fakeSpace) set(dir string, avail int64) {
	f.mu.Lock()
	f.avail[dir] = avail
	f.mu.Unlock()
}

func (f *fakeSpace) get(dir string) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.avail[dir]
	if !ok {
		a = 1 << 40
	}
	return a, 1 << 41, nil
}

func TestPowerOfTwoChoicesPlacement(t *testing.T) {
	base := t.TempDir()
	var dirs []string
	for i := range 8 {
		dirs = append(dirs, filepath.Join(base, fmt.Sprint(i)))
	}
	const seed = 42
	t.Logf("placement seed %d", seed)
	fm := mustFs(t, Options{Dirs: dirs, PlacementSeed: seed})
	defer fm.Close()
	for i := range 1000 {
		g, err := fm.CreateDataDirGroup(fmt.Sprintf("t%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(g.GetDirUuids()); n != 3 {
			t.Fatalf("group of %d dirs", n)
		}
	}
	lo, hi := 1<<30, 0
	for _, d := range dirs {
		n := len(fm.TabletsInDir(fm.DirUUID(d)))
		lo, hi = min(lo, n), max(hi, n)
	}
	// 3000 memberships over 8 dirs: 375 each. Two choices keep it tight;
	// purely random placement spreads ±40 or more.
	if hi-lo > 12 || lo < 360 {
		t.Errorf("tablets per dir: min %d max %d", lo, hi)
	}
	// Idempotent; blocks land in the group.
	g1, _ := fm.CreateDataDirGroup("t0001")
	g2, _ := fm.DataDirGroup("t0001")
	if strings.Join(g1.GetDirUuids(), ",") != strings.Join(g2.GetDirUuids(), ",") {
		t.Error("group changed")
	}
	lm := mustLog(fm)
	for range 20 {
		b := writeBlock(t, fm, payload(3, 10))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b2, err := fm.CreateBlock(CreateBlockOptions{TabletID: "t0001"})
		if err != nil {
			t.Fatal(err)
		}
		b2.Append([]byte("x"))
		if err := b2.Close(); err != nil {
			t.Fatal(err)
		}
		var d *dataDir
		lm.blocks.get(b2.ID(), func(lb *logBlock) { d = lb.c.dir })
		if !strings.Contains(strings.Join(g1.GetDirUuids(), ","), d.uuid) {
			t.Fatalf("block of t0001 in %s, outside its group", d.path)
		}
	}
	// A tablet without a group gets one on first use.
	if _, err := fm.CreateBlock(CreateBlockOptions{TabletID: "new"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := fm.DataDirGroup("new"); !ok {
		t.Error("no group created on first use")
	}
}

func TestLoadDataDirGroupOnReopen(t *testing.T) {
	base := t.TempDir()
	dirs := []string{filepath.Join(base, "0"), filepath.Join(base, "1"), filepath.Join(base, "2"), filepath.Join(base, "3")}
	fm := mustFs(t, Options{Dirs: dirs, TargetDirsPerTablet: 2})
	g, _ := fm.CreateDataDirGroup("tab")
	fm.Close()
	fm = mustFs(t, Options{Dirs: dirs, TargetDirsPerTablet: 2})
	defer fm.Close()
	if err := fm.LoadDataDirGroup("tab", &storagepb.FsDataDirGroup{DirUuids: g.GetDirUuids()}); err != nil {
		t.Fatal(err)
	}
	got, _ := fm.DataDirGroup("tab")
	if strings.Join(got.GetDirUuids(), ",") != strings.Join(g.GetDirUuids(), ",") {
		t.Errorf("loaded %v, stored %v", got.GetDirUuids(), g.GetDirUuids())
	}
	if err := fm.LoadDataDirGroup("x", &storagepb.FsDataDirGroup{DirUuids: []string{newUUID()}}); !errors.Is(err, ErrUnknownDir) {
		t.Errorf("unknown uuid: %v", err)
	}
}

func TestFullDirsExtendGroup(t *testing.T) {
	base := t.TempDir()
	var dirs []string
	for i := range 4 {
		dirs = append(dirs, filepath.Join(base, fmt.Sprint(i)))
	}
	space := &fakeSpace{avail: map[string]int64{}}
	fm := mustFs(t, Options{Dirs: dirs, TargetDirsPerTablet: 2, FreeSpace: space.get,
		FreeSpaceRefresh: time.Nanosecond, ReservedBytes: 1 << 20})
	defer fm.Close()
	g, _ := fm.CreateDataDirGroup("tab")
	for _, u := range g.GetDirUuids() {
		space.set(fm.byUUID[u].path, 1000) // below the reserve
	}
	b, err := fm.CreateBlock(CreateBlockOptions{TabletID: "tab"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abort()
	g2, _ := fm.DataDirGroup("tab")
	if len(g2.GetDirUuids()) != 3 {
		t.Fatalf("group not extended: %v", g2.GetDirUuids())
	}
	added := fm.byUUID[g2.GetDirUuids()[2]]
	if lw := b.(*logWritable); lw.c.dir != added {
		t.Errorf("block went to %s, not the added %s", lw.c.dir.path, added.path)
	}
	// Everything full: no space.
	for _, d := range dirs {
		space.set(d, 0)
	}
	if _, err := fm.CreateBlock(CreateBlockOptions{TabletID: "tab"}); !errors.Is(err, ErrNoSpace) {
		t.Errorf("all full: %v", err)
	}
	// The cached figure is kept for FreeSpaceRefresh.
	var calls atomic.Int64
	fm2 := mustFs(t, Options{Dirs: []string{t.TempDir()}, FreeSpace: func(string) (int64, int64, error) {
		calls.Add(1)
		return 1 << 30, 1 << 31, nil
	}})
	defer fm2.Close()
	for range 10 {
		w, err := fm2.CreateBlock(CreateBlockOptions{TabletID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		w.Abort()
	}
	if calls.Load() != 1 {
		t.Errorf("free space asked %d times in 10 s", calls.Load())
	}
}
