package client_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
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
	diffSeed    = flag.Uint64("filterdiff.seed", 0, "seed of TestFilterDifferential (0: random)")
	diffFilters = flag.Int("filterdiff.filters", 150, "random filter trees TestFilterDifferential reads with, per stage")
	diffRows    = flag.Int("filterdiff.rows", 40, "rows TestFilterDifferential writes")
)

var diffFamilies = []string{"fa", "fb", "fc"}

// TestFilterDifferential writes the same random rows (explicit timestamps,
// three families, several qualifiers and versions, some deletes) to a real
// in-process Bighive cluster and to Google's emulator bttest through the
// official Cloud Bigtable Go client, then scans both with the same random
// RowFilter trees and compares the rows — after the writes, after a
// checkpoint, and after a major compaction.
//
// Where bttest is not a faithful oracle the generator stays away:
//   - cells-per-row offset and limit are generated only behind an exact
//     family filter (bttest walks a row's families in map order, so across
//     families it counts in a random order);
//   - a tree carries at most one label (bttest overwrites a second label
//     where Bigtable refuses the request), and no sink (bttest ignores it);
//   - labels are not compared when the tree also strips values (bttest's
//     strip drops a cell's labels);
//   - row sample is generated only with rate 0 or 1, which both refuse;
//   - bttest checks a filter lazily, only in the rows and branches it
//     reaches, where Bigtable refuses an invalid tree up front: a tree with
//     an invalid part (a bad regex, a chain of one, a zero limit, a rate of
//     0 or 1) must fail with InvalidArgument on Bighive, and bttest's
//     answer is not compared;
//   - equal cells (an interleave's duplicates) are compared as a multiset
//     within one column and timestamp, whose mutual order Bigtable leaves
//     unspecified (bttest sorts them unstably).
func TestFilterDifferential(t *testing.T) {
	t.Parallel()
	seed := *diffSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -filterdiff.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c := inproc.Start(t, inproc.Options{})
	bh := bighiveTable(t, ctx, c, "r2")
	bt := bttestTable(t, ctx)

	writeRandomRows(ctx, t, rng, bh, bt, *diffRows)

	for _, stage := range []string{"after the writes", "after a checkpoint", "after a major compaction"} {
		switch stage {
		case "after a checkpoint":
			if err := c.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		case "after a major compaction":
			if err := c.Compact(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
		compareRead(ctx, t, stage, "no filter", nil, nil, true, false, bh, bt)
		for i := 0; i < *diffFilters; i++ {
			g := &filterGen{rng: rng}
			ours, theirs := g.tree(3)
			compareRead(ctx, t, stage, ours.String(), ours, theirs, !(g.labels > 0 && g.strips > 0), g.invalid > 0, bh, bt)
			if t.Failed() {
				t.Fatalf("seed %d: stopping at the first difference", seed)
			}
		}
	}
}

func writeRandomRows(ctx context.Context, t *testing.T, rng *rand.Rand, bh *client.Table, bt *bigtable.Table, rows int) {
	quals := []string{"a", "b", "c", "ab", "q1"}
	vals := []string{"", "x", "y", "zz", "v1", "v22", "abc"}
	for i := 0; i < rows; i++ {
		key := fmt.Sprintf("r%d%s", i%4, strings.Repeat("k", i/4))
		for range 1 + rng.IntN(3) { // several mutations per row
			m, bm := client.NewMutation(), bigtable.NewMutation()
			for range 1 + rng.IntN(6) {
				fam, q := diffFamilies[rng.IntN(len(diffFamilies))], quals[rng.IntN(len(quals))]
				ts := int64(1+rng.IntN(6)) * 1000
				switch r := rng.IntN(20); {
				case r == 0:
					m.DeleteCellsInFamily(fam)
					bm.DeleteCellsInFamily(fam)
				case r == 1:
					start, end := ts, ts+int64(1+rng.IntN(2))*1000
					m.DeleteTimestampRange(fam, q, start, end)
					bm.DeleteTimestampRange(fam, q, bigtable.Timestamp(start), bigtable.Timestamp(end))
				default:
					v := vals[rng.IntN(len(vals))]
					m.Set(fam, q, ts, []byte(v))
					bm.Set(fam, q, bigtable.Timestamp(ts), []byte(v))
				}
			}
			if err := bh.Apply(ctx, key, m); err != nil {
				t.Fatalf("bighive apply %s: %v", key, err)
			}
			if err := bt.Apply(ctx, key, bm); err != nil {
				t.Fatalf("bttest apply %s: %v", key, err)
			}
		}
	}
}

// compareRead scans both tables with the filter pair and compares rows,
// or that both refuse it with InvalidArgument.
func compareRead(ctx context.Context, t *testing.T, stage, desc string, ours client.Filter, theirs bigtable.Filter, labels, invalid bool, bh *client.Table, bt *bigtable.Table) {
	t.Helper()
	var opts []client.ReadOption
	var bopts []bigtable.ReadOption
	if ours != nil {
		opts = append(opts, client.RowFilter(ours))
		bopts = append(bopts, bigtable.RowFilter(theirs))
	}
	var got []string
	err := bh.Scan(ctx, "", "", func(r client.Row) bool {
		var cs []string
		for i, c := range r.Cells {
			if i > 0 {
				p := r.Cells[i-1]
				if p.Family > c.Family || p.Family == c.Family && (p.Qualifier > c.Qualifier || p.Qualifier == c.Qualifier && p.Timestamp < c.Timestamp) {
					t.Errorf("%s: %s: row %s: cells out of order at %d", stage, desc, r.Key, i)
				}
			}
			cs = append(cs, diffCell(c.Family, c.Qualifier, c.Timestamp, c.Value, c.Labels, labels))
		}
		got = append(got, r.Key+" "+canonCells(cs))
		return true
	}, opts...)
	var want []string
	berr := bt.ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		var cs []string
		for fam, items := range r {
			for _, it := range items {
				c := strings.TrimPrefix(it.Column, fam+":")
				cs = append(cs, diffCell(fam, c, int64(it.Timestamp), it.Value, it.Labels, labels))
			}
		}
		want = append(want, r.Key()+" "+canonCells(cs))
		return true
	}, bopts...)
	if invalid {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %s: an invalid filter: bighive err %v, want InvalidArgument", stage, desc, err)
		}
		return
	}
	if err != nil || berr != nil {
		t.Errorf("%s: %s: bighive err %v, bttest err %v", stage, desc, err, berr)
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s:\nbighive %d rows:\n  %s\nbttest %d rows:\n  %s", stage, desc,
			len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}

func diffCell(fam, qual string, ts int64, val []byte, ls []string, labels bool) string {
	s := fmt.Sprintf("%s:%s@%d=%q", fam, qual, ts, val)
	if labels && len(ls) > 0 {
		s += fmt.Sprint(ls)
	}
	return s
}

// canonCells sorts a row's rendered cells, which begin with
// family:qualifier@timestamp; the checks above already hold Bighive's
// order, and this makes the families' and duplicates' order irrelevant.
func canonCells(cs []string) string {
	slices.Sort(cs)
	return strings.Join(cs, " ")
}

// filterGen builds the same random RowFilter tree with Bighive's
// constructors and the official client's.
type filterGen struct {
	rng                     *rand.Rand
	labels, strips, invalid int
}

func (g *filterGen) pick(ss ...string) string { return ss[g.rng.IntN(len(ss))] }

func (g *filterGen) tree(depth int) (client.Filter, bigtable.Filter) {
	if depth > 0 && g.rng.IntN(3) == 0 {
		switch g.rng.IntN(3) {
		case 0, 1:
			n := 2 + g.rng.IntN(2)
			if g.rng.IntN(15) == 0 {
				n = 1
				g.invalid++
			}
			var os []client.Filter
			var ts []bigtable.Filter
			for range n {
				o, t := g.tree(depth - 1)
				os, ts = append(os, o), append(ts, t)
			}
			if g.rng.IntN(2) == 0 {
				return client.ChainFilters(os...), bigtable.ChainFilters(ts...)
			}
			return client.InterleaveFilters(os...), bigtable.InterleaveFilters(ts...)
		default:
			po, pt := g.tree(depth - 1)
			var to, fo client.Filter
			var tt, ft bigtable.Filter
			if g.rng.IntN(4) != 0 {
				to, tt = g.tree(depth - 1)
			}
			if g.rng.IntN(4) != 0 {
				fo, ft = g.tree(depth - 1)
			}
			return client.ConditionFilter(po, to, fo), bigtable.ConditionFilter(pt, tt, ft)
		}
	}
	return g.leaf()
}

func (g *filterGen) leaf() (client.Filter, bigtable.Filter) {
	for {
		switch g.rng.IntN(18) {
		case 0:
			p := g.pick("r0.*", "r1k*", ".*k", "r[23]", "r.k{2,}", "r", "(")
			if p == "(" {
				g.invalid++
			}
			return client.RowKeyFilter(p), bigtable.RowKeyFilter(p)
		case 1:
			p := g.pick("fa", "f[bc]", "f.", "a", "fa|fc")
			return client.FamilyFilter(p), bigtable.FamilyFilter(p)
		case 2:
			p := g.pick("a", "a.*", "[bc]", "q\\d", "b|ab", "x[")
			if p == "x[" {
				g.invalid++
			}
			return client.ColumnFilter(p), bigtable.ColumnFilter(p)
		case 3:
			// The last ones see values' raw bytes: each byte is one character.
			p := g.pick("", "x|y", "v.*", "z+", "abc", ".", "..", ".{8}", ".*\xfe", `\xff.*`, "é", `a\C`)
			return client.ValueFilter(p), bigtable.ValueFilter(p)
		case 4:
			f, s, e := g.pick(diffFamilies...), g.pick("", "a", "ab", "b"), g.pick("", "b", "c", "q1")
			return client.ColumnRangeFilter(f, s, e), bigtable.ColumnRangeFilter(f, s, e)
		case 5:
			s, e := int64(g.rng.IntN(5))*1000, int64(g.rng.IntN(7))*1000
			return client.TimestampRangeFilterMicros(s, e), bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(s), bigtable.Timestamp(e))
		case 6:
			vs := [][]byte{nil, []byte(""), []byte("v"), []byte("x"), []byte("y"), []byte("zz")}
			s, e := vs[g.rng.IntN(len(vs))], vs[g.rng.IntN(len(vs))]
			return client.ValueRangeFilter(s, e), bigtable.ValueRangeFilter(s, e)
		case 7, 8:
			f, n := g.pick(diffFamilies...), g.rng.IntN(4)
			if g.rng.IntN(2) == 0 { // offset 0 is valid
				return client.ChainFilters(client.FamilyFilter(f), client.CellsPerRowOffsetFilter(n)),
					bigtable.ChainFilters(bigtable.FamilyFilter(f), bigtable.CellsPerRowOffsetFilter(n))
			}
			if n == 0 {
				g.invalid++
			}
			return client.ChainFilters(client.FamilyFilter(f), client.CellsPerRowLimitFilter(n)),
				bigtable.ChainFilters(bigtable.FamilyFilter(f), bigtable.CellsPerRowLimitFilter(n))
		case 9:
			n := g.rng.IntN(4)
			if n == 0 {
				g.invalid++
			}
			return client.LatestNFilter(n), bigtable.LatestNFilter(n)
		case 10:
			g.strips++
			return client.StripValueFilter(), bigtable.StripValueFilter()
		case 11:
			if g.labels > 0 {
				continue
			}
			g.labels++
			l := g.pick("l1", "lab-2", "x")
			return client.LabelFilter(l), bigtable.LabelFilter(l)
		case 12:
			return client.PassAllFilter(), bigtable.PassAllFilter()
		case 13:
			return client.BlockAllFilter(), bigtable.BlockAllFilter()
		case 14:
			if g.rng.IntN(4) != 0 {
				continue
			}
			p := float64(g.rng.IntN(2))
			g.invalid++
			return client.RowSampleFilter(p), bigtable.RowSampleFilter(p)
		default:
			p := g.pick("a", "b", "ab", "q1")
			return client.ColumnFilter(p), bigtable.ColumnFilter(p)
		}
	}
}
