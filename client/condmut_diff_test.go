package client_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/inproc"
)

var (
	condDiffSeed = flag.Uint64("conddiff.seed", 0, "seed of TestCondMutationDifferential (0: random)")
	condDiffOps  = flag.Int("conddiff.ops", 800, "conditional mutations TestCondMutationDifferential applies")
)

// TestCondMutationDifferential applies the same random conditional
// mutations (random predicate trees from the filter differential test's
// generator, or none; random true and false mutations of sets with
// explicit timestamps and every kind of delete) to a real in-process
// Bighive cluster and to Google's emulator bttest through the official
// Cloud Bigtable Go client, on rows written by the same random writes,
// and compares whether each predicate matched and the row afterwards; the
// whole tables are compared after a checkpoint and a major compaction run
// part way.
//
// As in the filter test, a predicate with an invalid part must fail with
// InvalidArgument on Bighive and write nothing there; bttest, which checks
// filters lazily, is not asked. Neither list having operations is
// refused by Bighive (Cloud Bigtable requires one), where bttest accepts
// it; it is checked on Bighive only. Server timestamps are not generated
// (the two servers' clocks differ).
func TestCondMutationDifferential(t *testing.T) {
	t.Parallel()
	seed := *condDiffSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -conddiff.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c := inproc.Start(t, inproc.Options{})
	bh := bighiveTable(t, ctx, c, "r2")
	bt := bttestTable(t, ctx)

	const rows = 24
	writeRandomRows(ctx, t, rng, bh, bt, rows)
	var keys []string
	for i := range rows {
		keys = append(keys, fmt.Sprintf("r%d%s", i%4, strings.Repeat("k", i/4)))
	}
	for i := range 4 {
		keys = append(keys, fmt.Sprintf("r%dnew", i)) // rows that do not exist (at first)
	}

	matches := 0
	for i := 0; i < *condDiffOps; i++ {
		switch i {
		case *condDiffOps / 3:
			if err := c.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			compareRead(ctx, t, "after a checkpoint", "no filter", nil, nil, true, false, bh, bt)
		case 2 * *condDiffOps / 3:
			if err := c.Compact(ctx, true); err != nil {
				t.Fatal(err)
			}
			compareRead(ctx, t, "after a major compaction", "no filter", nil, nil, true, false, bh, bt)
		}
		key := keys[rng.IntN(len(keys))]
		var ours client.Filter
		var theirs bigtable.Filter
		desc := "nil predicate"
		g := &filterGen{rng: rng}
		if rng.IntN(6) != 0 {
			ours, theirs = g.tree(3)
			desc = ours.String()
		}
		ot, tt, dt := randomCondMutation(rng)
		of, tf, df := randomCondMutation(rng)
		desc = fmt.Sprintf("op %d on row %s: if %s then [%s] else [%s]", i, key, desc, dt, df)
		before := rowOf(ctx, t, bh, key)
		var matched bool
		err := bh.Apply(ctx, key, client.NewCondMutation(ours, ot, of), client.GetCondMutationResult(&matched))
		if g.invalid > 0 || ot == nil && of == nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("seed %d: %s: bighive err %v, want InvalidArgument", seed, desc, err)
			}
			if after := rowOf(ctx, t, bh, key); after != before {
				t.Fatalf("seed %d: %s: refused, yet the row changed from %s to %s", seed, desc, before, after)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %s: bighive: %v", seed, desc, err)
		}
		var bmatched bool
		if err := bt.Apply(ctx, key, bigtable.NewCondMutation(theirs, tt, tf), bigtable.GetCondMutationResult(&bmatched)); err != nil {
			t.Fatalf("seed %d: %s: bttest: %v", seed, desc, err)
		}
		if matched != bmatched {
			t.Fatalf("seed %d: %s: row before %s: bighive matched %v, bttest %v", seed, desc, before, matched, bmatched)
		}
		if matched {
			matches++
		}
		if got, want := rowOf(ctx, t, bh, key), btRowOf(ctx, t, bt, key); got != want {
			t.Fatalf("seed %d: %s: row before %s:\nbighive %s\nbttest  %s", seed, desc, before, got, want)
		}
	}
	compareRead(ctx, t, "at the end", "no filter", nil, nil, true, false, bh, bt)
	t.Logf("%d conditional mutations, %d matched", *condDiffOps, matches)
}

// randomCondMutation returns the same random mutation for both clients
// (nil for none, a third of the time) and a description.
func randomCondMutation(rng *rand.Rand) (*client.Mutation, *bigtable.Mutation, string) {
	if rng.IntN(3) == 0 {
		return nil, nil, "none"
	}
	quals := []string{"a", "b", "ab"}
	vals := []string{"", "x", "y", "v1"}
	m, bm := client.NewMutation(), bigtable.NewMutation()
	var desc []string
	for range 1 + rng.IntN(3) {
		fam, q := diffFamilies[rng.IntN(len(diffFamilies))], quals[rng.IntN(len(quals))]
		ts := int64(1+rng.IntN(8)) * 1000
		switch r := rng.IntN(12); {
		case r == 0:
			m.DeleteRow()
			bm.DeleteRow()
			desc = append(desc, "delete row")
		case r == 1:
			m.DeleteCellsInFamily(fam)
			bm.DeleteCellsInFamily(fam)
			desc = append(desc, "delete "+fam)
		case r == 2:
			m.DeleteCellsInColumn(fam, q)
			bm.DeleteCellsInColumn(fam, q)
			desc = append(desc, "delete "+fam+":"+q)
		case r == 3:
			end := ts + int64(1+rng.IntN(3))*1000
			m.DeleteTimestampRange(fam, q, ts, end)
			bm.DeleteTimestampRange(fam, q, bigtable.Timestamp(ts), bigtable.Timestamp(end))
			desc = append(desc, fmt.Sprintf("delete %s:%s [%d, %d)", fam, q, ts, end))
		default:
			v := vals[rng.IntN(len(vals))]
			m.Set(fam, q, ts, []byte(v))
			bm.Set(fam, q, bigtable.Timestamp(ts), []byte(v))
			desc = append(desc, fmt.Sprintf("set %s:%s@%d=%q", fam, q, ts, v))
		}
	}
	return m, bm, strings.Join(desc, ", ")
}

func rowOf(ctx context.Context, t *testing.T, bh *client.Table, key string) string {
	t.Helper()
	r, err := bh.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var cs []string
	for _, c := range r.Cells {
		cs = append(cs, diffCell(c.Family, c.Qualifier, c.Timestamp, c.Value, nil, false))
	}
	return canonCells(cs)
}

func btRowOf(ctx context.Context, t *testing.T, bt *bigtable.Table, key string) string {
	t.Helper()
	r, err := bt.ReadRow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var cs []string
	for fam, items := range r {
		for _, it := range items {
			cs = append(cs, diffCell(fam, strings.TrimPrefix(it.Column, fam+":"), int64(it.Timestamp), it.Value, nil, false))
		}
	}
	return canonCells(cs)
}
