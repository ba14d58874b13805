package tablet

import (
	"context"
	"testing"
	"time"

	"bighive/storage/mutation"
)

// TestReadsSeeAPrefixOfSequenceOrder: a delete (sequence n) and a later put
// (n+1) of one column are in flight at once and the put is applied first.
// Until the delete finishes, no read sees the put — a read that saw it
// would see the old cell the delete is about to hide beside it, a state
// of no order of the two writes — and the put's Apply does not return.
// Once the delete is applied both are visible, the old cell hidden.
// Abandon of a write in flight releases the writes after it the same way.
func TestReadsSeeAPrefixOfSequenceOrder(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	clock.us.Store(1000)
	tb := openTablet(t, clock)
	set := func(row, v string, ts int64) *mutation.RowMutation {
		return &mutation.RowMutation{Row: []byte(row), Ops: []mutation.Op{
			{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: ts, Value: []byte(v)}}}
	}
	read := func(row string) []string {
		t.Helper()
		r, _, err := tb.Get(ctx, []byte(row), ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, c := range r.Cells {
			vs = append(vs, string(c.Value))
		}
		return vs
	}
	begin := func(m *mutation.RowMutation) *mutation.RowMutation {
		t.Helper()
		if err := tb.BeginWrite(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	apply := func(m *mutation.RowMutation) {
		t.Helper()
		if err := tb.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	// applyLater applies m in a goroutine and returns a channel closed when
	// Apply returned.
	applyLater := func(m *mutation.RowMutation) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := tb.Apply(m); err != nil {
				t.Error(err)
			}
		}()
		return done
	}
	// stillWaiting fails if done is closed within a short while: Apply
	// must not return before the earlier write finished.
	stillWaiting := func(done chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
			t.Fatalf("%s returned before the write of lower sequence finished", what)
		case <-time.After(50 * time.Millisecond):
		}
	}

	apply(begin(set("r", "old", 10)))
	del := begin(&mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{
		{Kind: mutation.DeleteColumn, Family: "c", Qualifier: []byte("q")}}})
	put := begin(set("r", "new", 5)) // an older timestamp: the delete must not hide it
	if put.Seq <= del.Seq {
		t.Fatalf("put seq %d not above delete seq %d", put.Seq, del.Seq)
	}
	done := applyLater(put)
	stillWaiting(done, "Apply of the put")
	// The put is in the buffer but above the visible bound.
	if got := read("r"); len(got) != 1 || got[0] != "old" {
		t.Fatalf("while the delete is in flight: read %q, want [old]", got)
	}
	apply(del)
	<-done
	if got := read("r"); len(got) != 1 || got[0] != "new" {
		t.Fatalf("after both writes: read %q, want [new]", got)
	}

	// Abandon: a write whose append failed lets the later ones through.
	lost := begin(set("s", "lost", 1))
	after := begin(set("s", "kept", 2))
	done = applyLater(after)
	stillWaiting(done, "Apply after a write in flight")
	if got := read("s"); len(got) != 0 {
		t.Fatalf("while the first write is in flight: read %q, want nothing", got)
	}
	tb.Abandon(lost)
	<-done
	if got := read("s"); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("after Abandon: read %q, want [kept]", got)
	}
}
