package blockstore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"

	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
)

const crashDir = "/store"

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func crashOptions(kind string, fsys vfs.FS) Options {
	return Options{Kind: kind, Dirs: []string{crashDir}, FS: fsys, PreallocateStep: 64 << 10,
		MaxContainerSize: 96 << 10, PreFlush: PreFlushNever, Logger: quietLogger()}
}

// outcome is what a workload saw returned.
type outcome struct {
	committed map[BlockID]int // id → length, commit returned nil
	inflight  map[BlockID]int // commit called, did not return nil: may or may not survive
	deleted   map[BlockID]bool
}

// closePipelineWorkload commits blocks in transactions and one by one,
// fills a container, deletes blocks (making a container dead) and closes.
// It stops at the first error, as a crashed process would.
func closePipelineWorkload(kind string, fsys vfs.FS) outcome {
	out := outcome{committed: map[BlockID]int{}, inflight: map[BlockID]int{}, deleted: map[BlockID]bool{}}
	m, _, err := Open(crashOptions(kind, fsys))
	if err != nil {
		return out
	}
	defer m.Close()
	sizes := [][]int{{5000, 30000}, {20000}, {40000, 100, 0}, {33000}, {7000}}
	var ids []BlockID
	for _, tx := range sizes {
		var bs []WritableBlock
		t := m.NewCreationTransaction()
		for _, n := range tx {
			b, err := m.CreateBlock(CreateBlockOptions{TabletID: "t"})
			if err != nil {
				return out
			}
			if err := b.Append(payload(b.ID(), n)); err != nil {
				return out
			}
			if len(tx) == 1 { // one by one
				out.inflight[b.ID()] = n
				if err := b.Close(); err != nil {
					return out
				}
				out.committed[b.ID()] = n
				ids = append(ids, b.ID())
				continue
			}
			b.Finalize()
			t.AddCreatedBlock(b)
			bs = append(bs, b)
			out.inflight[b.ID()] = n
		}
		if len(tx) == 1 {
			continue
		}
		if err := t.CommitCreatedBlocks(); err != nil {
			return out
		}
		for i, b := range bs {
			out.committed[b.ID()] = tx[i]
			ids = append(ids, b.ID())
		}
	}
	// Delete the blocks of the first (full) container and one more.
	dt := m.NewDeletionTransaction()
	for _, id := range []BlockID{ids[0], ids[1], ids[2], ids[5]} {
		dt.AddDeletedBlock(id)
	}
	del, _ := dt.CommitDeletedBlocks()
	for _, id := range del {
		out.deleted[id] = true
	}
	waitIdle(m)
	if err := m.Close(); err != nil {
		return out
	}
	return out
}

func waitIdle(m Manager) {
	if lm, ok := asLog(m); ok {
		lm.waitBackground()
	}
}

// verifyAfterCrash opens the crashed filesystem twice: the first open must
// show exactly the committed blocks (deleted ones may reappear, intact) and
// repair; the second must find nothing left to repair.
func verifyAfterCrash(t *testing.T, kind string, fsys vfs.FS, out outcome) {
	t.Helper()
	m, rep, err := Open(crashOptions(kind, fsys))
	if err != nil {
		if errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("reopen: %v", err)
		}
		t.Fatalf("reopen: %v\n%v", err, rep)
	}
	ids, _ := m.AllBlockIDs()
	present := map[BlockID]bool{}
	for _, id := range ids {
		present[id] = true
		n, ok := out.committed[id]
		if !ok {
			if n, ok = out.inflight[id]; !ok {
				t.Errorf("block %s visible but never committed", id)
				continue
			}
		}
		got := readAllBlock(t, m, id)
		if len(got) != n || crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(payload(id, n)) {
			t.Errorf("block %s: %d bytes, not its committed contents", id, len(got))
		}
	}
	for id := range out.committed {
		if !out.deleted[id] && !present[id] {
			t.Errorf("committed block %s missing", id)
		}
	}
	m.Close()
	m2, rep2, err := Open(crashOptions(kind, fsys))
	if err != nil {
		t.Fatalf("second reopen: %v\n%v", err, rep2)
	}
	defer m2.Close()
	for _, k := range []FindingKind{PartialRecord, IncompleteContainer, DeadContainer, TempFile} {
		if n := rep2.Count(k); n > 0 {
			t.Errorf("after repair still %d %s findings; first report:\n%v\nsecond:\n%v", n, k, rep, rep2)
		}
	}
	for _, f := range rep.Findings {
		if !f.Kind.Fatal() && f.Kind != MisalignedBlock && f.Kind != LowLiveContainer && f.Kind != FullContainerSpace && !f.Repaired {
			t.Errorf("finding not repaired: %v", f)
		}
	}
	ids2, _ := m2.AllBlockIDs()
	if len(ids2) != len(ids) {
		t.Errorf("second open has %d blocks, first %d", len(ids2), len(ids))
	}
}

// TestCrashPoints crashes the close pipeline and delete path at every
// mutating filesystem operation and checks recovery.
func TestCrashPoints(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		probe := errorfs.NewCounter(errorfs.Mutating())
		out := closePipelineWorkload(kind, errorfs.Wrap(errorfs.NewCrashableMem(), probe))
		if len(out.committed) != 8 || len(out.deleted) != 4 {
			t.Fatalf("dry run: committed %d, deleted %d", len(out.committed), len(out.deleted))
		}
		n := probe.Count()
		t.Logf("%d crash points", n)
		for i := range n + 1 {
			mem := errorfs.NewCrashableMem()
			var crashed *errorfs.MemFS
			c := errorfs.CrashAt(i, errorfs.Mutating(), mem, &crashed)
			out := closePipelineWorkload(kind, errorfs.Wrap(mem, c))
			op, ok := c.Crashed()
			if !ok {
				crashed = mem.CrashClone() // crash after the last operation
			}
			t.Run(fmt.Sprintf("op%03d", i), func(t *testing.T) {
				if ok {
					t.Logf("crash before %v", op)
				}
				verifyAfterCrash(t, kind, crashed, out)
			})
		}
	})
}

// repairBase builds a durable store that needs every kind of repair: a
// dead container, a low-live full container, a torn metadata tail, an
// incomplete container and a temp file. It returns the filesystem and the
// blocks that must survive.
func repairBase(t *testing.T) (*errorfs.MemFS, map[BlockID]int) {
	t.Helper()
	mem := errorfs.NewCrashableMem()
	// Removing files fails during the set-up, so the dead container stays
	// on disk for start-up to find.
	noRemove := errorfs.NewToggle(errorfs.Kinds(errorfs.OpRemove))
	opts := crashOptions(KindLog, errorfs.Wrap(mem, noRemove))
	m := mustOpenT(t, opts)
	live := map[BlockID]int{}
	var all []BlockID
	var torn string
	for c := range 3 {
		tx := m.NewCreationTransaction()
		for i := range 5 {
			b, _ := m.CreateBlock(CreateBlockOptions{})
			n := 20000 + 100*i
			if err := b.Append(payload(b.ID(), n)); err != nil {
				t.Fatal(err)
			}
			b.Finalize()
			tx.AddCreatedBlock(b)
			all = append(all, b.ID())
			live[b.ID()] = n
		}
		if err := tx.CommitCreatedBlocks(); err != nil {
			t.Fatal(err)
		}
		_ = c
	}
	// Container 0: all deleted (dead); container 1: 4 of 5 deleted (low live).
	noRemove.Set(true)
	dt := m.NewDeletionTransaction()
	for _, id := range all[:9] {
		dt.AddDeletedBlock(id)
		delete(live, id)
	}
	if _, err := dt.CommitDeletedBlocks(); err != nil {
		t.Fatal(err)
	}
	lm, _ := asLog(m)
	lm.waitBackground()
	noRemove.Set(false)
	b, _ := lm.blocks.remove(all[14])
	lm.blocks.insert(all[14], b)
	torn = b.c.metaPath()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Torn tail: half a record.
	f, _ := mem.OpenFile(torn, 2, 0)
	st, _ := f.Stat()
	rec := appendRecord(nil, deleteRecord(all[14]))
	f.WriteAt(rec[:len(rec)-3], st.Size())
	f.Sync()
	f.Close()
	// Incomplete container and a temp file.
	for _, name := range []string{"/store/0123456789abcdef0123456789abcdef.data", "/store/x.metadata" + vfs.TempSuffix} {
		g, _ := mem.Create(name)
		g.Write([]byte("junk"))
		g.Sync()
		g.Close()
	}
	mem.SyncDir(crashDir)
	return mem.CrashClone(), live
}

func mustOpenT(t *testing.T, opts Options) Manager {
	t.Helper()
	m, _ := mustOpen(t, opts)
	return m
}

// TestRepairCrashPoints crashes start-up repair at every mutating operation.
func TestRepairCrashPoints(t *testing.T) {
	base, live := repairBase(t)
	// The reference run: every kind of finding, all repaired.
	ref := base.CrashClone()
	m, rep := mustOpen(t, crashOptions(KindLog, ref))
	for _, k := range []FindingKind{DeadContainer, LowLiveContainer, PartialRecord, IncompleteContainer, TempFile} {
		fs := rep.Of(k)
		if len(fs) == 0 || !fs[0].Repaired {
			t.Errorf("report lacks a repaired %s finding:\n%v", k, rep)
		}
	}
	want := map[BlockID]uint32{}
	for id, n := range live {
		want[id] = crc32.ChecksumIEEE(payload(id, n))
	}
	checkExactly(t, m, want)
	m.Close()
	t.Logf("report:\n%v", rep)

	probe := errorfs.NewCounter(errorfs.Mutating())
	if m, _, err := Open(crashOptions(KindLog, errorfs.Wrap(base.CrashClone(), probe))); err == nil {
		m.Close()
	}
	n := probe.Count()
	t.Logf("%d crash points", n)
	for i := range n {
		mem := base.CrashClone()
		var crashed *errorfs.MemFS
		c := errorfs.CrashAt(i, errorfs.Mutating(), mem, &crashed)
		if m, _, err := Open(crashOptions(KindLog, errorfs.Wrap(mem, c))); err == nil {
			m.Close()
		}
		if crashed == nil {
			crashed = mem.CrashClone()
		}
		t.Run(fmt.Sprintf("op%03d", i), func(t *testing.T) {
			m, rep, err := Open(crashOptions(KindLog, crashed))
			if err != nil {
				t.Fatalf("reopen: %v\n%v", err, rep)
			}
			checkExactly(t, m, want)
			m.Close()
			m2, rep2, err := Open(crashOptions(KindLog, crashed))
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close()
			checkExactly(t, m2, want)
			for _, k := range []FindingKind{PartialRecord, IncompleteContainer, DeadContainer, TempFile, LowLiveContainer} {
				if rep2.Count(k) > 0 {
					t.Errorf("still %s after repair:\n%v", k, rep2)
				}
			}
		})
	}
}
