package master

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

func TestPlanAssignSpread(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := 0; round < 50; round++ {
		n := 1 + rng.IntN(8)
		var live []string
		counts := map[string]int{}
		for i := 0; i < n; i++ {
			u := fmt.Sprintf("ts%d", i)
			live = append(live, u)
		}
		var ids []string
		for i := 0; i < rng.IntN(500); i++ {
			ids = append(ids, fmt.Sprintf("t%d", i))
		}
		plan := planAssign(ids, live, counts)
		if len(plan) != len(ids) {
			t.Fatalf("planned %d of %d", len(plan), len(ids))
		}
		lo, hi := len(ids), 0
		for _, u := range live {
			lo, hi = min(lo, counts[u]), max(hi, counts[u])
		}
		if hi-lo > 1 {
			t.Fatalf("round %d: %d tablets over %d tservers: counts %v", round, len(ids), n, counts)
		}
	}
}

func TestPlanMovesBounded(t *testing.T) {
	live := []string{"a", "b", "c", "d"}
	counts := map[string]int{"a": 30, "b": 30, "c": 30, "d": 0}
	movable := map[string][]string{}
	for _, u := range live[:3] {
		for i := 0; i < 30; i++ {
			movable[u] = append(movable[u], fmt.Sprintf("%s%d", u, i))
		}
	}
	moves := planMoves(movable, live, live, counts, 5)
	if len(moves) != 5 {
		t.Fatalf("%d moves, want the budget of 5", len(moves))
	}
	for _, mv := range moves {
		if mv.to != "d" {
			t.Errorf("move %v not to the empty tserver", mv)
		}
	}
	moves = planMoves(movable, live, live, counts, 100)
	lo, hi := 1000, 0
	for _, u := range live {
		lo, hi = min(lo, counts[u]), max(hi, counts[u])
	}
	if hi-lo > 1 {
		t.Fatalf("after rebalancing counts %v", counts)
	}
}

// fleet starts n fake tservers against the cluster.
func fleet(t *testing.T, cl *client, o *owners, n int, every time.Duration) []*fakeTS {
	t.Helper()
	var out []*fakeTS
	for i := 0; i < n; i++ {
		f := newFakeTS(t, fmt.Sprintf("ts%d", i), cl, o)
		f.deltas = i%2 == 1 // a mixed fleet: full heartbeats (as before deltas) and deltas
		f.start(every)
		out = append(out, f)
	}
	return out
}

// servedFleet starts one master (tweak adjusts its config), n fake
// tservers heartbeating every 50 ms, and table "t" of tablets tablets, and
// waits until every tablet serves.
func servedFleet(t *testing.T, tweak func(*Config), n, tablets int) (*cluster, *client, pb.MasterClient, *owners) {
	t.Helper()
	c := startCluster(t, 1, tweak)
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	o := newOwners()
	fleet(t, cl, o, n, 50*time.Millisecond)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(tablets - 1)}); err != nil {
		t.Fatal(err)
	}
	servingCounts(t, mc, "t", tablets)
	return c, cl, mc, o
}

// watchMoves calls see with the leader's moves in flight, under its lock,
// every 2 ms until stop is called; see's effects are visible after stop.
func watchMoves(t *testing.T, c *cluster, see func(map[string]*move)) (stop func()) {
	t.Helper()
	ls, err := c.masters[0].ready()
	if err != nil {
		t.Fatal(err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			ls.mu.Lock()
			see(ls.moves)
			ls.mu.Unlock()
		}
	}()
	return func() { close(done); <-stopped }
}

// waitEven waits until the tablets of table "t" are spread evenly over
// the tservers named.
func waitEven(t *testing.T, mc pb.MasterClient, tablets int, tservers ...string) {
	t.Helper()
	wait.For(t, 30*time.Second, fmt.Sprintf("rebalanced to %d each", tablets/len(tservers)), func() error {
		counts := servingCounts(t, mc, "t", tablets)
		for _, u := range tservers {
			if counts[u] != tablets/len(tservers) {
				return fmt.Errorf("tablets per tserver %v", counts)
			}
		}
		return nil
	})
}

// servingCounts waits until every tablet of table is SERVING and returns
// the count per tserver.
func servingCounts(t *testing.T, mc pb.MasterClient, table string, want int) map[string]int {
	t.Helper()
	var counts map[string]int
	wait.For(t, 30*time.Second, fmt.Sprintf("%d tablets of %s serving", want, table), func() error {
		l, err := mc.GetTableLocations(context.Background(), &pb.GetTableLocationsRequest{Table: table})
		if err != nil {
			return err
		}
		if len(l.Locations) != want {
			return fmt.Errorf("%d tablets", len(l.Locations))
		}
		counts = map[string]int{}
		for _, x := range l.Locations {
			if x.State != pb.TabletState_TABLET_STATE_SERVING || x.TserverAddress == "" {
				return fmt.Errorf("tablet %s %v at %q", x.TabletId, x.State, x.TserverAddress)
			}
			counts[x.TserverUuid]++
		}
		return nil
	})
	return counts
}

func TestAssignmentSpread100Over4(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	o := newOwners()
	fl := fleet(t, cl, o, 4, 50*time.Millisecond)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(99)}); err != nil {
		t.Fatal(err)
	}
	counts := servingCounts(t, mc, "t", 100)
	for _, f := range fl {
		if n := counts[f.uuid]; n < 24 || n > 26 {
			t.Errorf("tserver %s has %d tablets, want 25±1 (all: %v)", f.uuid, n, counts)
		}
		// The fake serves once its load report's answer arrives, just after
		// the metadata says SERVING.
		wait.For(t, 5*time.Second, "tserver "+f.uuid+" serving what the metadata says", func() error {
			return servingN(f, counts[f.uuid])
		})
	}
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6: %v", o.violations)
	}
}

func TestDeadTServerTabletsReassigned(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	o := newOwners()
	fl := fleet(t, cl, o, 3, 50*time.Millisecond)
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(29)}); err != nil {
		t.Fatal(err)
	}
	servingCounts(t, mc, "t", 30)
	before, err := mc.GetTableLocations(context.Background(), &pb.GetTableLocationsRequest{Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	victim := fl[0]
	lost := map[string]int64{}
	for _, l := range before.Locations {
		if l.TserverUuid == victim.uuid {
			lost[l.TabletId] = l.Epoch
		}
	}
	began := time.Now()
	victim.stop()
	counts := map[string]int{}
	wait.For(t, 20*time.Second, "the dead tserver's tablets serving elsewhere", func() error {
		l, err := mc.GetTableLocations(context.Background(), &pb.GetTableLocationsRequest{Table: "t"})
		if err != nil {
			return err
		}
		counts = map[string]int{}
		for _, x := range l.Locations {
			if x.State != pb.TabletState_TABLET_STATE_SERVING || x.TserverUuid == victim.uuid {
				return fmt.Errorf("tablet %s %v on %s", x.TabletId, x.State, x.TserverUuid)
			}
			if ep, ok := lost[x.TabletId]; ok && x.Epoch <= ep {
				t.Fatalf("tablet %s reassigned without a new epoch (%d → %d)", x.TabletId, ep, x.Epoch)
			}
			counts[x.TserverUuid]++
		}
		return nil
	})
	t.Logf("dead tserver's %d tablets serving elsewhere after %v (lease %v + margin %v)", len(lost), time.Since(began),
		testConfig("", "").Lease, testConfig("", "").DeadMargin)
	if counts[fl[1].uuid] != 15 || counts[fl[2].uuid] != 15 {
		t.Errorf("after reassignment counts %v, want 15/15", counts)
	}
	ts, err := mc.ListTServers(context.Background(), &pb.ListTServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts.Tservers {
		if x.Live == (x.Uuid == victim.uuid) {
			t.Errorf("tserver %s live=%v", x.Uuid, x.Live)
		}
	}
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6: %v", o.violations)
	}
}

func TestRebalanceOnJoin(t *testing.T) {
	t.Parallel()
	const maxMoves = 3
	c, cl, mc, o := servedFleet(t, func(cfg *Config) { cfg.MaxMoves = maxMoves }, 3, 36)

	// Watch the moves in flight while the fourth tserver joins.
	m := 0
	stop := watchMoves(t, c, func(moves map[string]*move) { m = max(m, len(moves)) })
	newFakeTS(t, "ts9", cl, o).start(50 * time.Millisecond)
	waitEven(t, mc, 36, "ts0", "ts1", "ts2", "ts9")
	stop()
	if m > maxMoves || m == 0 {
		t.Errorf("at most %d moves were in flight, want 1..%d", m, maxMoves)
	}
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6 (a move made two owners): %v", o.violations)
	}
}

// TestRebalanceWarmupAndBudget: a tserver that registers takes no tablet
// from the others during Config.RebalanceWarmup, then takes them at most
// MovesPerInterval per MoveInterval (the real leader loop and
// RegisterTServer; testdata/planning/comeback has the planning's cases).
func TestRebalanceWarmupAndBudget(t *testing.T) {
	t.Parallel()
	const (
		warmup   = 1500 * time.Millisecond
		perIntv  = 2
		interval = 400 * time.Millisecond
	)
	c, cl, mc, o := servedFleet(t, func(cfg *Config) {
		cfg.RebalanceWarmup, cfg.MovesPerInterval, cfg.MoveInterval = warmup, perIntv, interval
	}, 3, 24)

	// Record when each move starts while the fourth tserver joins.
	seen := map[string]bool{}
	var at []time.Time
	stop := watchMoves(t, c, func(moves map[string]*move) {
		for id := range moves {
			if !seen[id] {
				seen[id] = true
				at = append(at, time.Now())
			}
		}
	})
	joined := time.Now()
	newFakeTS(t, "ts9", cl, o).start(50 * time.Millisecond)
	waitEven(t, mc, 24, "ts0", "ts1", "ts2", "ts9")
	stop()
	if len(at) < 6 {
		t.Fatalf("%d moves seen, want at least 6", len(at))
	}
	if first := at[0].Sub(joined); first < warmup {
		t.Errorf("the first move started %v after the registration, within the %v warm-up", first, warmup)
	}
	// Starts are seen by sampling, so one may be seen late: count those
	// seen within half an interval of each other (without the bound, all
	// six start in one tick).
	for i := range at {
		n := 0
		for _, s := range at[i:] {
			if s.Sub(at[i]) < interval/2 {
				n++
			}
		}
		if n > perIntv {
			t.Errorf("%d moves started within %v of %v, want at most %d per interval", n, interval/2, at[i].Sub(joined), perIntv)
		}
	}
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6 (a move made two owners): %v", o.violations)
	}
}
