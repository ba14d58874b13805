package inproc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/inproc"
)

// TestClusterLifecycle drives every helper once: rows written to three
// tablets on three tservers survive a checkpoint, both compactions, a
// restart, and a tserver stopped for good, whose tablets move.
func TestClusterLifecycle(t *testing.T) {
	c := inproc.Start(t, inproc.Options{TServers: 3, Lease: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(t, c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"k3", "k6"}}))
	cl := c.Client()
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	put := func(round int) {
		t.Helper()
		for i := 0; i < 9; i++ {
			k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d-%d", i, round)
			if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err != nil {
				t.Fatalf("round %d: put %s: %v", round, k, err)
			}
			want[k] = v
		}
	}
	check := func(stage string) {
		t.Helper()
		n := 0
		err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
			n++
			if v, _ := r.Value("cf", "q"); string(v) != want[r.Key] {
				t.Errorf("%s: row %s = %q, want %q", stage, r.Key, v, want[r.Key])
			}
			return true
		})
		if err != nil || n != len(want) {
			t.Fatalf("%s: scan saw %d rows of %d: %v", stage, n, len(want), err)
		}
	}
	put(0)
	must(t, c.Checkpoint(ctx))
	put(1)
	must(t, c.Checkpoint(ctx))
	must(t, c.Compact(ctx, false))
	check("after a minor compaction")
	must(t, c.Compact(ctx, true))
	check("after a major compaction")
	put(2)
	must(t, c.RestartTServer(1))
	must(t, c.WaitServing(ctx, "t"))
	check("after a restart")
	put(3)
	must(t, c.StopTServer(2))
	must(t, c.WaitServing(ctx, "t"))
	check("after a failover")
	if got := c.Running(); len(got) != 2 {
		t.Errorf("running %v", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
