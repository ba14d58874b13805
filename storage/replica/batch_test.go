package replica_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/split"
	"bighive/storage/tablet"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/vfs"
	"bighive/storage/vfs/errorfs"
	"bighive/storage/wal"
)

func noFaults() errorfs.Injector { return errorfs.InjectorFunc(func(errorfs.Op) error { return nil }) }

// loggedRows replays the WAL from the rig's start: row -> value of each
// SetCell record, and the number of records.
func (g *rig) loggedRows(t *testing.T) (map[string]string, int) {
	t.Helper()
	rows, n := map[string]string{}, 0
	if _, err := wal.Replay(context.Background(), vfs.Default, g.root, g.start, func(rec *wal.Record) error {
		n++
		if len(rec.Mutation.Ops) > 0 {
			rows[string(rec.Mutation.Row)] = string(rec.Mutation.Ops[0].Value)
		}
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return rows, n
}

// TestWriteBatch drives Replica.WriteBatch over a real WAL and tablet:
// every acknowledged row is in the log (what a crash replays) and
// visible, a bad row fails alone with its own error, and the batch is one
// group commit.
func TestWriteBatch(t *testing.T) {
	g := newRig(t, noFaults())
	ranged := g.replica(replica.Options{Start: []byte("b"), End: []byte("y")})
	var ms []*mutation.RowMutation
	for i := range 40 {
		ms = append(ms, put(fmt.Sprintf("row%02d", i), fmt.Sprintf("v%d", i)))
	}
	bad := &mutation.RowMutation{Row: []byte("row-bad"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "nope",
		Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("x")}}}
	outside := put("zzz", "x")
	ms = append(ms[:10], append([]*mutation.RowMutation{bad, outside}, ms[10:]...)...)
	ms = append(ms, put("row00", "again")) // a repeated row: applied after the first
	before := g.log.Stats()
	errs := ranged.WriteBatch(context.Background(), ms)
	after := g.log.Stats()
	if got := after.Batches - before.Batches; got != 1 {
		t.Errorf("the batch took %d group commits, want 1", got)
	}
	logged, n := g.loggedRows(t)
	for i, m := range ms {
		row := string(m.Row)
		switch row {
		case "row-bad":
			if !errors.Is(errs[i], tablet.ErrUnknownFamily) || !strings.Contains(errs[i].Error(), "nope") {
				t.Errorf("invalid row: %v, want ErrUnknownFamily naming the family", errs[i])
			}
		case "zzz":
			if !errors.Is(errs[i], replica.ErrWrongTablet) {
				t.Errorf("row outside the range: %v, want ErrWrongTablet", errs[i])
			}
		default:
			if errs[i] != nil {
				t.Fatalf("row %s: %v", row, errs[i])
			}
		}
	}
	for _, row := range []string{"row-bad", "zzz"} {
		if _, ok := logged[row]; ok {
			t.Errorf("failed row %s is in the log", row)
		}
	}
	if n != 41 {
		t.Errorf("%d records in the log, want 41", n)
	}
	for i := 1; i < 40; i++ {
		row, v := fmt.Sprintf("row%02d", i), fmt.Sprintf("v%d", i)
		if logged[row] != v || !g.visible(t, row, v) {
			t.Errorf("row %s: logged %q, visible %v; want %q in the log and visible", row, logged[row], g.visible(t, row, v), v)
		}
	}
	if !g.visible(t, "row00", "again") {
		t.Error("the second write of a repeated row is not the newest")
	}
}

// TestWriteBatchCrashReplay: a batch acknowledged then "crashed" (the
// log is left unclosed and replayed into a fresh tablet) comes back whole.
func TestWriteBatchCrashReplay(t *testing.T) {
	g := newRig(t, noFaults())
	var wg sync.WaitGroup
	acked := make([][]string, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range 5 {
				var ms []*mutation.RowMutation
				for k := range 20 {
					ms = append(ms, put(fmt.Sprintf("w%d-b%d-%02d", w, b, k), "v"))
				}
				for i, err := range g.rep.WriteBatch(context.Background(), ms) {
					if err != nil {
						t.Errorf("WriteBatch: %v", err)
						return
					}
					acked[w] = append(acked[w], string(ms[i].Row))
				}
			}
		}()
	}
	wg.Wait()
	tb, err := tablet.Open(tablet.Options{ID: "t1", Schema: tablet.Schema{Families: map[string]tablet.FamilyPolicy{"cf": {}}},
		Store: g.mgr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := wal.Replay(context.Background(), vfs.Default, g.root, g.start, func(rec *wal.Record) error {
		tb.ObserveMutation(&rec.Mutation)
		return tb.Apply(&rec.Mutation)
	}); err != nil {
		t.Fatal(err)
	}
	for _, rows := range acked {
		for _, row := range rows {
			if _, found, err := tb.Get(context.Background(), []byte(row), tablet.ReadOptions{}); err != nil || !found {
				t.Fatalf("acknowledged row %s is not in the replayed tablet (%v)", row, err)
			}
		}
	}
}

// TestWriteBatchLeaseLost: a lease that ran out during the append makes
// every logged row of the batch ErrLeaseLost (outcome unknown), a row
// that was not logged keeps its own error.
func TestWriteBatchLeaseLost(t *testing.T) {
	g := newRig(t, noFaults())
	var lease atomic.Bool
	lease.Store(true)
	rep := g.replica(replica.Options{Lease: lease.Load})
	if errs := rep.WriteBatch(context.Background(), []*mutation.RowMutation{put("a", "1"), put("b", "1")}); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	lease.Store(false)
	bad := &mutation.RowMutation{Row: []byte("c"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "nope", Timestamp: mutation.ServerTime}}}
	errs := rep.WriteBatch(context.Background(), []*mutation.RowMutation{put("a", "2"), bad, put("b", "2")})
	for _, i := range []int{0, 2} {
		if !errors.Is(errs[i], replica.ErrLeaseLost) || !errors.Is(errs[i], replica.ErrUnknownOutcome) {
			t.Errorf("row %d: %v, want ErrLeaseLost and ErrUnknownOutcome", i, errs[i])
		}
	}
	if !errors.Is(errs[1], tablet.ErrUnknownFamily) {
		t.Errorf("invalid row: %v, want ErrUnknownFamily", errs[1])
	}
	if !g.visible(t, "a", "2") || !g.visible(t, "b", "2") {
		t.Error("rows logged before the lease check are not applied")
	}
}

// TestWriteBatchFailedLog: an fdatasync error fails every row of the
// batch with ErrLog (none applied) and reaches LogFailed once.
func TestWriteBatchFailedLog(t *testing.T) {
	tog := errorfs.NewToggle(errorfs.And(errorfs.Kinds(errorfs.OpSync), func(op errorfs.Op) bool { return strings.Contains(op.Path, "/wal/") }))
	g := newRig(t, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if tog.MaybeError(op) != nil {
			return syscall.EIO
		}
		return nil
	}))
	tog.Set(true)
	errs := g.rep.WriteBatch(context.Background(), []*mutation.RowMutation{put("a", "x"), put("b", "x"), put("c", "x")})
	for i, err := range errs {
		if !errors.Is(err, replica.ErrLog) || !errors.Is(err, wal.ErrFailed) {
			t.Errorf("row %d: %v, want ErrLog wrapping wal.ErrFailed", i, err)
		}
	}
	for _, row := range []string{"a", "b", "c"} {
		if g.visible(t, row, "x") {
			t.Errorf("row %s of a failed append is visible", row)
		}
	}
	if len(g.failed) != 1 {
		t.Errorf("LogFailed called %d times, want once", len(g.failed))
	}
	// Later writes see the failed log (the abandoned sequences do not
	// hold visibility back).
	if err := g.rep.Write(context.Background(), put("d", "x")); !errors.Is(err, replica.ErrLog) {
		t.Errorf("write after the failure: %v", err)
	}
}

// TestWriteBatchDuringSplit: batches written while a real split
// dual-writes reach both the WAL and their child's child log, the rows of
// each child in it, and the split commits.
func TestWriteBatchDuringSplit(t *testing.T) {
	g := newRig(t, noFaults())
	routed, cont := make(chan struct{}), make(chan struct{})
	opts := split.Options{FS: g.fs, Root: g.root, Blocks: g.mgr, Exclusive: g.coord.Exclusive, BeginSplit: g.coord.BeginSplit,
		Master: splitMaster{}, Logger: quiet,
		OpenFile: func(f tsfile.Info) (*tsfile.Reader, error) {
			return tsfile.Open(g.mgr, f.FooterRef(), tsfile.ReaderOptions{})
		},
		Hook: func(s split.Step) error {
			if s == split.StepChildLogs {
				close(routed)
				<-cont
			}
			return nil
		}}
	if err := g.rep.Write(context.Background(), put("a", "before")); err != nil {
		t.Fatal(err)
	}
	req := split.Request{TabletID: "t1", Epoch: 1, Start: g.rep.Start(), End: g.rep.End(), Row: []byte("m"), Tablet: g.rep, Route: g.rep.Route}
	splitDone := make(chan error, 1)
	go func() { _, err := split.Run(context.Background(), opts, req); splitDone <- err }()
	<-routed
	var ms []*mutation.RowMutation
	for i := range 30 {
		ms = append(ms, put(fmt.Sprintf("%c%02d", "cx"[i%2], i), "v")) // rows of both children
	}
	for i, err := range g.rep.WriteBatch(context.Background(), ms) {
		if err != nil {
			t.Fatalf("row %s: %v", ms[i].Row, err)
		}
	}
	close(cont)
	if err := <-splitDone; err != nil {
		t.Fatalf("split: %v", err)
	}
	for c, id := range []string{"c1", "c2"} {
		got := map[string]bool{}
		if _, err := wal.ReplayFile(vfs.Default, filepath.Join(g.root, split.ChildLogPath(id)), func(rec *wal.Record) error {
			got[string(rec.Mutation.Row)] = true
			return nil
		}); err != nil {
			t.Fatalf("replay child log %s: %v", id, err)
		}
		for i, m := range ms {
			if got[string(m.Row)] != (i%2 == c) {
				t.Errorf("row %s in child log %s: %v", m.Row, id, got[string(m.Row)])
			}
		}
	}
	logged, _ := g.loggedRows(t)
	for _, m := range ms {
		if logged[string(m.Row)] != "v" {
			t.Errorf("row %s not in the WAL", m.Row)
		}
	}
}

// TestWriteBatchWithReadModifyWrite: batches and read-modify-writes of the
// same rows run concurrently without deadlock, and every increment counts.
func TestWriteBatchWithReadModifyWrite(t *testing.T) {
	g := newRig(t, noFaults())
	var wg sync.WaitGroup
	rows := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				var ms []*mutation.RowMutation
				for _, r := range rows {
					ms = append(ms, &mutation.RowMutation{Row: []byte(r), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "cf",
						Qualifier: fmt.Appendf(nil, "p%d", w), Timestamp: mutation.ServerTime, Value: []byte("x")}}})
				}
				if err := errors.Join(g.rep.WriteBatch(context.Background(), ms)...); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for _, r := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := g.rep.ReadModifyWrite(context.Background(), []byte(r), []replica.Rule{{Family: "cf", Qualifier: []byte("n"), Increment: true, Delta: 1}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range rows {
		row, _, err := g.rep.Get(context.Background(), []byte(r), tablet.ReadOptions{Columns: []tablet.Column{{Family: "cf", Qualifier: []byte("n")}}, MaxVersions: 1})
		if err != nil || len(row.Cells) != 1 || row.Cells[0].Value[7] != 10 {
			t.Fatalf("row %s counter: %v %v, want 10", r, row.Cells, err)
		}
	}
}
