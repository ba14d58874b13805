package replica_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/vfs/errorfs"
	"bighive/storage/wal"
	"bighive/testkit/wait"
)

// writeKinds are every way into a replica's write path, each writing row.
var writeKinds = []struct {
	name  string
	write func(ctx context.Context, r *replica.Replica, row string) error
}{
	{"Write", func(ctx context.Context, r *replica.Replica, row string) error { return r.Write(ctx, put(row, "v")) }},
	{"WriteInternal", func(ctx context.Context, r *replica.Replica, row string) error {
		return r.WriteInternal(ctx, put(row, "v"))
	}},
	{"WriteBatch", func(ctx context.Context, r *replica.Replica, row string) error {
		return errors.Join(r.WriteBatch(ctx, []*mutation.RowMutation{put(row, "v")})...)
	}},
	{"WriteBatchInternal", func(ctx context.Context, r *replica.Replica, row string) error {
		return errors.Join(r.WriteBatchInternal(ctx, []*mutation.RowMutation{put(row, "v")})...)
	}},
	{"ReadModifyWrite", func(ctx context.Context, r *replica.Replica, row string) error {
		_, err := r.ReadModifyWrite(ctx, []byte(row), []replica.Rule{{Family: "cf", Qualifier: []byte("n"), Increment: true, Delta: 1}})
		return err
	}},
	{"CheckAndMutate", func(ctx context.Context, r *replica.Replica, row string) error {
		_, err := r.CheckAndMutate(ctx, []byte(row), nil, nil, []mutation.Op{{Kind: mutation.SetCell, Family: "cf",
			Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("v")}})
		return err
	}},
}

// TestNoWriteAfterStop: a replica has one serving state, and once it left
// serving by any of the ways a tserver ends a load (Stop at unload or on
// a failed log, Close at unload or shutdown, Stop of a load still
// replaying, a Serve after Stop: a load report answered after its tablet
// was unassigned), no write of any kind is admitted (ErrNotServing, and
// nothing reaches the log), no read answers, no commit can hold the load
// and the checkpoint leaves it out. Before the replica owned the only
// flag, a tablet had two (the replica's stopped, the load's serving), set
// by different paths; a write, read or checkpoint that consulted the one
// left serving got through.
func TestNoWriteAfterStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stop ends g's load; it returns the replica the writes go to.
		stop func(t *testing.T, g *rig) *replica.Replica
	}{
		{"Stop", func(t *testing.T, g *rig) *replica.Replica {
			if !g.rep.Stop() {
				t.Fatal("the first Stop reported that an earlier one stopped the replica")
			}
			if g.rep.Stop() {
				t.Fatal("a second Stop reported that it stopped the replica")
			}
			return g.rep
		}},
		{"Close", func(t *testing.T, g *rig) *replica.Replica {
			if err := g.rep.Close(); err != nil {
				t.Fatal(err)
			}
			if g.rep.Stop() {
				t.Fatal("Stop after Close reported that it stopped the replica")
			}
			return g.rep
		}},
		{"Serve after Stop", func(t *testing.T, g *rig) *replica.Replica {
			g.rep.Stop()
			if g.rep.Serve() {
				t.Fatal("a stopped replica served again")
			}
			return g.rep
		}},
		{"Stop while loading", func(t *testing.T, g *rig) *replica.Replica {
			r := replica.New(replica.Options{ID: "t1", Table: "tbl", Epoch: 2, Tablet: g.tb, Log: g.log, Admit: g.coord, Server: "test"})
			rec := &wal.Record{TabletID: "t1", Mutation: *put("replayed", "v")}
			if err := g.tb.AssignTimestamps(&rec.Mutation); err != nil {
				t.Fatal(err)
			}
			if err := r.Replay(rec); err != nil {
				t.Fatalf("replay while loading: %v", err)
			}
			for _, k := range writeKinds {
				if err := k.write(context.Background(), r, "loading"); !errors.Is(err, replica.ErrNotServing) {
					t.Fatalf("%s to a loading replica: %v, want ErrNotServing", k.name, err)
				}
			}
			r.Stop()
			if r.Serve() {
				t.Fatal("a replica stopped while it loaded served")
			}
			if err := r.Replay(rec); !errors.Is(err, replica.ErrNotServing) {
				t.Fatalf("replay into a stopped replica: %v, want ErrNotServing", err)
			}
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g := newRig(t, noFaults())
			if err := g.rep.Write(ctx, put("before", "v")); err != nil {
				t.Fatal(err)
			}
			r := tc.stop(t, g)
			_, records := g.loggedRows(t)
			for _, k := range writeKinds {
				row := "after-" + k.name
				if err := k.write(ctx, r, row); !errors.Is(err, replica.ErrNotServing) {
					t.Errorf("%s after the load ended: %v, want ErrNotServing", k.name, err)
				}
				if g.logged(t, row) {
					t.Errorf("%s after the load ended reached the log", k.name)
				}
			}
			if _, n := g.loggedRows(t); n != records {
				t.Errorf("the log holds %d records after the writes, %d before: a write was admitted", n, records)
			}
			if r.Serving() {
				t.Error("the replica reports serving")
			}
			if _, _, err := r.Get(ctx, []byte("before"), tablet.ReadOptions{}); !errors.Is(err, replica.ErrNotServing) {
				t.Errorf("Get after the load ended: %v, want ErrNotServing", err)
			}
			if _, err := r.RowKeys(ctx, nil, nil, 0); !errors.Is(err, replica.ErrNotServing) {
				t.Errorf("RowKeys after the load ended: %v, want ErrNotServing", err)
			}
			if release, ok := r.Hold(); ok {
				release()
				t.Error("a commit could hold the ended load")
			}
			meta := &recordingMeta{}
			coord := checkpoint.New(checkpoint.Options{Log: g.log, Meta: meta, Logger: quiet,
				Tablets: func() []checkpoint.Tablet { return []checkpoint.Tablet{r} }})
			res, err := coord.Checkpoint(ctx)
			if err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			if res.Swapped != 0 || len(meta.ids()) != 0 {
				t.Errorf("the checkpoint took part with the ended load: swapped %d, committed %v", res.Swapped, meta.ids())
			}
		})
	}
}

// TestStopRacesWrites: writers of every kind run while the replica stops.
// Every acknowledged write is in the log when Stop returns (Stop waited
// for it), every write begun after Stop returned fails with ErrNotServing,
// and the log gains no record after Stop returned: no write was admitted
// once the replica stopped.
func TestStopRacesWrites(t *testing.T) {
	ctx := context.Background()
	g := newRig(t, noFaults())
	var stopped atomic.Bool
	type result struct {
		row          string
		err          error
		afterStopped bool // begun after Stop returned
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	// count returns how many writes ended with ok (nil error, or refused
	// after the stop).
	count := func(ok func(result) bool) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if ok(r) {
				n++
			}
		}
		return n
	}
	atLeast := func(n int, what string, ok func(result) bool) func() error {
		return func() error {
			if got := count(ok); got < n {
				return fmt.Errorf("%d %s so far", got, what)
			}
			return nil
		}
	}
	quit := make(chan struct{})
	for w, k := range writeKinds {
		for c := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-quit:
						return
					default:
					}
					row := fmt.Sprintf("w%d-%d-%05d", w, c, i)
					after := stopped.Load()
					err := k.write(ctx, g.rep, row)
					mu.Lock()
					results = append(results, result{row, err, after})
					mu.Unlock()
				}
			}()
		}
	}
	wait.For(t, 30*time.Second, "writes acknowledged before the stop",
		atLeast(100, "acknowledged", func(r result) bool { return r.err == nil }))
	g.rep.Stop()
	stopped.Store(true)
	atStop, n := g.loggedRows(t)
	wait.For(t, 30*time.Second, "writes begun after the stop",
		atLeast(100, "begun after the stop", func(r result) bool { return r.afterStopped }))
	close(quit)
	wg.Wait()

	acked, refusedAfter := 0, 0
	for _, r := range results {
		switch {
		case r.err == nil:
			acked++
			if _, ok := atStop[r.row]; !ok {
				t.Errorf("write of %s was acknowledged but was not in the log when Stop returned", r.row)
			}
			if r.afterStopped {
				t.Errorf("write of %s, begun after Stop returned, was acknowledged", r.row)
			}
		case r.afterStopped:
			if !errors.Is(r.err, replica.ErrNotServing) {
				t.Errorf("write of %s, begun after Stop returned: %v, want ErrNotServing", r.row, r.err)
			}
			refusedAfter++
		case !errors.Is(r.err, replica.ErrNotServing):
			t.Errorf("write of %s: %v", r.row, r.err)
		}
	}
	if _, after := g.loggedRows(t); after != n {
		t.Errorf("the log held %d records when Stop returned and %d later: a write was admitted after Stop", n, after)
	}
	if acked == 0 || refusedAfter == 0 {
		t.Fatalf("%d writes acknowledged, %d refused after the stop: the test needs both", acked, refusedAfter)
	}
	t.Logf("%d writes acknowledged before the stop, %d refused after it", acked, refusedAfter)
}

// heldWrite starts a write of row "held" on a new rig and returns once it
// was admitted and logged, with its WAL fdatasync held until
// hold.release is closed; its result comes on the channel.
func heldWrite(t *testing.T) (*rig, *holdOnce, <-chan error) {
	hold := newHoldOnce(errorfs.OpSync, "/wal/")
	g := newRig(t, hold)
	hold.armed.Store(true)
	res := make(chan error, 1)
	go func() { res <- g.rep.Write(context.Background(), put("held", "v")) }()
	<-hold.entered
	return g, hold, res
}

// TestStopWaitsForAdmittedWrite: a write admitted before Stop, held in
// its WAL fdatasync, is logged, applied and acknowledged, and Stop returns
// only after it applied: the tserver takes a tablet out of its heartbeat
// (and the master gives it to another tserver, which replays the log)
// only after its last write is done.
func TestStopWaitsForAdmittedWrite(t *testing.T) {
	g, hold, res := heldWrite(t)
	ctx := context.Background()
	appliedAtStop := make(chan bool, 1)
	go func() {
		g.rep.Stop()
		_, found, err := g.tb.Get(ctx, []byte("held"), tablet.ReadOptions{})
		appliedAtStop <- found && err == nil
	}()
	wait.For(t, 30*time.Second, "Stop to begin", func() error {
		if g.rep.Serving() {
			return errors.New("still serving")
		}
		return nil
	})
	// A Stop that does not wait for the write returns now, before it applied.
	select {
	case applied := <-appliedAtStop:
		appliedAtStop <- applied
	case <-time.After(100 * time.Millisecond):
	}
	close(hold.release)
	if err := <-res; err != nil {
		t.Fatalf("the write admitted before Stop: %v, want it acknowledged", err)
	}
	if !<-appliedAtStop {
		t.Fatal("Stop returned before the write it admitted was applied")
	}
	if err := g.rep.Write(ctx, put("later", "v")); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("write after Stop: %v, want ErrNotServing", err)
	}
}

// recordingMeta is a Metadata that accepts every update and records the
// tablets it named.
type recordingMeta struct {
	mu  sync.Mutex
	got []string
}

func (m *recordingMeta) Commit(_ context.Context, ups []checkpoint.Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range ups {
		m.got = append(m.got, u.TabletID)
	}
	return nil
}

func (m *recordingMeta) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.got
}

// TestFenceWritesKeepsReads: a handoff's fence waits for the write it
// admitted, refuses every later write (a plain one and a
// read-modify-write alike) as not served here, and leaves the replica
// serving reads and taking part in checkpoints (its load can still be
// held).
func TestFenceWritesKeepsReads(t *testing.T) {
	g, hold, res := heldWrite(t)
	ctx := context.Background()
	fenced := make(chan struct{})
	go func() { g.rep.FenceWrites(); close(fenced) }()
	select {
	case <-fenced:
		t.Fatal("FenceWrites returned while an admitted write was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(hold.release)
	if err := <-res; err != nil {
		t.Fatalf("the write admitted before the fence: %v, want it acknowledged", err)
	}
	<-fenced
	if err := g.rep.Write(ctx, put("later", "v")); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("write after the fence: %v, want ErrNotServing", err)
	}
	if _, err := g.rep.ReadModifyWrite(ctx, []byte("held"), []replica.Rule{{Family: "cf", Qualifier: []byte("n"), Increment: true, Delta: 1}}); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("increment after the fence: %v, want ErrNotServing", err)
	}
	if !g.rep.Serving() {
		t.Fatal("the fenced replica does not serve")
	}
	if !g.visible(t, "held", "v") {
		t.Fatal("read after the fence: the acknowledged write is not there")
	}
	release, ok := g.rep.Hold()
	if !ok {
		t.Fatal("the fenced replica's load cannot be held: a checkpoint could not flush it")
	}
	release()
}
