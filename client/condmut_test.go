package client_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
)

// valueIs is the predicate "the latest cell of family:column holds v".
func valueIs(column, v string) client.Filter {
	return client.ChainFilters(client.ColumnFilter(regexp.QuoteMeta(column)), client.LatestNFilter(1),
		client.ValueFilter(regexp.QuoteMeta(v)))
}

func setMut(ts int64, kv ...string) *client.Mutation {
	m := client.NewMutation()
	for i := 0; i < len(kv); i += 2 {
		fam, col, _ := strings.Cut(kv[i], ":")
		m.Set(fam, col, ts, []byte(kv[i+1]))
	}
	return m
}

// contractCondMutation: a conditional mutation applies its true mutation
// when the predicate yields a cell of the row, else its false one, and
// reports which through GetCondMutationResult; bad input is
// InvalidArgument and writes nothing.
func contractCondMutation(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "condmut", "m")
	ctx := ctxT(t)
	delRow := client.NewMutation()
	delRow.DeleteRow()
	delRow.Set("cf", "c", 7, []byte("3"))
	delCol := client.NewMutation()
	delCol.DeleteCellsInColumn("cf", "a")
	older := setMut(1, "cf:lock", "free")
	older.Set("cf", "lock", 2, []byte("busy"))
	cases := []struct {
		name    string
		row     string
		setup   *client.Mutation
		cond    client.Filter
		mtrue   *client.Mutation
		mfalse  *client.Mutation
		matched bool
		want    string
	}{
		{"nil predicate on a missing row", "a1", nil, nil, setMut(5, "cf:a", "t"), setMut(5, "cf:a", "f"), false, "cf:a@5=f"},
		{"nil predicate on a row with a cell", "a2", setMut(1, "meta:x", "1"), nil, setMut(5, "cf:a", "t"), setMut(5, "cf:a", "f"), true, "cf:a@5=t meta:x@1=1"},
		{"value matches (second tablet)", "z1", setMut(1, "cf:lock", "free"), valueIs("lock", "free"), setMut(5, "cf:lock", "me"), nil, true, "cf:lock@5=me cf:lock@1=free"},
		{"value differs", "z2", setMut(1, "cf:lock", "you"), valueIs("lock", "free"), setMut(5, "cf:lock", "me"), nil, false, "cf:lock@1=you"},
		{"only an older version matches", "a3", older, valueIs("lock", "free"), setMut(5, "cf:lock", "me"), setMut(6, "cf:seen", "busy"), false, "cf:lock@2=busy cf:lock@1=free cf:seen@6=busy"},
		{"the predicate sees every family", "a4", setMut(1, "meta:x", "1"), client.FamilyFilter("meta"), setMut(5, "cf:a", "t"), nil, true, "cf:a@5=t meta:x@1=1"},
		{"a label does not matter", "a5", setMut(1, "cf:a", "1"), client.LabelFilter("l"), setMut(5, "cf:b", "t"), nil, true, "cf:a@1=1 cf:b@5=t"},
		{"block all never matches", "a6", setMut(1, "cf:a", "1"), client.BlockAllFilter(), setMut(5, "cf:b", "t"), setMut(5, "cf:b", "f"), false, "cf:a@1=1 cf:b@5=f"},
		{"true mutation deletes the row and sets", "z3", setMut(1, "cf:a", "1", "meta:x", "2"), client.ColumnFilter("x"), delRow, nil, true, "cf:c@7=3"},
		{"false mutation deletes a column", "z4", setMut(1, "cf:a", "1", "cf:b", "2"), client.ColumnFilter("zz"), nil, delCol, false, "cf:b@1=2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				if err := tbl.Apply(ctx, tc.row, tc.setup); err != nil {
					t.Fatal(err)
				}
			}
			matched := !tc.matched
			if err := tbl.Apply(ctx, tc.row, client.NewCondMutation(tc.cond, tc.mtrue, tc.mfalse), client.GetCondMutationResult(&matched)); err != nil {
				t.Fatal(err)
			}
			if matched != tc.matched {
				t.Errorf("matched %v, want %v", matched, tc.matched)
			}
			r, err := tbl.Get(ctx, tc.row)
			if err != nil {
				t.Fatal(err)
			}
			if got := cellString(r); got != tc.want {
				t.Errorf("row %s, want %s", got, tc.want)
			}
		})
	}

	if err := tbl.Apply(ctx, "bad", setMut(1, "cf:a", "keep")); err != nil {
		t.Fatal(err)
	}
	unknown := setMut(5, "nofam:a", "x")
	nested := client.NewCondMutation(nil, setMut(5, "cf:a", "x"), nil)
	for _, tc := range []struct {
		name string
		m    *client.Mutation
		want string
	}{
		{"neither mutation", client.NewCondMutation(nil, nil, nil), "neither"},
		{"empty mutations", client.NewCondMutation(nil, client.NewMutation(), client.NewMutation()), "neither"},
		{"unknown family in the chosen mutation", client.NewCondMutation(nil, unknown, nil), "nofam"},
		{"unknown family in the other mutation", client.NewCondMutation(nil, setMut(5, "cf:a", "x"), unknown), "nofam"},
		{"bad predicate", client.NewCondMutation(client.ValueFilter("a("), setMut(5, "cf:a", "x"), nil), "does not compile"},
		{"nested", client.NewCondMutation(nil, nested, nil), "nested"},
		{"bad value in a mutation", client.NewCondMutation(nil, setMut(-5, "cf:a", "x"), nil), "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tbl.Apply(ctx, "bad", tc.m)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("apply: %v, want InvalidArgument naming %q", err, tc.want)
			}
			r, err := tbl.Get(ctx, "bad")
			if err != nil || cellString(r) != "cf:a@1=keep" {
				t.Fatalf("row after the refused call: %s, %v", cellString(r), err)
			}
		})
	}
	if _, err := tbl.ApplyBulk(ctx, []string{"bad"}, []*client.Mutation{client.NewCondMutation(nil, setMut(5, "cf:a", "x"), nil)}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ApplyBulk of a conditional mutation: %v, want InvalidArgument", err)
	}
	// The tserver itself refuses neither list and more than 100000.
	tablets, err := c.Tablets(ctx, "condmut")
	if err != nil {
		t.Fatal(err)
	}
	ts := rawTServer(t, tablets[0].TServer)
	many := make([]*pb.Mutation, 100001)
	for i := range many {
		many[i] = &pb.Mutation{Mutation: &pb.Mutation_DeleteFromRow_{DeleteFromRow: &pb.Mutation_DeleteFromRow{}}}
	}
	for _, req := range []*pb.CheckAndMutateRowRequest{
		{RowKey: []byte("bad")},
		{RowKey: []byte("bad"), TrueMutations: many[:50001], FalseMutations: many[50001:]},
	} {
		req.TabletId, req.Epoch = tablets[0].ID, tablets[0].Epoch
		if _, err := ts.CheckAndMutateRow(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("CheckAndMutateRow with %d+%d mutations: %v, want InvalidArgument", len(req.TrueMutations), len(req.FalseMutations), err)
		}
	}
}

// TestCondMutationRetryRules: a conditional mutation is retried after a
// routing error (nothing was applied), never after a failure once it may
// have been applied, and never coalesced into a MutateRows.
func TestCondMutationRetryRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     clienttest.Fault
		wantErr   codes.Code
		wantCalls int
	}{
		{"routing error is retried", clienttest.Fault{Method: "CheckAndMutateRow",
			Err: apierr.Tablet(pb.TabletError_NOT_SERVING, "t1", 1, "moved")}, codes.OK, 2},
		{"lost reply after the write is not retried", clienttest.Fault{Method: "CheckAndMutateRow", Applied: true,
			Err: apierr.Unavailable("connection reset after the write")}, codes.Unavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, _, tbl := setup(t, clienttest.Options{})
			ctx := ctxT(t)
			fc.Inject(tc.fault)
			err := tbl.Apply(ctx, "r", client.NewCondMutation(nil, nil, setMut(5, "cf:n", "1")))
			if status.Code(err) != tc.wantErr {
				t.Fatalf("apply: %v, want %v", err, tc.wantErr)
			}
			if got := fc.Calls("CheckAndMutateRow"); got != tc.wantCalls {
				t.Errorf("%d CheckAndMutateRow calls, want %d", got, tc.wantCalls)
			}
		})
	}
	t.Run("not coalesced", func(t *testing.T) {
		fc, _, _ := setup(t, clienttest.Options{})
		ctx := ctxT(t)
		c, err := client.Dial(ctx, fc.MasterAddrs(), client.WithWriteCoalescing(true))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tbl, err := c.Open(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		var matched bool
		if err := tbl.Apply(ctx, "r", client.NewCondMutation(nil, nil, setMut(5, "cf:n", "1")), client.GetCondMutationResult(&matched)); err != nil {
			t.Fatal(err)
		}
		if fc.Calls("CheckAndMutateRow") != 1 || fc.Calls("MutateRows") != 0 || fc.Calls("MutateRow") != 0 {
			t.Errorf("calls: CheckAndMutateRow %d, MutateRows %d, MutateRow %d; want 1, 0, 0",
				fc.Calls("CheckAndMutateRow"), fc.Calls("MutateRows"), fc.Calls("MutateRow"))
		}
	})
}

// casRounds runs n goroutines that each try rounds 1..m of a
// compare-and-set on row's cf:v (round k: if the latest v is k-1, set it
// to k) and returns, per round, how many acknowledged winners it had.
func casRounds(t *testing.T, ctx context.Context, tbl *client.Table, row string, n, m int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	wins := map[int]int{}
	var wg sync.WaitGroup
	var failed atomic.Value
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1; k <= m; k++ {
				var won bool
				cm := client.NewCondMutation(valueIs("v", strconv.Itoa(k-1)), setMut(client.ServerTime, "cf:v", strconv.Itoa(k)), nil)
				if err := tbl.Apply(ctx, row, cm, client.GetCondMutationResult(&won)); err != nil {
					failed.Store(err)
					return
				}
				if won {
					mu.Lock()
					wins[k]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
	return wins
}

// TestCondMutationCompareAndSet: through the real servers, goroutines
// race through rounds of compare-and-set on one row; every round has
// exactly one winner and the row ends at the last round.
func TestCondMutationCompareAndSet(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	_, tbl := rmwTable(t, c, ctx)
	if err := tbl.Apply(ctx, "lock", setMut(client.ServerTime, "cf:v", "0")); err != nil {
		t.Fatal(err)
	}
	const n, m = 6, 30
	wins := casRounds(t, ctx, tbl, "lock", n, m)
	for k := 1; k <= m; k++ {
		if wins[k] != 1 {
			t.Errorf("round %d had %d winners, want 1", k, wins[k])
		}
	}
	r, err := tbl.Get(ctx, "lock", client.LatestN(1))
	if v, _ := r.Value("cf", "v"); err != nil || string(v) != strconv.Itoa(m) {
		t.Errorf("row ends at %q, %v; want %d", v, err, m)
	}
}

// TestCondMutationAcrossFailures: compare-and-set rounds run while the
// row's tserver restarts, while its tablet splits at the row, and while
// the tserver stops for good (failover). Each round has at most one
// acknowledged winner, and the row's value lies between the acknowledged
// wins and the acknowledged wins plus the calls of unknown outcome.
func TestCondMutationAcrossFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts, splits and fails over tservers: not in the fast loop (-short)")
	}
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 2, Lease: time.Second})
	ctx := ctxT(t)
	cl, tbl := rmwTable(t, c, ctx)
	const row = "lock"
	if err := tbl.Apply(ctx, row, setMut(client.ServerTime, "cf:v", "0")); err != nil {
		t.Fatal(err)
	}
	holder := func() int {
		tablets, err := cl.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tablets {
			if tb.StartRow <= row && (tb.EndRow == "" || row < tb.EndRow) {
				for _, i := range c.Running() {
					if c.TServerAddr(i) == tb.TServer {
						return i
					}
				}
			}
		}
		t.Fatalf("no running tserver serves row %q", row)
		return -1
	}
	current := func() int {
		r, err := tbl.Get(ctx, row, client.LatestN(1))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := r.Value("cf", "v")
		n, err := strconv.Atoi(string(v))
		if err != nil {
			t.Fatalf("row holds %q", v)
		}
		return n
	}
	for _, stage := range []string{"restart", "split", "failover"} {
		const workers, tries = 4, 40
		var mu sync.Mutex
		wins := map[int]int{}
		var acked, unknown, attempts atomic.Int64
		var wg sync.WaitGroup
		base := current()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range tries {
					r, err := tbl.Get(ctx, row, client.LatestN(1))
					if err != nil {
						continue
					}
					v, _ := r.Value("cf", "v")
					k, _ := strconv.Atoi(string(v))
					var won bool
					cm := client.NewCondMutation(valueIs("v", strconv.Itoa(k)), setMut(client.ServerTime, "cf:v", strconv.Itoa(k+1)), nil)
					attempts.Add(1)
					if err := tbl.Apply(ctx, row, cm, client.GetCondMutationResult(&won)); err != nil {
						unknown.Add(1)
						continue
					}
					if won {
						acked.Add(1)
						mu.Lock()
						wins[k+1]++
						mu.Unlock()
					}
				}
			}()
		}
		_ = wait.Until(ctx, func() error { // a done ctx fails what follows
			if attempts.Load() < workers*tries/4 {
				return errors.New("too few attempts")
			}
			return nil
		})
		var err error
		switch stage {
		case "restart":
			err = c.RestartTServer(holder())
		case "split":
			err = cl.SplitTablet(ctx, "t", row)
		case "failover":
			err = c.StopTServer(holder())
		}
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		wg.Wait()
		got := int64(current() - base)
		a, u := acked.Load(), unknown.Load()
		t.Logf("%s: value +%d, acknowledged wins %d, unknown %d", stage, got, a, u)
		for k, w := range wins {
			if w > 1 {
				t.Errorf("%s: round %d had %d acknowledged winners", stage, k, w)
			}
		}
		if got < a || got > a+u {
			t.Fatalf("%s: value grew by %d, want within [acknowledged %d, acknowledged+unknown %d]", stage, got, a, a+u)
		}
	}
}
