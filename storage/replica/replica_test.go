package replica_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
	"bighive/storage/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rig is one served tablet over real storage: a WAL and a block store
// in a temporary directory, behind an errorfs seam whose injector the
// test sets.
type rig struct {
	fs    vfs.FS
	root  string
	log   *wal.Log
	mgr   blockstore.Manager
	coord *checkpoint.Coordinator
	tb    *tablet.Tablet
	rep   *replica.Replica
	start wal.Position
	// failed receives what Options.LogFailed is called with.
	failed chan error
}

func newRig(t *testing.T, inj errorfs.Injector) *rig {
	t.Helper()
	ctx := context.Background()
	g := &rig{fs: errorfs.Wrap(vfs.Default, inj), root: t.TempDir(), failed: make(chan error, 16)}
	mgr, _, err := blockstore.Open(blockstore.Options{Dirs: []string{filepath.Join(g.root, "blocks")}, FS: g.fs,
		PreallocateStep: 1 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	g.mgr = mgr
	g.log, err = wal.Open(ctx, wal.Options{FS: g.fs, Root: g.root, Prefix: wal.FormatPrefix("127.0.0.1:7070"),
		FileSize: 1 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.log.Close() })
	g.start = g.log.Position()
	tb, err := tablet.Open(tablet.Options{ID: "t1", Schema: tablet.Schema{Families: map[string]tablet.FamilyPolicy{"cf": {}}},
		Store: mgr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	g.tb = tb
	g.coord = checkpoint.New(checkpoint.Options{Log: g.log, Meta: nil, Logger: quiet,
		Tablets: func() []checkpoint.Tablet { return []checkpoint.Tablet{g.rep} }})
	g.rep = g.replica(replica.Options{LogFailed: func(err error) { g.failed <- err }})
	t.Cleanup(func() { g.rep.Close() })
	return g
}

// replica returns a serving replica of the rig's tablet: o with the
// rig's tablet, its log and coordinator unless o names others, id t1 of
// table tbl at epoch 1.
func (g *rig) replica(o replica.Options) *replica.Replica {
	o.ID, o.Table, o.Epoch, o.Tablet, o.Admit, o.Server = "t1", "tbl", 1, g.tb, g.coord, "test"
	if o.Log == nil {
		o.Log = g.log
	}
	r := replica.New(o)
	r.Serve()
	return r
}

func put(row, value string) *mutation.RowMutation {
	return &mutation.RowMutation{Row: []byte(row), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "cf",
		Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte(value)}}}
}

// visible reports whether row reads back with value.
func (g *rig) visible(t *testing.T, row, value string) bool {
	t.Helper()
	r, found, err := g.rep.Get(context.Background(), []byte(row), tablet.ReadOptions{MaxVersions: 1})
	if err != nil {
		t.Fatalf("get %s: %v", row, err)
	}
	return found && len(r.Cells) == 1 && string(r.Cells[0].Value) == value
}

// logged reports whether the log holds a record of row.
func (g *rig) logged(t *testing.T, row string) bool {
	t.Helper()
	found := false
	if _, err := wal.Replay(context.Background(), vfs.Default, g.root, g.start, func(rec *wal.Record) error {
		found = found || string(rec.Mutation.Row) == row
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return found
}

// holdOnce is an injector that, once armed, holds the first file operation
// of its kind on a path containing its part until release is closed;
// entered receives when it holds one. A sync is held only on a file that
// took an append (a write past offset 0): the log prepares its next files
// in the background, zero-filling them in pieces, each written and then
// sent to the disk with SyncRange, and closing with a sync, and those
// writes are not appends nor that sync the write's. So a file is filling
// from its first SyncRange until its next sync, and its writes then do
// not count.
type holdOnce struct {
	kind    errorfs.OpKind
	part    string
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}

	mu       sync.Mutex
	filling  map[string]bool
	appended map[string]bool
}

func newHoldOnce(kind errorfs.OpKind, part string) *holdOnce {
	return &holdOnce{kind: kind, part: part, entered: make(chan struct{}, 1), release: make(chan struct{}),
		filling: map[string]bool{}, appended: map[string]bool{}}
}

// track follows the file's preparation and appends, armed or not, and
// says whether op is the closing sync of a preparation.
func (h *holdOnce) track(op errorfs.Op) (preparation bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch op.Kind {
	case errorfs.OpSyncRange:
		h.filling[op.Path] = true
	case errorfs.OpWrite:
		if op.Off > 0 && !h.filling[op.Path] {
			h.appended[op.Path] = true
		}
	case errorfs.OpSync:
		preparation = h.filling[op.Path] || !h.appended[op.Path]
		delete(h.filling, op.Path)
	}
	return preparation
}

// MaybeError implements errorfs.Injector.
func (h *holdOnce) MaybeError(op errorfs.Op) error {
	if !strings.Contains(op.Path, h.part) {
		return nil
	}
	preparation := h.track(op)
	if !h.armed.Load() || op.Kind != h.kind || (op.Kind == errorfs.OpSync && preparation) {
		return nil
	}
	if h.armed.CompareAndSwap(true, false) {
		h.entered <- struct{}{}
		<-h.release
	}
	return nil
}

// TestCancelDuringAppendNeverLeavesLoggedButInvisible cancels the request
// context while the write's WAL fdatasync is in flight (held back by the
// errorfs seam): the write must come back either acknowledged and
// visible, or failed and not in the log, never logged but invisible until
// a replay.
func TestCancelDuringAppendNeverLeavesLoggedButInvisible(t *testing.T) {
	hold := newHoldOnce(errorfs.OpSync, "/wal/")
	g := newRig(t, hold)
	if err := g.rep.Write(context.Background(), put("a", "before")); err != nil {
		t.Fatal(err)
	}
	hold.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- g.rep.Write(ctx, put("b", "v")) }()
	<-hold.entered // the record is written, its fdatasync is in flight
	cancel()
	// Give a write that gives up on its context the chance to return
	// while the sync still hangs (the defect); the outcome, not the time,
	// is what is checked.
	var err error
	returned := false
	select {
	case err = <-res:
		returned = true
	case <-time.After(200 * time.Millisecond):
	}
	close(hold.release)
	if !returned {
		err = <-res
	}
	vis, inLog := g.visible(t, "b", "v"), g.logged(t, "b")
	t.Logf("write returned %v; visible %v, in the log %v", err, vis, inLog)
	switch {
	case err == nil && !vis:
		t.Fatal("an acknowledged write is not visible")
	case err != nil && inLog && !vis:
		t.Fatalf("write failed with %v, but its record is in the log and not applied: visible only after a replay", err)
	}
	if err := g.rep.Write(context.Background(), put("c", "after")); err != nil {
		t.Fatalf("a later write: %v", err)
	}
}

// TestFailedLogIsReported: an fdatasync error fails the log; the write
// fails with ErrLog wrapping wal.ErrFailed, is not applied, and the
// failure reaches Options.LogFailed (the tserver stops on it).
func TestFailedLogIsReported(t *testing.T) {
	tog := errorfs.NewToggle(errorfs.And(errorfs.Kinds(errorfs.OpSync), func(op errorfs.Op) bool { return strings.Contains(op.Path, "/wal/") }))
	eio := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if tog.MaybeError(op) != nil {
			return syscall.EIO
		}
		return nil
	})
	g := newRig(t, eio)
	if err := g.rep.Write(context.Background(), put("a", "ok")); err != nil {
		t.Fatal(err)
	}
	tog.Set(true)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = g.rep.Write(context.Background(), put("b", "x")) }()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, replica.ErrLog) || !errors.Is(err, wal.ErrFailed) || !errors.Is(err, syscall.EIO) {
			t.Errorf("write %d: %v, want ErrLog wrapping wal.ErrFailed and EIO", i, err)
		}
	}
	if g.visible(t, "b", "x") {
		t.Error("a failed write is visible")
	}
	select {
	case err := <-g.failed:
		if !errors.Is(err, wal.ErrFailed) {
			t.Errorf("LogFailed got %v, want wal.ErrFailed", err)
		}
	default:
		t.Error("LogFailed was not called")
	}
	if !g.visible(t, "a", "ok") {
		t.Error("the write before the failure is gone")
	}
}
