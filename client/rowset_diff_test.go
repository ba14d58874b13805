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

	"bighive/client"
	"bighive/testkit/inproc"
)

var (
	rowsetSeed  = flag.Uint64("rowsetdiff.seed", 0, "seed of TestRowSetDifferential (0: random)")
	rowsetReads = flag.Int("rowsetdiff.reads", 150, "random reads TestRowSetDifferential compares, per stage")
)

// TestRowSetDifferential writes the same random rows to a real in-process
// Bighive cluster (the table split into four tablets) and to bttest
// through the official client, then reads both with the same random row
// sets (keys, present or not, and ranges with every kind of bound, in any
// order and overlapping), limits, reverse scans and filters, and compares
// the rows in order — with the old read paths too (one Get per row of a
// row list; scans with a message per row) — after the writes, after a checkpoint, and after a
// major compaction.
//
// Row sets that name nothing (an empty RowList or RowRangeList) are not
// generated: the official client then reads nothing without asking, where
// Bighive's client refuses them with InvalidArgument, as the contract
// tests check. Filters are those of TestFilterDifferential, with its
// restrictions, and no invalid ones.
func TestRowSetDifferential(t *testing.T) {
	t.Parallel()
	seed := *rowsetSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -rowsetdiff.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c := inproc.Start(t, inproc.Options{})
	bh := bighiveTable(t, ctx, c, "r1", "r2", "r3")
	bt := bttestTable(t, ctx)
	// The old read paths, to compare the new ones with: unary ReadRow
	// (a single-row Get each) and scans answered with a message per row.
	bhOld, err := c.Client(client.WithFlatScan(false), client.WithBatchStream(false)).Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}

	const rows = 48
	writeRandomRows(ctx, t, rng, bh, bt, rows)
	var keys []string // the keys written, and keys around them
	for i := 0; i < rows; i++ {
		k := fmt.Sprintf("r%d%s", i%4, strings.Repeat("k", i/4))
		keys = append(keys, k, k+"a", k+"\x00")
	}
	keys = append(keys, "r", "r1", "r2", "r3", "r4", "q", "s", "\xff")

	multiGets := 0
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
		for i := 0; i < *rowsetReads; i++ {
			g := rowSetGen{rng: rng, keys: keys}
			ours, theirs, desc := g.set()
			var opts []client.ReadOption
			var bopts []bigtable.ReadOption
			reversed, limit := false, 0
			if rng.IntN(2) == 0 {
				opts, bopts = append(opts, client.ReverseScan()), append(bopts, bigtable.ReverseScan())
				desc += " reversed"
				reversed = true
			}
			if rng.IntN(2) == 0 {
				n := 1 + rng.IntN(8)
				limit = n
				opts, bopts = append(opts, client.LimitRows(int64(n))), append(bopts, bigtable.LimitRows(int64(n)))
				desc += fmt.Sprintf(" limit %d", n)
			}
			labels := true
			var getOpts []client.ReadOption // the filter alone, for Get
			if rng.IntN(3) == 0 {
				fg := &filterGen{rng: rng}
				f, bf := fg.tree(2)
				if fg.invalid == 0 {
					getOpts = append(getOpts, client.RowFilter(f))
					opts, bopts = append(opts, client.RowFilter(f)), append(bopts, bigtable.RowFilter(bf))
					desc += " filter " + f.String()
					labels = !(fg.labels > 0 && fg.strips > 0)
				}
			}
			got, err := readOurs(ctx, bh, ours, labels, opts...)
			want, berr := readTheirs(ctx, bt, theirs, labels, bopts...)
			if err != nil || berr != nil {
				t.Fatalf("seed %d: %s: %s: bighive err %v, bttest err %v", seed, stage, desc, err, berr)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d: %s: %s:\nbighive %d rows:\n  %s\nbttest %d rows:\n  %s", seed, stage, desc,
					len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
			}
			old, err := readOurs(ctx, bhOld, ours, labels, opts...)
			if err != nil || !slices.Equal(got, old) {
				t.Fatalf("seed %d: %s: %s: the flat scan and multi-get give\n  %s\nthe old paths (%v)\n  %s", seed, stage, desc,
					strings.Join(got, "\n  "), err, strings.Join(old, "\n  "))
			}
			if list, ok := ours.(client.RowList); ok {
				gets, err := getEach(ctx, bhOld, list, labels, reversed, limit, getOpts)
				if err != nil || !slices.Equal(got, gets) {
					t.Fatalf("seed %d: %s: %s: the multi-get gives\n  %s\none Get per row (%v)\n  %s", seed, stage, desc,
						strings.Join(got, "\n  "), err, strings.Join(gets, "\n  "))
				}
				multiGets++
			}
		}
	}
	if multiGets == 0 {
		t.Fatalf("seed %d: no row list was read: the multi-get was not compared", seed)
	}
	t.Logf("%d row lists compared with one Get per row", multiGets)
}

// getEach reads a row list the old way, one Get per distinct row, in key
// order (reversed when asked), keeping the rows with cells, at most the
// limit (0: all).
func getEach(ctx context.Context, tbl *client.Table, list client.RowList, labels, reversed bool, limit int, getOpts []client.ReadOption) ([]string, error) {
	keys := slices.Clone([]string(list))
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if reversed {
		slices.Reverse(keys)
	}
	var out []string
	for _, k := range keys {
		if limit > 0 && len(out) >= limit {
			break
		}
		r, err := tbl.Get(ctx, k, getOpts...)
		if err != nil {
			return nil, err
		}
		if len(r.Cells) == 0 {
			continue
		}
		var cs []string
		for _, c := range r.Cells {
			cs = append(cs, diffCell(c.Family, c.Qualifier, c.Timestamp, c.Value, c.Labels, labels))
		}
		out = append(out, fmt.Sprintf("%q %s", r.Key, canonCells(cs)))
	}
	return out, nil
}

func readOurs(ctx context.Context, tbl *client.Table, rs client.RowSet, labels bool, opts ...client.ReadOption) ([]string, error) {
	var out []string
	err := tbl.ReadRows(ctx, rs, func(r client.Row) bool {
		var cs []string
		for _, c := range r.Cells {
			cs = append(cs, diffCell(c.Family, c.Qualifier, c.Timestamp, c.Value, c.Labels, labels))
		}
		out = append(out, fmt.Sprintf("%q %s", r.Key, canonCells(cs)))
		return true
	}, opts...)
	return out, err
}

func readTheirs(ctx context.Context, tbl *bigtable.Table, rs bigtable.RowSet, labels bool, opts ...bigtable.ReadOption) ([]string, error) {
	var out []string
	err := tbl.ReadRows(ctx, rs, func(r bigtable.Row) bool {
		var cs []string
		for fam, items := range r {
			for _, it := range items {
				cs = append(cs, diffCell(fam, strings.TrimPrefix(it.Column, fam+":"), int64(it.Timestamp), it.Value, it.Labels, labels))
			}
		}
		out = append(out, fmt.Sprintf("%q %s", r.Key(), canonCells(cs)))
		return true
	}, opts...)
	return out, err
}

// rowSetGen makes the same random row set for both clients.
type rowSetGen struct {
	rng  *rand.Rand
	keys []string
}

func (g *rowSetGen) key() string { return g.keys[g.rng.IntN(len(g.keys))] }

// rng returns a random range, its bounds in order (bttest, like Bigtable,
// refuses a range whose start is after its end).
func (g *rowSetGen) rang() (client.RowRange, bigtable.RowRange, string) {
	a, b := g.key(), g.key()
	if a > b {
		a, b = b, a
	}
	switch g.rng.IntN(9) {
	case 0:
		return client.NewRange(a, b), bigtable.NewRange(a, b), fmt.Sprintf("NewRange(%q,%q)", a, b)
	case 1:
		return client.NewClosedOpenRange(a, b), bigtable.NewClosedOpenRange(a, b), fmt.Sprintf("ClosedOpen(%q,%q)", a, b)
	case 2:
		return client.NewOpenClosedRange(a, b), bigtable.NewOpenClosedRange(a, b), fmt.Sprintf("OpenClosed(%q,%q)", a, b)
	case 3:
		if a == b {
			b += "\x00" // (a, a) is empty: the official client reads nothing, bttest would read it
		}
		return client.NewOpenRange(a, b), bigtable.NewOpenRange(a, b), fmt.Sprintf("Open(%q,%q)", a, b)
	case 4:
		return client.NewClosedRange(a, b), bigtable.NewClosedRange(a, b), fmt.Sprintf("Closed(%q,%q)", a, b)
	case 5:
		p := a[:min(len(a), 1+g.rng.IntN(3))]
		return client.PrefixRange(p), bigtable.PrefixRange(p), fmt.Sprintf("Prefix(%q)", p)
	case 6:
		return client.InfiniteRange(a), bigtable.InfiniteRange(a), fmt.Sprintf("Infinite(%q)", a)
	case 7:
		return client.InfiniteReverseRange(b), bigtable.InfiniteReverseRange(b), fmt.Sprintf("InfiniteReverse(%q)", b)
	default:
		return client.InfiniteRange(""), bigtable.InfiniteRange(""), "Infinite(\"\")"
	}
}

func (g *rowSetGen) set() (client.RowSet, bigtable.RowSet, string) {
	switch g.rng.IntN(4) {
	case 0:
		var ours client.RowList
		var theirs bigtable.RowList
		for n := 1 + g.rng.IntN(6); n > 0; n-- {
			k := g.key()
			ours, theirs = append(ours, k), append(theirs, k)
		}
		return ours, theirs, fmt.Sprintf("RowList%q", []string(ours))
	case 1:
		o, th, d := g.rang()
		return o, th, d
	default:
		var ours client.RowRangeList
		var theirs bigtable.RowRangeList
		var ds []string
		for n := 1 + g.rng.IntN(4); n > 0; n-- {
			o, th, d := g.rang()
			ours, theirs, ds = append(ours, o), append(theirs, th), append(ds, d)
		}
		return ours, theirs, "RowRangeList{" + strings.Join(ds, " ") + "}"
	}
}

// TestRowRangeMatchesOfficial: every RowRange constructor gives the same
// String and Contains as the official client's, over keys around the
// bounds.
func TestRowRangeMatchesOfficial(t *testing.T) {
	keys := []string{"", "a", "a\x00", "ab", "b", "b\x00", "ba", "c", "\xff", "\xff\xff"}
	probe := append(slices.Clone(keys), "0", "aa", "bb", "zz", "\xfe")
	for _, a := range keys {
		for _, b := range keys {
			pairs := []struct {
				name   string
				ours   client.RowRange
				theirs bigtable.RowRange
			}{
				{"NewRange", client.NewRange(a, b), bigtable.NewRange(a, b)},
				{"NewClosedOpenRange", client.NewClosedOpenRange(a, b), bigtable.NewClosedOpenRange(a, b)},
				{"NewOpenClosedRange", client.NewOpenClosedRange(a, b), bigtable.NewOpenClosedRange(a, b)},
				{"NewOpenRange", client.NewOpenRange(a, b), bigtable.NewOpenRange(a, b)},
				{"NewClosedRange", client.NewClosedRange(a, b), bigtable.NewClosedRange(a, b)},
				{"PrefixRange", client.PrefixRange(a), bigtable.PrefixRange(a)},
				{"InfiniteRange", client.InfiniteRange(a), bigtable.InfiniteRange(a)},
				{"InfiniteReverseRange", client.InfiniteReverseRange(b), bigtable.InfiniteReverseRange(b)},
			}
			for _, p := range pairs {
				if p.ours.String() != p.theirs.String() || p.ours.Unbounded() != p.theirs.Unbounded() {
					t.Errorf("%s(%q, %q): String %s Unbounded %v, official %s %v", p.name, a, b, p.ours, p.ours.Unbounded(), p.theirs, p.theirs.Unbounded())
				}
				for _, k := range probe {
					if p.ours.Contains(k) != p.theirs.Contains(k) {
						t.Errorf("%s(%q, %q).Contains(%q) = %v, official %v", p.name, a, b, k, p.ours.Contains(k), p.theirs.Contains(k))
					}
				}
			}
		}
	}
}
