package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
)

// syncGate blocks the fdatasync of log files while armed, so a test can
// act while a group commit is in its sync.
type syncGate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when an armed sync starts
	release chan struct{} // closed to let it finish
}

func newSyncGate() *syncGate {
	return &syncGate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *syncGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *syncGate) MaybeError(op errorfs.Op) error {
	if op.Kind != errorfs.OpSync || !strings.HasSuffix(op.Path, logSuffix) {
		return nil
	}
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
	}
	return nil
}

// TestAppendContextEndsDuringSync: a record handed to the group commit is
// waited for whatever the context does. The context is cancelled while the
// record's batch is in its fdatasync; Append still returns the record's
// sequence number, and the record replays.
func TestAppendContextEndsDuringSync(t *testing.T) {
	root := t.TempDir()
	gate := newSyncGate()
	opts := testOptions(root)
	opts.FS = errorfs.Wrap(vfs.Default, gate)
	l := openLog(t, opts)
	appendN(t, l, 0, 3, 20)
	gate.arm()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		seq uint64
		err error
	}
	res := make(chan result, 1)
	go func() {
		seq, err := l.Append(ctx, tabletOf(3), testMutation(3, 20))
		res <- result{seq, err}
	}()
	<-gate.entered // the record's batch is in its fdatasync
	cancel()
	// Append must not return while the sync runs. This bounded wait can
	// only miss a regression on a stalled machine, never fail a correct
	// log.
	select {
	case r := <-res:
		t.Fatalf("Append returned (%d, %v) while its record's fdatasync still ran", r.seq, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate.release)
	r := <-res
	if r.err != nil || r.seq != 4 {
		t.Fatalf("Append after its context ended in the sync: (%d, %v), want (4, nil)", r.seq, r.err)
	}
	closeLog(t, l)
	recs, _ := replayAll(t, vfs.Default, root)
	if len(recs) != 4 {
		t.Fatalf("%d records replayed, want 4", len(recs))
	}
	checkRecord(t, &recs[3], 3, 20)
}

// TestAppendContextStopsOnlyBeforeQueueing: a context that is done before
// the record is queued (here: already when Append is called) stops it,
// and the record is never written.
func TestAppendContextStopsOnlyBeforeQueueing(t *testing.T) {
	root := t.TempDir()
	l := openLog(t, testOptions(root))
	appendN(t, l, 0, 2, 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, tabletOf(2), testMutation(2, 20)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: %v", err)
	}
	if seq := appendN(t, l, 3, 1, 20)[0]; seq != 3 {
		t.Fatalf("next seq %d, want 3 (the cancelled record took none)", seq)
	}
	closeLog(t, l)
	recs, _ := replayAll(t, vfs.Default, root)
	if len(recs) != 3 || recs[2].TabletID != tabletOf(3) {
		t.Fatalf("%d records replayed (%v)", len(recs), recs)
	}
}

// TestLogFailsOnIOError: ENOSPC on the first write of a new file (a roll)
// and EIO on an fdatasync both fail the log for good. The failing Append
// and every later one return an error wrapping ErrFailed and the cause,
// Failed is closed and Err reports the cause; the records acknowledged
// before replay after a reopen.
func TestLogFailsOnIOError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roll  bool // roll before the failing append
		kind  errorfs.OpKind
		cause error
	}{
		{"ENOSPC on a write at a roll", true, errorfs.OpWrite, syscall.ENOSPC},
		{"EIO on fdatasync", false, errorfs.OpSync, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			fail := errorfs.NewToggle(errorfs.And(errorfs.Kinds(tc.kind), errorfs.PathMatch("*"+logSuffix)))
			opts := testOptions(root)
			opts.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if fail.MaybeError(op) != nil {
					return tc.cause
				}
				return nil
			}))
			l := openLog(t, opts)
			acked := appendN(t, l, 0, 10, 40)
			select {
			case <-l.Failed():
				t.Fatal("Failed closed on a healthy log")
			default:
			}
			if err := l.Err(); err != nil {
				t.Fatalf("Err on a healthy log: %v", err)
			}
			if tc.roll {
				if _, err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
			fail.Set(true)
			_, err := l.Append(context.Background(), tabletOf(10), testMutation(10, 40))
			if !errors.Is(err, ErrFailed) || !errors.Is(err, tc.cause) {
				t.Fatalf("failing Append: %v, want ErrFailed and %v", err, tc.cause)
			}
			select {
			case <-l.Failed():
			default:
				t.Fatal("Failed not closed after the log failed")
			}
			if err := l.Err(); !errors.Is(err, ErrFailed) || !errors.Is(err, tc.cause) {
				t.Fatalf("Err: %v", err)
			}
			fail.Set(false) // sticky: the log stays failed with the fault gone
			for i := 11; i < 14; i++ {
				if _, err := l.Append(context.Background(), tabletOf(i), testMutation(i, 40)); !errors.Is(err, ErrFailed) || !errors.Is(err, tc.cause) {
					t.Fatalf("Append after the failure: %v", err)
				}
			}
			if _, err := l.Roll(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Roll after the failure: %v", err)
			}
			if err := l.Close(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Close of a failed log: %v", err)
			}

			// A restart replays every acknowledged record. (The failed
			// record's fate is unknown; it may replay after them.)
			l = openLog(t, testOptions(root))
			closeLog(t, l)
			recs, _ := replayAll(t, vfs.Default, root)
			if len(recs) < len(acked) {
				t.Fatalf("%d records replayed, %d acknowledged", len(recs), len(acked))
			}
			for i := range acked {
				if recs[i].Seq != acked[i] {
					t.Fatalf("record %d has seq %d, acknowledged %d", i, recs[i].Seq, acked[i])
				}
				checkRecord(t, &recs[i], i, 40)
			}
			for _, r := range recs[len(acked):] {
				if r.TabletID != tabletOf(10) {
					t.Fatalf("record %d after the acknowledged ones is not the failed record", r.Seq)
				}
			}
		})
	}
}

// TestSingleFileWindow: a single-file log keeps the torn-tail window of
// its header small, so damage in the middle of a file larger than the
// window is corruption, not a torn tail, while a cut-off last record is
// still a torn tail.
func TestSingleFileWindow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.log")
	f, err := CreateSingle(vfs.Default, path, "w")
	if err != nil {
		t.Fatal(err)
	}
	const n, vsize = 48, 48 << 10 // 2.3 MiB, more than twice the window
	for i := 0; i < n; i++ {
		if err := f.Append(context.Background(), "w", testMutation(i, vsize)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	rep, err := ReplayFile(vfs.Default, path, func(r *Record) error {
		offs = append(offs, r.Offset)
		return nil
	})
	if err != nil || rep.Records != n {
		t.Fatalf("intact: %+v, %v", rep, err)
	}
	offs = append(offs, rep.End)
	for _, tc := range []struct {
		name    string
		mutate  func(b []byte) []byte
		corrupt int64 // offset of the corruption, or -1
		records int
	}{
		{"byte flip in the middle", func(b []byte) []byte { b[offs[5]+100] ^= 1; return b }, offs[5], 0},
		{"length in the middle runs past the end", func(b []byte) []byte { b[offs[5]+3] = 0x01; return b }, offs[5], 0},
		{"cut in the last record", func(b []byte) []byte { return b[:len(b)-7] }, -1, n - 1},
		{"byte flip in the last record", func(b []byte) []byte { b[offs[n-1]+100] ^= 1; return b }, -1, n - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "case.log")
			if err := os.WriteFile(p, tc.mutate(append([]byte(nil), data...)), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := ReplayFile(vfs.Default, p, nil)
			var ce *CorruptionError
			if tc.corrupt >= 0 {
				if !errors.As(err, &ce) || ce.File != p || ce.Offset != tc.corrupt {
					t.Fatalf("err %v (report %+v), want a corruption at %s:%d", err, rep, p, tc.corrupt)
				}
				return
			}
			if err != nil || rep.Records != tc.records || !rep.Torn {
				t.Fatalf("report %+v, err %v; want %d records and a torn tail", rep, err, tc.records)
			}
		})
	}
}

// TestSingleFileContextEndsDuringSync: a split-log record once written is
// waited for whatever the context does; a record still waiting for room in
// the unsynced window is stopped by its context and never written.
func TestSingleFileContextEndsDuringSync(t *testing.T) {
	dir := t.TempDir()
	gate := newSyncGate()
	fsys := errorfs.Wrap(vfs.Default, gate)
	path := filepath.Join(dir, "c.log")
	f, err := CreateSingle(fsys, path, "c")
	if err != nil {
		t.Fatal(err)
	}
	gate.arm()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- f.Append(ctx, "c", testMutation(1, 100)) }()
	<-gate.entered // written, in its fdatasync
	// A record that does not fit in the window behind the unsynced one
	// waits for room; its context stops it.
	big := testMutation(2, 1<<20) // more than the window (ChildLogMaxFlush) behind the unsynced record
	ctx2, cancel2 := context.WithCancel(context.Background())
	res2 := make(chan error, 1)
	go func() { res2 <- f.Append(ctx2, "c", big) }()
	cancel2()
	if err := <-res2; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append waiting for room, context cancelled: %v", err)
	}
	cancel()
	select {
	case err := <-res:
		t.Fatalf("Append returned %v while its record's fdatasync still ran", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate.release)
	if err := <-res; err != nil {
		t.Fatalf("Append after its context ended in the sync: %v", err)
	}
	f.Close()
	var rows []string
	rep, err := ReplayFile(vfs.Default, path, func(r *Record) error {
		rows = append(rows, string(r.Mutation.Row))
		return nil
	})
	if err != nil || rep.Torn || len(rows) != 1 || rows[0] != string(testMutation(1, 0).Row) {
		t.Fatalf("replay: %+v, rows %q, err %v", rep, rows, err)
	}
}
