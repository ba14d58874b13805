package client_test

import (
	"fmt"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
)

// TestFollowsRealSplitsAndFailover: the client follows what the real
// servers do to a table under it — two splits, then a tserver stopped for
// good whose tablets the master moves once its lease expires — and every
// acknowledged write reads back (TestTabletMovesAndSplits scripts the same
// against the fake, with moves to chosen tservers).
func TestFollowsRealSplitsAndFailover(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 3, Lease: time.Second})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	write := func(round string) {
		t.Helper()
		for i := 0; i < 30; i++ {
			k, v := rowKey(i), fmt.Sprintf("%s-%d", round, i)
			if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err != nil {
				t.Fatalf("%s: put %s: %v", round, k, err)
			}
			want[k] = v
		}
	}
	check := func(stage string) {
		t.Helper()
		for k, v := range want {
			r, err := tbl.Get(ctx, k)
			if got, _ := r.Value("cf", "q"); err != nil || string(got) != v {
				t.Fatalf("%s: get %s = %q, %v; want %q", stage, k, got, err, v)
			}
		}
		if keys := scanAll(t, tbl, "", ""); len(keys) != len(want) {
			t.Fatalf("%s: scan saw %d rows, want %d", stage, len(keys), len(want))
		}
	}
	write("before")
	for n, at := range []string{"row010", "row020"} {
		if err := cl.SplitTablet(ctx, "t", at); err != nil {
			t.Fatal(err)
		}
		// The split runs on the tserver; the master shows it once done.
		wait.ForCtx(t, ctx, "the split at "+at+" shown", func() error {
			tablets, err := cl.Tablets(ctx, "t")
			if err == nil && len(tablets) != 3+n {
				err = fmt.Errorf("tablets %+v", tablets)
			}
			return err
		})
		if err := c.WaitServing(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	write("after the splits")
	check("after the splits")
	tablets, err := cl.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// Stop the tserver of row005's tablet, so the client's cached location
	// of it goes stale.
	victim := -1
	for i := range c.TServers() {
		if c.TServerAddr(i) == tablets[0].TServer {
			victim = i
		}
	}
	if err := c.StopTServer(victim); err != nil {
		t.Fatal(err)
	}
	write("during the failover") // waits for the tablets to move
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	check("after the failover")
}
