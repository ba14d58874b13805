package master

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// TestMergePolicyPlan: the automatic merger's choice of pairs.
func TestMergePolicyPlan(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	old := now.Add(-time.Hour)
	p := mergePolicy{threshold: 100, maxCombined: 150, minAge: time.Minute, maxPairs: 8}
	tab := func(id string, size int64) mergeTablet {
		return mergeTablet{id: id, size: size, serving: true}
	}
	for _, tc := range []struct {
		name   string
		policy *mergePolicy // nil: p
		tables [][]mergeTablet
		since  map[string]time.Time // nil: every tablet seen small an hour ago
		want   [][2]string
	}{
		{name: "both small and old", tables: [][]mergeTablet{{tab("a", 10), tab("b", 10)}}, want: [][2]string{{"a", "b"}}},
		{name: "one at the threshold", tables: [][]mergeTablet{{tab("a", 10), tab("b", 100)}}},
		{name: "no size report", tables: [][]mergeTablet{{tab("a", 10), tab("b", -1)}}},
		{name: "one seen small too recently", tables: [][]mergeTablet{{tab("a", 10), tab("b", 10)}},
			since: map[string]time.Time{"a": old, "b": now.Add(-time.Second)}},
		{name: "one seen small for the first time", tables: [][]mergeTablet{{tab("a", 10), tab("b", 10)}},
			since: map[string]time.Time{"a": old}},
		{name: "one not serving", tables: [][]mergeTablet{{tab("a", 10), {id: "b", size: 10}}}},
		{name: "one moving", tables: [][]mergeTablet{{tab("a", 10), {id: "b", size: 10, serving: true, moving: true}}}},
		{name: "never across tables", tables: [][]mergeTablet{{tab("a", 10)}, {tab("b", 10)}}},
		{name: "combined size at the bound", tables: [][]mergeTablet{{tab("a", 75), tab("b", 75)}}},
		{name: "combined size too big, the next pair fits",
			tables: [][]mergeTablet{{tab("a", 90), tab("b", 70), tab("c", 60)}}, want: [][2]string{{"b", "c"}}},
		{name: "no combined bound when the tservers do not split",
			policy: &mergePolicy{threshold: 100, minAge: time.Minute, maxPairs: 8},
			tables: [][]mergeTablet{{tab("a", 90), tab("b", 90)}}, want: [][2]string{{"a", "b"}}},
		{name: "disjoint pairs, left to right",
			tables: [][]mergeTablet{{tab("a", 1), tab("b", 1), tab("c", 1), tab("d", 1), tab("e", 1)}},
			want:   [][2]string{{"a", "b"}, {"c", "d"}}},
		{name: "a big tablet breaks the run",
			tables: [][]mergeTablet{{tab("a", 1), tab("b", 500), tab("c", 1), tab("d", 1)}}, want: [][2]string{{"c", "d"}}},
		{name: "several tables",
			tables: [][]mergeTablet{{tab("a", 1), tab("b", 1)}, {tab("c", 1), tab("d", 1)}}, want: [][2]string{{"a", "b"}, {"c", "d"}}},
		{name: "at most maxPairs a pass",
			policy: &mergePolicy{threshold: 100, minAge: time.Minute, maxPairs: 1},
			tables: [][]mergeTablet{{tab("a", 1), tab("b", 1)}, {tab("c", 1), tab("d", 1)}}, want: [][2]string{{"a", "b"}}},
		{name: "auto-merge off (negative threshold)",
			policy: &mergePolicy{threshold: -1, minAge: time.Minute, maxPairs: 8},
			tables: [][]mergeTablet{{tab("a", 0), tab("b", 0)}}},
		// A split's children: a tablet split at the 200-byte split
		// threshold leaves two of about 100 each; with a merge threshold
		// set above ¼ of the split threshold (150 here), they would merge
		// back at once and split again. The combined bound (half the split
		// threshold) keeps them apart.
		{name: "split children are not merged back",
			policy: &mergePolicy{threshold: 150, maxCombined: 100, minAge: time.Minute, maxPairs: 8},
			tables: [][]mergeTablet{{tab("left", 100), tab("right", 101)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := p
			if tc.policy != nil {
				pol = *tc.policy
			}
			since := tc.since
			if since == nil {
				since = map[string]time.Time{}
				for _, ts := range tc.tables {
					for _, x := range ts {
						since[x.id] = old
					}
				}
			}
			got, _ := pol.plan(tc.tables, since, now)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pairs %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMergePolicyClock: a tablet's clock starts when it is first seen
// small, survives a move or a load (it is about the size only) and
// restarts once it is seen big or unreported.
func TestMergePolicyClock(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	p := mergePolicy{threshold: 100, minAge: time.Minute, maxPairs: 8}
	pass := func(since map[string]time.Time, now time.Time, a, b mergeTablet) ([][2]string, map[string]time.Time) {
		return p.plan([][]mergeTablet{{a, b}}, since, now)
	}
	small := func(id string) mergeTablet { return mergeTablet{id: id, size: 1, serving: true} }
	pairs, since := pass(nil, t0, small("a"), small("b"))
	if len(pairs) != 0 || since["a"] != t0 || since["b"] != t0 {
		t.Fatalf("first pass: pairs %v, clock %v", pairs, since)
	}
	// b moves (not serving) half way: its clock keeps running.
	pairs, since = pass(since, t0.Add(30*time.Second), small("a"), mergeTablet{id: "b", size: 1})
	if len(pairs) != 0 || since["b"] != t0 {
		t.Fatalf("while b moves: pairs %v, clock %v", pairs, since)
	}
	pairs, since = pass(since, t0.Add(time.Minute), small("a"), small("b"))
	if !slices.Equal(pairs, [][2]string{{"a", "b"}}) {
		t.Fatalf("after the minimum age: pairs %v", pairs)
	}
	// a grows past the threshold, then shrinks: its clock restarts.
	_, since = pass(since, t0.Add(2*time.Minute), mergeTablet{id: "a", size: 100, serving: true}, small("b"))
	if _, ok := since["a"]; ok {
		t.Fatalf("a big tablet kept its clock: %v", since)
	}
	pairs, since = pass(since, t0.Add(3*time.Minute), small("a"), small("b"))
	if len(pairs) != 0 || since["a"] != t0.Add(3*time.Minute) {
		t.Fatalf("after a shrank: pairs %v, clock %v", pairs, since)
	}
}

// TestMergeThresholdDefaults: the merge threshold follows the split
// threshold the master is told, and so does the combined bound.
func TestMergeThresholdDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		split, merge         int64
		wantMerge, wantBound int64
	}{
		{name: "defaults", wantMerge: 128 << 20, wantBound: 256 << 20},
		{name: "smaller split threshold", split: 64 << 20, wantMerge: 16 << 20, wantBound: 32 << 20},
		{name: "tservers do not split", split: -1, wantMerge: DefaultMergeThreshold},
		{name: "explicit merge threshold", split: 64 << 20, merge: 40 << 20, wantMerge: 40 << 20, wantBound: 32 << 20},
		{name: "auto-merge off", merge: -1, wantMerge: -1, wantBound: 256 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{SplitThreshold: tc.split, MergeThreshold: tc.merge, Logger: testLogger()}
			c.setDefaults()
			p := c.mergePolicy()
			if p.threshold != tc.wantMerge || p.maxCombined != tc.wantBound {
				t.Fatalf("merge threshold %d, combined bound %d; want %d, %d", p.threshold, p.maxCombined, tc.wantMerge, tc.wantBound)
			}
		})
	}
}

// mergeTS is a fake tserver that also serves the Merge RPC on loopback
// gRPC, merging as a tserver does from the master's point of view: it
// allocates an id, reports the merge and loads the merged tablet (its
// size the parents' sum). A pair with a busy tablet (one splitting) is
// refused with ResourceExhausted, as a real tserver refuses it.
type mergeTS struct {
	pb.UnimplementedTServerServer
	*fakeTS

	mmu   sync.Mutex
	busy  map[string]bool
	calls map[[2]string]int // Merge calls by pair
}

func newMergeTS(t *testing.T, uuid string, cl *client, o *owners) *mergeTS {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &mergeTS{fakeTS: newFakeTS(t, uuid, cl, o), busy: map[string]bool{}, calls: map[[2]string]int{}}
	f.addr = lis.Addr().String()
	srv := grpc.NewServer()
	pb.RegisterTServerServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f
}

func (f *mergeTS) setBusy(id string, busy bool) {
	f.mmu.Lock()
	defer f.mmu.Unlock()
	f.busy[id] = busy
}

func (f *mergeTS) callsFor(left, right string) int {
	f.mmu.Lock()
	defer f.mmu.Unlock()
	return f.calls[[2]string{left, right}]
}

func (f *mergeTS) totalCalls() int {
	f.mmu.Lock()
	defer f.mmu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *mergeTS) Merge(ctx context.Context, req *pb.MergeRequest) (*pb.MergeResponse, error) {
	f.mmu.Lock()
	f.calls[[2]string{req.LeftTabletId, req.RightTabletId}]++
	busy := f.busy[req.LeftTabletId] || f.busy[req.RightTabletId]
	f.mmu.Unlock()
	f.mu.Lock()
	le, lok := f.tablets[req.LeftTabletId]
	re, rok := f.tablets[req.RightTabletId]
	size := f.size(req.LeftTabletId) + f.size(req.RightTabletId)
	f.mu.Unlock()
	if !lok || !rok {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, req.LeftTabletId, 0, "fake %s does not serve both of %s and %s", f.uuid, req.LeftTabletId, req.RightTabletId)
	}
	if busy {
		return nil, apierr.ResourceExhausted("tablet %s or %s is splitting; retry later", req.LeftTabletId, req.RightTabletId)
	}
	var merged *pb.TabletMeta
	err := f.cl.do(ctx, func(mc pb.MasterClient) error {
		ids, err := mc.AllocateTabletIds(ctx, &pb.AllocateTabletIdsRequest{Count: 1})
		if err != nil {
			return err
		}
		resp, err := mc.ReportMerge(ctx, &pb.ReportMergeRequest{LeftTabletId: req.LeftTabletId, LeftEpoch: le,
			RightTabletId: req.RightTabletId, RightEpoch: re, TserverUuid: f.uuid, MergedTabletId: ids.TabletIds[0]})
		if err == nil {
			merged = resp.Merged
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range []string{req.LeftTabletId, req.RightTabletId} {
		delete(f.tablets, id)
		f.owners.drop(id, f.uuid)
	}
	// Loaded through the normal load path, as a tserver does.
	f.sizes[merged.TabletId] = size
	f.loading[merged.TabletId] = merged.Epoch
	f.wg.Add(1)
	go f.load(context.Background(), merged.TabletId, merged.Epoch)
	return &pb.MergeResponse{MergedTabletId: merged.TabletId}, nil
}

// setSizes sets the reported sizes of tablets, by tablet id.
func (f *fakeTS) setSizes(sizes map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range sizes {
		f.sizes[id] = n
	}
}

// mergeFleet starts a master with cfg tweaked, two merge-serving fake
// tservers and the tables, each cut by its split keys, and waits until
// every tablet serves; every tablet is reported too big to merge until the
// test sets its size. It returns the tablets of each table in key order.
func mergeFleet(t *testing.T, tweak func(*Config), tables map[string][]string) (*client, []*mergeTS, map[string][]string) {
	t.Helper()
	c := startCluster(t, 1, tweak)
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	o := newOwners()
	var fl []*mergeTS
	for i := 0; i < 2; i++ {
		f := newMergeTS(t, fmt.Sprintf("ts%d", i), cl, o)
		f.other = 1 << 40 // nothing is small until the test sets sizes
		f.start(20 * time.Millisecond)
		fl = append(fl, f)
	}
	ids := map[string][]string{}
	for name, keys := range tables {
		var sk [][]byte
		for _, k := range keys {
			sk = append(sk, []byte(k))
		}
		if _, err := cl.at(0).CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema(name, "cf"), SplitKeys: sk}); err != nil {
			t.Fatal(err)
		}
		servingCounts(t, cl.at(0), name, len(keys)+1)
		ids[name] = tabletIDs(t, cl, name)
	}
	t.Cleanup(func() {
		if len(o.violations) > 0 {
			t.Errorf("invariant 6: %v", o.violations)
		}
	})
	return cl, fl, ids
}

// tabletIDs lists the table's tablets in key order.
func tabletIDs(t *testing.T, cl *client, table string) []string {
	t.Helper()
	l, err := cl.at(0).GetTableLocations(ctxT(t, 10*time.Second), &pb.GetTableLocationsRequest{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range l.Locations {
		out = append(out, x.TabletId)
	}
	return out
}

// TestAutoMergeWithFakeTServers runs the automatic merger against two
// fake tservers that serve the Merge RPC. Table a's tablets, by size:
// 100 100 300 300 100 100, with a merge threshold of 500 and a split
// threshold of 1000 (so no merge makes a tablet of 500 or more); table b's
// two small tablets are refused as splitting throughout, which counts the
// passes. The first pair merges (moving one first when they are on two
// tservers); 200+300 and 300+300 are too big together; the pair 300+100
// merges only once its tablet stops splitting; the merged 400 and the
// last 100 do not merge; a's last tablet never merges with b's first.
func TestAutoMergeWithFakeTServers(t *testing.T) {
	t.Parallel()
	_, fl, ids := mergeFleet(t, func(c *Config) {
		c.SplitThreshold, c.MergeThreshold = 1000, 500
		c.MergeCheckInterval, c.MergeMinAge = 20*time.Millisecond, time.Millisecond
	}, map[string][]string{"a": {"b", "c", "d", "e", "f"}, "b": {"m"}})
	a, b := ids["a"], ids["b"]
	sizes := map[string]int64{a[0]: 100, a[1]: 100, a[2]: 300, a[3]: 300, a[4]: 100, a[5]: 100, b[0]: 10, b[1]: 10}
	for _, f := range fl {
		f.setSizes(sizes)
		f.setBusy(a[4], true)
		f.setBusy(b[0], true)
	}
	calls := func(left, right string) int {
		n := 0
		for _, f := range fl {
			n += f.callsFor(left, right)
		}
		return n
	}
	cl := fl[0].cl
	wait.For(t, 30*time.Second, "a's first two tablets merged, and 5 passes refused on b", func() error {
		ts := tabletIDs(t, cl, "a")
		if len(ts) == 5 && ts[1] == a[2] && calls(b[0], b[1]) >= 5 {
			return nil
		}
		return fmt.Errorf("table a %v (was %v), %d refusals of b", ts, a, calls(b[0], b[1]))
	})
	if n := calls(a[3], a[4]); n == 0 {
		t.Fatalf("the pair %s+%s (300+100) was never tried", a[3], a[4])
	}
	if ts := tabletIDs(t, cl, "a"); !slices.Equal(ts[1:], a[2:]) {
		t.Fatalf("table a %v, want the merged tablet then %v: a busy or too big pair merged", ts, a[2:])
	}
	for _, f := range fl {
		f.setBusy(a[4], false)
	}
	var merged string
	wait.For(t, 30*time.Second, "300+100 merged once not splitting", func() error {
		ts := tabletIDs(t, cl, "a")
		if len(ts) != 4 || ts[3] != a[5] {
			return fmt.Errorf("table a %v", ts)
		}
		merged = ts[2]
		return nil
	})
	// Five more passes (b's refusals count them) change nothing: every
	// remaining pair sums to 500 or more.
	seen := calls(b[0], b[1])
	wait.For(t, 30*time.Second, "5 more passes", func() error {
		if n := calls(b[0], b[1]); n < seen+5 {
			return fmt.Errorf("%d refusals of b, %d before", n, seen)
		}
		return nil
	})
	ts := tabletIDs(t, cl, "a")
	if len(ts) != 4 || ts[1] != a[2] || ts[2] != merged || ts[3] != a[5] {
		t.Fatalf("table a %v after more passes, want [merged %s %s %s]", ts, a[2], merged, a[5])
	}
	for _, pair := range [][2]string{{ts[0], a[2]}, {a[2], merged}, {merged, a[5]}, {a[5], b[0]}} {
		if n := calls(pair[0], pair[1]); n != 0 {
			t.Errorf("pair %s+%s, too big together or of two tables, was asked to merge %d times", pair[0], pair[1], n)
		}
	}
	if got := tabletIDs(t, cl, "b"); !slices.Equal(got, b) {
		t.Fatalf("table b %v, want %v: a splitting tablet merged", got, b)
	}
}

// TestAutoMergeOff: with the automatic merger off (a negative threshold,
// --auto-merge=false) small tablets stay; MergeTablets still merges.
func TestAutoMergeOff(t *testing.T) {
	t.Parallel()
	cl, fl, ids := mergeFleet(t, func(c *Config) {
		c.MergeThreshold, c.MergeCheckInterval, c.MergeMinAge = -1, 10*time.Millisecond, time.Millisecond
	}, map[string][]string{"a": {"b"}})
	for _, f := range fl {
		f.setSizes(map[string]int64{ids["a"][0]: 100, ids["a"][1]: 100})
	}
	wait.For(t, 10*time.Second, "both tablets served", func() error {
		n := 0
		for _, f := range fl {
			n += len(f.serving())
		}
		if n != 2 {
			return fmt.Errorf("%d tablets served", n)
		}
		return nil
	})
	// Fifty check intervals: an automatic merger would have merged the
	// two 100-byte tablets by now.
	time.Sleep(50 * 10 * time.Millisecond)
	for _, f := range fl {
		if n := f.totalCalls(); n != 0 {
			t.Fatalf("fake %s was asked to merge %d times with the merger off", f.uuid, n)
		}
	}
	resp, err := cl.at(0).MergeTablets(ctxT(t, 30*time.Second), &pb.MergeTabletsRequest{Table: "a", Row: []byte("a")})
	if err != nil {
		t.Fatalf("MergeTablets with the merger off: %v", err)
	}
	if got := tabletIDs(t, cl, "a"); !slices.Equal(got, []string{resp.MergedTabletId}) || slices.Contains(ids["a"], resp.MergedTabletId) {
		t.Fatalf("table a is %v after MergeTablets, want only the new tablet %s (was %v)", got, resp.MergedTabletId, ids["a"])
	}
}

// TestStartMergeMoveKeepsHeldTablet: of a pair, the tablet a merge just
// moved stays and the other moves, whatever the counts; without a hold
// the tablet on the fuller tserver moves.
func TestStartMergeMoveKeepsHeldTablet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		held   []string
		counts [2]int
		want   string // the tablet moved
	}{
		{name: "no hold, left fuller", counts: [2]int{5, 3}, want: "L"},
		{name: "no hold, right fuller", counts: [2]int{3, 5}, want: "R"},
		{name: "left held", held: []string{"L"}, counts: [2]int{5, 3}, want: "R"},
		{name: "right held", held: []string{"R"}, counts: [2]int{3, 5}, want: "L"},
		{name: "both held", held: []string{"L", "R"}, counts: [2]int{5, 3}, want: "L"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			ls := &leaderState{m: &Master{log: testLogger(), cfg: Config{Lease: time.Minute}}, moves: map[string]*move{},
				leases: map[string]*lease{"a": newLease("a", 1, now), "b": newLease("b", 1, now)}}
			ls.merge.held = map[string]time.Time{}
			for _, id := range tc.held {
				ls.merge.held[id] = now.Add(time.Minute)
			}
			ls.startMergeMove(&pb.TabletMeta{TabletId: "L", TserverUuid: "a", Epoch: 1}, &pb.TabletMeta{TabletId: "R", TserverUuid: "b", Epoch: 1}, tc.counts)
			if len(ls.moves) != 1 || ls.moves[tc.want] == nil {
				t.Fatalf("moves %v, want one of %s", ls.moves, tc.want)
			}
			if mv := ls.moves[tc.want]; !mv.merge || mv.to == mv.from {
				t.Fatalf("move %+v: want a merge move to the other tserver", *mv)
			}
		})
	}
}
