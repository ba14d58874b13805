package tablet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
)

func openTablet(t *testing.T, clock *fakeClock) *Tablet {
	t.Helper()
	tb, err := Open(Options{ID: "t", Schema: testSchema(), Store: newStore(t), Now: clock.now, PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// writeRow gives a mutation of row's ops its sequence and timestamps in tb
// and applies it (the write path without a log), failing t on an error;
// it returns the mutation as the log would hold it.
func writeRow(t testing.TB, tb *Tablet, row string, ops ...mutation.Op) mutation.RowMutation {
	t.Helper()
	m := mutation.RowMutation{Row: []byte(row), Ops: ops}
	if err := tb.AssignTimestamps(&m); err != nil {
		t.Fatal(err)
	}
	if err := tb.Apply(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// flushActive swaps tb's active buffer out and writes it as a TSFile in
// the read set (a checkpoint's swap, flush and install, without a log); an
// empty buffer fails t.
func flushActive(t testing.TB, tb *Tablet) TSFileInfo {
	t.Helper()
	if !tb.SwapBuffers() {
		t.Fatal("nothing to swap")
	}
	info, err := tb.FlushStandby(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.InstallFlushed(info); err != nil {
		t.Fatal(err)
	}
	return info
}

func TestAssignTimestamps(t *testing.T) {
	clock := &fakeClock{}
	clock.us.Store(500)
	tb := openTablet(t, clock)
	var last int64
	var lastSeq uint64
	for i := 0; i < 50; i++ {
		if i == 25 {
			clock.us.Store(100) // the wall clock steps back
		}
		m := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: mutation.ServerTime},
			{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("fixed"), Timestamp: 7},
			{Kind: mutation.DeleteColumn, Family: "c", Qualifier: []byte("x"), Timestamp: mutation.ServerTime},
		}}
		if err := tb.AssignTimestamps(&m); err != nil {
			t.Fatal(err)
		}
		if ts := m.Ops[0].Timestamp; ts <= last {
			t.Fatalf("mutation %d: timestamp %d not above %d", i, ts, last)
		}
		if m.Ops[1].Timestamp != 7 {
			t.Fatalf("client timestamp changed to %d", m.Ops[1].Timestamp)
		}
		if d := m.Ops[2]; d.Timestamp != 0 || d.End != 0 {
			t.Fatalf("DeleteColumn got [%d, %d), want [0, 0): every version", d.Timestamp, d.End)
		}
		if m.Seq <= lastSeq {
			t.Fatalf("mutation %d: seq %d not above %d", i, m.Seq, lastSeq)
		}
		last, lastSeq = m.Ops[0].Timestamp+2, m.Seq
	}
	tb.ObserveTimestamp(1 << 40)
	m := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}}}
	if err := tb.AssignTimestamps(&m); err != nil || m.Ops[0].Timestamp <= 1<<40 {
		t.Fatalf("after ObserveTimestamp: %d, %v", m.Ops[0].Timestamp, err)
	}
}

func TestValidation(t *testing.T) {
	tb := openTablet(t, &fakeClock{})
	cases := []struct {
		name string
		m    mutation.RowMutation
		want error
	}{
		{"unknown family", mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "zz", Timestamp: 1}}}, ErrUnknownFamily},
		{"empty row", mutation.RowMutation{Ops: []mutation.Op{{Kind: mutation.DeleteRow, Timestamp: 1}}}, ErrInvalidMutation},
		{"no ops", mutation.RowMutation{Row: []byte("r")}, ErrInvalidMutation},
		{"negative ts", mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "a", Timestamp: -5}}}, ErrInvalidMutation},
		{"empty range", mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.DeleteColumn, Family: "a", Timestamp: 5, End: 5}}}, ErrInvalidMutation},
		{"bad kind", mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: 9, Family: "a"}}}, ErrInvalidMutation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.m
			if err := tb.AssignTimestamps(&m); !errors.Is(err, c.want) {
				t.Fatalf("AssignTimestamps: %v, want %v", err, c.want)
			}
			applyWant := c.want
			if c.want == ErrUnknownFamily {
				// Apply does not check families (a replayed record may
				// name a deleted one); m has no sequence assigned.
				applyWant = ErrInvalidMutation
			}
			if err := tb.Apply(&m); !errors.Is(err, applyWant) {
				t.Fatalf("Apply: %v, want %v", err, applyWant)
			}
		})
	}
	unassigned := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "a", Timestamp: mutation.ServerTime}}}
	if err := tb.Apply(&unassigned); !errors.Is(err, ErrInvalidMutation) {
		t.Fatalf("Apply with ServerTime: %v", err)
	}
	if tb.MemoryUsage() != 0 {
		t.Fatal("a rejected mutation was applied")
	}
	unknown := mutation.RowMutation{Seq: 1, Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "zz", Timestamp: 1}}}
	if err := tb.Apply(&unknown); err != nil {
		t.Fatalf("Apply of a logged write naming a family absent from the schema: %v", err)
	}
	if row, found, err := tb.Get(context.Background(), []byte("r"), ReadOptions{}); err != nil || found {
		t.Fatalf("a cell of a family absent from the schema is read: %+v %v %v", row, found, err)
	}
	if err := tb.BeginWrite(&mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.DeleteFamily, Family: "zz", Timestamp: mutation.ServerTime}}}); !errors.Is(err, ErrUnknownFamily) {
		t.Fatalf("BeginWrite naming an absent family: %v, want ErrUnknownFamily", err)
	}
	internal := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.DeleteFamily, Family: "zz", Timestamp: mutation.ServerTime}}}
	if err := tb.BeginInternalWrite(&internal); err != nil {
		t.Fatalf("BeginInternalWrite of a tombstone of an absent family: %v", err)
	}
	if err := tb.Apply(&internal); err != nil {
		t.Fatal(err)
	}
	if keys, err := tb.FamilyRowKeys(context.Background(), "zz", nil, nil, 0); err != nil || len(keys) != 1 || string(keys[0]) != "r" {
		t.Fatalf("FamilyRowKeys(zz) = %q %v, want [r]", keys, err)
	}
}

// TestConcurrentAtomicRows: every mutation writes one value to all columns
// of a row; readers, running during swaps, flushes and compactions, must
// never see two values in one row, nor a row go missing once written.
func TestConcurrentAtomicRows(t *testing.T) {
	clock := &fakeClock{}
	clock.us.Store(1)
	tb := openTablet(t, clock)
	ctx := context.Background()
	const rows, cols = 16, 6
	write := func(i int) {
		m := mutation.RowMutation{Row: []byte(fmt.Sprintf("row%02d", i%rows))}
		for c := 0; c < cols; c++ {
			m.Ops = append(m.Ops, mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte{byte('a' + c)}, Timestamp: 1, Value: []byte(fmt.Sprint(i))})
		}
		if err := tb.AssignTimestamps(&m); err != nil {
			t.Error(err)
		}
		if err := tb.Apply(&m); err != nil {
			t.Error(err)
		}
	}
	for i := 0; i < rows; i++ {
		write(i)
	}
	checkRow := func(r Row) error {
		if len(r.Cells) != cols {
			return fmt.Errorf("row %s has %d cells", r.Key, len(r.Cells))
		}
		for _, c := range r.Cells {
			if !bytes.Equal(c.Value, r.Cells[0].Value) {
				return fmt.Errorf("row %s half applied: %q vs %q", r.Key, c.Value, r.Cells[0].Value)
			}
		}
		return nil
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				seen := 0
				err := tb.Scan(ctx, nil, nil, 0, ReadOptions{MaxVersions: 1}, func(r Row) bool {
					seen++
					if err := checkRow(r); err != nil {
						errc <- err
						return false
					}
					return true
				})
				if err == nil && seen != rows {
					err = fmt.Errorf("scan saw %d rows, want %d", seen, rows)
				}
				if err == nil {
					var r Row
					var ok bool
					r, ok, err = tb.Get(ctx, []byte(fmt.Sprintf("row%02d", n%rows)), ReadOptions{MaxVersions: 1})
					if err == nil && !ok {
						err = fmt.Errorf("row %d missing", n%rows)
					}
					if err == nil {
						err = checkRow(r)
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for i := rows; i < 1500; i++ {
		write(i)
		if i%150 == 0 {
			if tb.SwapBuffers() {
				info, err := tb.FlushStandby(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallFlushed(info); err != nil {
					t.Fatal(err)
				}
			}
		}
		if i%450 == 0 {
			var ids []blockstore.BlockRef
			for _, f := range tb.Files() {
				ids = append(ids, f.FooterRef())
			}
			if len(ids) > 1 {
				info, err := tb.CompactFiles(ctx, ids, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallCompacted(ids, info); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestMajorCompactionDropsHidden(t *testing.T) {
	clock := &fakeClock{}
	clock.us.Store(10_000)
	tb := openTablet(t, clock)
	ctx := context.Background()
	apply := func(ops ...mutation.Op) { t.Helper(); writeRow(t, tb, "r", ops...) }
	flush := func() { t.Helper(); flushActive(t, tb) }
	set := func(fam, q string, ts int64) mutation.Op {
		return mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: []byte(q), Timestamp: ts, Value: []byte(fmt.Sprint(ts))}
	}
	for ts := int64(1); ts <= 5; ts++ { // a: MaxVersions 2 keeps 4, 5
		apply(set("a", "q", ts))
	}
	apply(set("b", "old", 100), set("b", "new", 9_900)) // b: MaxAge 300µs drops 100
	apply(set("c", "x", 1), set("c", "x", 2), set("c", "y", 3))
	flush()
	apply(mutation.Op{Kind: mutation.DeleteColumn, Family: "c", Qualifier: []byte("x"), Timestamp: 0, End: 2})
	flush()
	before, _, err := tb.Get(ctx, []byte("r"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []blockstore.BlockRef
	var entries int64
	for _, f := range tb.Files() {
		ids = append(ids, f.FooterRef())
		entries += f.Entries
	}
	info, err := tb.CompactFiles(ctx, ids, true)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: a@5, a@4, b:new, c:x@2, c:y@3 and the column tombstone.
	if info.Entries != 6 {
		t.Fatalf("major compaction kept %d of %d entries, want 6", info.Entries, entries)
	}
	if err := tb.InstallCompacted(ids, info); err != nil {
		t.Fatal(err)
	}
	after, _, err := tb.Get(ctx, []byte("r"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(normalize(before)) != fmt.Sprint(normalize(after)) || len(after.Cells) != 5 {
		t.Fatalf("reads changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if n := len(tb.Files()); n != 1 {
		t.Fatalf("%d files after compaction", n)
	}
	// A row tombstone hides every cell. The run holds every file, so the
	// tombstones go too, but for the entry of highest sequence (the row
	// tombstone), which keeps the files' largest sequence.
	apply(mutation.Op{Kind: mutation.DeleteRow, Timestamp: 20_000})
	flush()
	ids = ids[:0]
	for _, f := range tb.Files() {
		ids = append(ids, f.FooterRef())
	}
	maxSeq := tb.Files()[0].MaxSeq
	info, err = tb.CompactFiles(ctx, ids, true)
	if err != nil || info.Entries != 1 || info.MaxSeq != maxSeq {
		t.Fatalf("compact after DeleteRow: %+v %v, want 1 entry of sequence %d", info, err, maxSeq)
	}
}

// TestClockContinuesAboveFiles: a tablet whose data is all in TSFiles is
// opened with a clock far behind the one that wrote them (another server,
// a clock stepped back). Its next server timestamp and write sequence must
// be above every existing one, so the new write is the newest version and
// a delete made now hides what was written before.
func TestClockContinuesAboveFiles(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	ahead := &fakeClock{}
	ahead.us.Store(5_000_000)
	opts := Options{ID: "t", Schema: testSchema(), Store: store, Now: ahead.now, PageSize: 1024}
	tb, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var maxTS int64
	var maxSeq uint64
	for i := 0; i < 20; i++ {
		m := mutation.RowMutation{Row: []byte(fmt.Sprintf("r%02d", i%4)), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte(fmt.Sprint(i))},
		}}
		if i == 7 {
			m.Ops = append(m.Ops, mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: 9_000_000, Value: []byte("client")})
		}
		if err := tb.AssignTimestamps(&m); err != nil {
			t.Fatal(err)
		}
		if err := tb.Apply(&m); err != nil {
			t.Fatal(err)
		}
		for _, op := range m.Ops {
			maxTS = max(maxTS, op.Timestamp)
		}
		maxSeq = max(maxSeq, m.Seq)
		if i%5 == 4 {
			tb.SwapBuffers()
			info, err := tb.FlushStandby(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.InstallFlushed(info); err != nil {
				t.Fatal(err)
			}
		}
	}
	var refs []FileRef
	for _, f := range tb.Files() {
		if f.MaxSeq == 0 {
			t.Fatalf("file %s has no max seq in its info", f.Footer)
		}
		refs = append(refs, FileRef{Footer: f.FooterRef()})
	}
	tb.Close()

	behind := &fakeClock{}
	behind.us.Store(1_000)
	opts.Now, opts.Files = behind.now, refs
	tb, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	m := mutation.RowMutation{Row: []byte("r03"), Ops: []mutation.Op{
		{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("new")},
	}}
	if err := tb.AssignTimestamps(&m); err != nil {
		t.Fatal(err)
	}
	if m.Ops[0].Timestamp <= maxTS {
		t.Fatalf("server timestamp %d after reopening is not above the files' largest %d", m.Ops[0].Timestamp, maxTS)
	}
	if m.Seq <= maxSeq {
		t.Fatalf("write sequence %d after reopening is not above the files' largest %d", m.Seq, maxSeq)
	}
	if err := tb.Apply(&m); err != nil {
		t.Fatal(err)
	}
	r, ok, err := tb.Get(ctx, []byte("r03"), ReadOptions{MaxVersions: 1})
	if err != nil || !ok || string(r.Cells[0].Value) != "new" {
		t.Fatalf("newest version after reopening = %+v %v %v, want \"new\"", r, ok, err)
	}
}

// TestCancelledScanStopsOverHiddenRows: a scan that has returned one row
// and then meets only deleted rows must notice its cancelled context at
// the next row it examines, not read on to the tablet's end.
func TestCancelledScanStopsOverHiddenRows(t *testing.T) {
	tb, hidden := hiddenRowsTablet(t, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := tb.RowsExamined()
	rows := 0
	err := tb.Scan(ctx, nil, nil, 0, ReadOptions{}, func(Row) bool {
		rows++
		cancel() // the caller went away after the first row
		return true
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("scan = %v after %d rows, want context.Canceled", err, rows)
	}
	if n := tb.RowsExamined() - before; n > 2 {
		t.Fatalf("cancelled scan examined %d rows of %d, want at most 2", n, hidden+1)
	}
}

// hiddenRowsTablet opens a tablet holding one visible row and 2000 hidden
// rows b00000… (each written, then deleted): a scan from a visible row
// before or after "b" meets only hidden rows next.
func hiddenRowsTablet(t *testing.T, visible string) (tb *Tablet, hidden int) {
	t.Helper()
	clock := &fakeClock{}
	clock.us.Store(1_000)
	tb = openTablet(t, clock)
	apply := func(row string, op mutation.Op) { t.Helper(); writeRow(t, tb, row, op) }
	apply(visible, mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: 1, Value: []byte("v")})
	hidden = 2000
	for i := 0; i < hidden; i++ {
		row := fmt.Sprintf("b%05d", i)
		apply(row, mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: 1, Value: []byte("v")})
		apply(row, mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime})
	}
	return tb, hidden
}
