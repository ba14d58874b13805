package e2e_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// TestAggregatesAcrossCheckpointSplitAndFailover: Google's Go client
// creates a table with aggregate families (int64 sum and max) through the
// frontend process and adds to their cells in rounds; after each step —
// the write buffers, a checkpoint (the operands flushed to TSFiles), a
// minor compaction (folded), a split (each child holds its rows'
// operands), a SIGKILL of the tserver serving rows whose last adds were
// only in its log (replayed on another tserver), a merge of the two
// children, and a major compaction —
// every cell reads back as the sum and the maximum of every input added
// to it, as the API defines them (the emulator has no aggregates).
func TestAggregatesAcrossCheckpointSplitAndFailover(t *testing.T) {
	skipShort(t, "aggregate families across a checkpoint, a split, a failover and a merge")
	c, cl := startFailoverClusterWith(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, bt := officialClients(t, ctx, c.BigtableAddr(), "p", "i")
	agg := func(g bigtable.Aggregator) bigtable.Family {
		return bigtable.Family{ValueType: bigtable.AggregateType{Input: bigtable.Int64Type{}, Aggregator: g}}
	}
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "agg", ColumnFamilies: map[string]bigtable.Family{
		"sum": agg(bigtable.SumAggregator{}), "max": agg(bigtable.MaxAggregator{})}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "agg"); err != nil {
		t.Fatal(err)
	}
	tbl := bt.Open("agg")
	rows := []string{"a", "f", "p", "w"} // the split at "m" puts two in each child
	const ts = bigtable.Timestamp(1_000_000)
	sums, maxes := map[string]int64{}, map[string]int64{}
	round := 0
	add := func() {
		t.Helper()
		round++
		for i, r := range rows {
			m := bigtable.NewMutation()
			for k := range 3 {
				v := int64(round*100 + i*10 + k)
				if k == 1 {
					v = -v
				}
				mv := v % (int64(round)*7 + 3)
				m.AddIntToCell("sum", "n", ts, v)
				m.AddIntToCell("max", "n", ts, mv)
				sums[r] += v
				if old, ok := maxes[r]; !ok || mv > old {
					maxes[r] = mv
				}
			}
			if err := tbl.Apply(ctx, r, m); err != nil {
				t.Fatalf("round %d: AddToCell on %s: %v", round, r, err)
			}
		}
	}
	check := func(stage string) {
		t.Helper()
		for _, r := range rows {
			got, err := tbl.ReadRow(ctx, r)
			if err != nil {
				t.Fatalf("%s: ReadRow %s: %v", stage, r, err)
			}
			for fam, want := range map[string]int64{"sum": sums[r], "max": maxes[r]} {
				cells := got[fam]
				if len(cells) != 1 || len(cells[0].Value) != 8 || cells[0].Timestamp != ts {
					t.Fatalf("%s: row %s family %s: %v, want one 8-byte cell at %d", stage, r, fam, cells, ts)
				}
				if v := int64(binary.BigEndian.Uint64(cells[0].Value)); v != want {
					t.Errorf("%s: row %s family %s = %d, want %d", stage, r, fam, v, want)
				}
			}
		}
		t.Logf("%s: %d rows read back right after %d rounds", stage, len(rows), round)
	}

	add()
	check("write buffers")
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	add()
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	add()
	check("files and buffers")
	if err := cl.Compact(ctx, "agg", false); err != nil {
		t.Fatal(err)
	}
	check("after a minor compaction")

	if err := cl.SplitTablet(ctx, "agg", "m"); err != nil {
		t.Fatal(err)
	}
	wait.ForCtx(t, ctx, "both children of agg serving", func() error {
		tabs, err := cl.Tablets(ctx, "agg")
		if err != nil {
			return err
		}
		for _, tb := range tabs {
			if tb.State != "serving" {
				return fmt.Errorf("tablet %s is %s", tb.ID, tb.State)
			}
		}
		if len(tabs) != 2 {
			return fmt.Errorf("%d tablets", len(tabs))
		}
		return nil
	})
	check("after a split")
	add()
	check("split children's buffers")

	// The last round reaches only the log of the tserver of row "p"; it
	// dies without a checkpoint.
	tabs, err := cl.Tablets(ctx, "agg")
	if err != nil {
		t.Fatal(err)
	}
	var victim client.TabletInfo
	for _, tb := range tabs {
		if tb.StartRow <= "p" && (tb.EndRow == "" || "p" < tb.EndRow) {
			victim = tb
		}
	}
	add()
	killed := time.Now()
	if err := c.KillTServer(indexOf(c, victim.TServer)); err != nil {
		t.Fatal(err)
	}
	waitServedElsewhere(t, ctx, cl, "agg", killed, victim.TServer)
	check("after a SIGKILL of a tserver")
	add()
	check("after the failover, more adds")

	// The two children merge again: the merged tablet's files are both
	// parents' buffers and files, their operands included. The merge
	// waits for a move (a handoff: two flushes, then the new owner's load)
	// and may outlast the failover client's 1 s attempt, whose retry is
	// refused, the pair being merged already; so the default attempt.
	admin, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.MergeTablets(ctx, "agg", "a"); err != nil {
		t.Fatal(err)
	}
	wait.ForCtx(t, ctx, "the merged tablet of agg serving", func() error {
		tabs, err := cl.Tablets(ctx, "agg")
		if err != nil {
			return err
		}
		if len(tabs) != 1 || tabs[0].State != "serving" {
			return fmt.Errorf("tablets %+v", tabs)
		}
		return nil
	})
	check("after a merge")
	add()
	check("the merged tablet's buffer")
	if err := cl.Compact(ctx, "agg", true); err != nil {
		t.Fatal(err)
	}
	check("after a major compaction")
}
