package replica_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"bighive/internal/limits"
	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/vfs/errorfs"
)

// gatedLog holds back the append of the first DeleteRow until release is
// closed, and reports the other appends of the gated row on others.
type gatedLog struct {
	replica.Log
	held    chan struct{} // closed when the DeleteRow's append is held
	release chan struct{}
	others  chan struct{}
}

func (l *gatedLog) AppendBatch(ctx context.Context, id string, ms []*mutation.RowMutation) ([]uint64, []error) {
	for _, m := range ms {
		if m.Ops[0].Kind == mutation.DeleteRow {
			close(l.held)
			<-l.release
		} else if string(m.Row) == "r" {
			select {
			case l.others <- struct{}{}:
			default:
			}
		}
	}
	return l.Log.AppendBatch(ctx, id, ms)
}

func counterOf(t *testing.T, rep *replica.Replica, row string) (int64, bool) {
	t.Helper()
	r, ok, err := rep.Get(context.Background(), []byte(row), tablet.ReadOptions{MaxVersions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !ok || len(r.Cells) == 0 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(r.Cells[0].Value)), true
}

// TestReadModifyWriteWaitsForPlainWrites: a plain write of the row that
// has its sequence but is not applied yet (its append is held) must be
// seen by a read-modify-write of the same row. A delete of the row at a
// lower sequence applied after an increment that read the old counter
// would leave a value no order of the two writes produces (11 here, where
// delete-then-increment gives 1 and increment-then-delete nothing).
func TestReadModifyWriteWaitsForPlainWrites(t *testing.T) {
	g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	gl := &gatedLog{Log: g.log, held: make(chan struct{}), release: make(chan struct{}), others: make(chan struct{}, 1)}
	rep := g.replica(replica.Options{Log: gl})
	ctx := context.Background()
	if err := rep.Write(ctx, &mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "cf",
		Qualifier: []byte("n"), Timestamp: mutation.ServerTime, Value: binary.BigEndian.AppendUint64(nil, 10)}}}); err != nil {
		t.Fatal(err)
	}
	<-gl.others // the setup's own append
	del := make(chan error, 1)
	go func() {
		del <- rep.Write(ctx, &mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}}})
	}()
	<-gl.held
	inc := make(chan error, 1)
	go func() {
		_, err := rep.ReadModifyWrite(ctx, []byte("r"), []replica.Rule{{Family: "cf", Qualifier: []byte("n"), Increment: true, Delta: 1}})
		inc <- err
	}()
	// Let the increment run as far as it can: with the row lock it waits
	// for the delete; without, it reads 10 and appends its result. Either
	// way the outcome is checked below, not the time it took.
	select {
	case <-gl.others:
	case <-time.After(200 * time.Millisecond):
	}
	close(gl.release)
	if err := <-del; err != nil {
		t.Fatal(err)
	}
	if err := <-inc; err != nil {
		t.Fatal(err)
	}
	if v, ok := counterOf(t, rep, "r"); !ok || v != 1 {
		t.Fatalf("counter after a delete and an increment = %d (present %v), want 1", v, ok)
	}
}

// TestReadModifyWriteErrors: a non-counter cell fails with ErrNotCounter
// and nothing is written; malformed rules fail with ErrInvalidRule; a row
// outside the tablet with ErrWrongTablet.
func TestReadModifyWriteErrors(t *testing.T) {
	g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	ctx := context.Background()
	if err := g.rep.Write(ctx, put("r", "abc")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		row   string
		rules []replica.Rule
		want  error
	}{
		{"not a counter", "r", []replica.Rule{{Family: "cf", Qualifier: []byte("q"), Increment: true, Delta: 1}}, replica.ErrNotCounter},
		{"no rules", "r", nil, replica.ErrInvalidRule},
		{"no family", "r", []replica.Rule{{Qualifier: []byte("q"), Append: []byte("x")}}, replica.ErrInvalidRule},
		{"unknown family", "r", []replica.Rule{{Family: "zz", Append: []byte("x")}}, tablet.ErrUnknownFamily},
		{"result over the value limit", "r", []replica.Rule{
			{Family: "cf", Qualifier: []byte("q"), Append: make([]byte, limits.MaxValueBytes/2+1)},
			{Family: "cf", Qualifier: []byte("q"), Append: make([]byte, limits.MaxValueBytes/2+1)},
		}, replica.ErrInvalidRule},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := g.rep.ReadModifyWrite(ctx, []byte(tc.row), tc.rules); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			r, _, err := g.rep.Get(ctx, []byte("r"), tablet.ReadOptions{})
			if err != nil || len(r.Cells) != 1 || !bytes.Equal(r.Cells[0].Value, []byte("abc")) {
				t.Fatalf("row after the failed call: %+v, %v; want only q=abc", r, err)
			}
		})
	}
}

// TestReadModifyWriteLeaseLost: a lease that ran out during the append
// leaves the increment logged and applied, and the error says its outcome
// is unknown (ErrUnknownOutcome), so that no caller retries it as unapplied.
func TestReadModifyWriteLeaseLost(t *testing.T) {
	g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	rep := g.replica(replica.Options{Lease: func() bool { return false }})
	_, err := rep.ReadModifyWrite(context.Background(), []byte("r"), []replica.Rule{{Family: "cf", Qualifier: []byte("n"), Increment: true, Delta: 1}})
	if !errors.Is(err, replica.ErrLeaseLost) || !errors.Is(err, replica.ErrUnknownOutcome) {
		t.Fatalf("err %v, want ErrLeaseLost and ErrUnknownOutcome", err)
	}
	if v, ok := counterOf(t, rep, "r"); !ok || v != 1 {
		t.Fatalf("counter %d (present %v), want 1: the write is logged and applied", v, ok)
	}
}

// TestReadModifyWriteGranularity: a read-modify-write's new cell has the
// table's granularity: under millisecond granularity its timestamp is the
// server's clock truncated to whole milliseconds (increments within one
// millisecond replace one version), or the latest cell's timestamp when
// that lies in the future (so the new cell stays the latest).
func TestReadModifyWriteGranularity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		g      tablet.Granularity
		future int64 // a client timestamp ahead of the clock, valid under g
	}{
		{"micros", tablet.Micros, 1500},
		{"millis", tablet.Millis, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
			g.tb.SetSchema(tablet.Schema{Families: map[string]tablet.FamilyPolicy{"cf": {}}, Granularity: tc.g})
			ctx := context.Background()
			inc := []replica.Rule{{Family: "cf", Qualifier: []byte("n"), Increment: true, Delta: 1}}
			var last int64
			for i := 0; i < 20; i++ {
				row, err := g.rep.ReadModifyWrite(ctx, []byte("r"), inc)
				if err != nil {
					t.Fatal(err)
				}
				ts := row.Cells[0].Timestamp
				if ts < last || (tc.g == tablet.Millis && ts%1000 != 0) || (tc.g == tablet.Micros && ts == last) {
					t.Fatalf("increment %d: timestamp %d after %d", i, ts, last)
				}
				last = ts
			}
			if n, _ := counterOf(t, g.rep, "r"); n != 20 {
				t.Fatalf("counter %d, want 20", n)
			}
			all, _, err := g.rep.Get(ctx, []byte("r"), tablet.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.g == tablet.Millis {
				distinct := map[int64]bool{}
				for _, c := range all.Cells {
					distinct[c.Timestamp] = true
				}
				if len(all.Cells) != len(distinct) {
					t.Fatalf("%d versions for %d distinct milliseconds", len(all.Cells), len(distinct))
				}
			} else if len(all.Cells) != 20 {
				t.Fatalf("%d versions, want 20", len(all.Cells))
			}

			// A cell in the future: the next increment takes its timestamp.
			future := time.Now().Add(time.Hour).UnixMicro()
			future = future - future%1000 + tc.future
			if err := g.rep.Write(ctx, &mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "cf",
				Qualifier: []byte("n"), Timestamp: future, Value: binary.BigEndian.AppendUint64(nil, 100)}}}); err != nil {
				t.Fatal(err)
			}
			row, err := g.rep.ReadModifyWrite(ctx, []byte("r"), inc)
			if err != nil {
				t.Fatal(err)
			}
			if c := row.Cells[0]; c.Timestamp != future || binary.BigEndian.Uint64(c.Value) != 101 {
				t.Fatalf("after a future cell at %d: new cell %d = %d, want %d = 101", future, c.Timestamp, binary.BigEndian.Uint64(c.Value), future)
			}
		})
	}
}
