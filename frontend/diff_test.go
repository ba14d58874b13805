package frontend

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"bighive/client"
)

var (
	apiDiffSeed  = flag.Uint64("apidiff.seed", 0, "seed of TestDataDifferential (0: random)")
	apiDiffSteps = flag.Int("apidiff.steps", 300, "random operations TestDataDifferential runs")
)

// dialEmulator starts Google's emulator (bttest) on a loopback port and
// returns a connection to it; both end with the test.
func dialEmulator(t *testing.T) *grpc.ClientConn {
	t.Helper()
	srv, err := bttest.NewServer("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestDataDifferential runs the same random operations through the
// official Cloud Bigtable Go client against the frontend of a real cluster
// (three tablets) and against Google's emulator bttest, and compares every
// answer: Apply and ApplyBulk with sets and deletes, CheckAndMutate with a
// random predicate, ReadModifyWrite, and reads with random row sets,
// filters, reverse scans and row limits.
//
// Where bttest is not a faithful oracle the generator stays away: a cells
// per row limit comes only behind an exact family filter (bttest walks
// families in map order), a label never with a strip (bttest's strip
// drops labels), an ApplyBulk names a row at most once (the API applies
// entries in an arbitrary order, even entries of one row, which Bighive
// does and bttest does not), ranges never start after their end (bttest refuses what
// Bigtable reads as empty), and the server timestamps of ReadModifyWrite
// (family fc, written by nothing else) are not compared.
func TestDataDifferential(t *testing.T) {
	t.Parallel()
	seed := *apiDiffSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -apidiff.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	fams := []client.FamilySpec{{Name: "fa"}, {Name: "fb"}, {Name: "fc"}}
	// Millisecond granularity, as the emulator's tables (and the admin API's default).
	a := startAPI(t, client.TableSpec{Name: "t", SplitKeys: []string{"k3", "k6"}, Families: fams, Granularity: client.GranularityMillis})
	ctx := ctxT(t)
	ours := a.bt.Open("t")

	conn := dialEmulator(t)
	adm, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if err := adm.CreateColumnFamily(ctx, "t", f.Name); err != nil {
			t.Fatal(err)
		}
	}
	btc, err := bigtable.NewClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer btc.Close()
	theirs := btc.Open("t")

	g := &apiGen{rng: rng}
	for step := 0; step < *apiDiffSteps; step++ {
		desc, got, want := g.step(ctx, ours, theirs)
		if got != want {
			t.Fatalf("seed %d step %d: %s:\n frontend: %s\n bttest:   %s", seed, step, desc, got, want)
		}
	}
}

type apiGen struct{ rng *rand.Rand }

func (g *apiGen) key() string {
	return fmt.Sprintf("k%d%s", g.rng.IntN(9), []string{"", "", "a", "b"}[g.rng.IntN(4)])
}

func (g *apiGen) ts() bigtable.Timestamp { return bigtable.Timestamp(1000 * (1 + g.rng.IntN(5))) }

func (g *apiGen) fam() string  { return []string{"fa", "fb"}[g.rng.IntN(2)] }
func (g *apiGen) qual() string { return []string{"a", "b", "c", "ab"}[g.rng.IntN(4)] }

// mutation is a random list of sets and deletes on families fa and fb.
func (g *apiGen) mutation() (*bigtable.Mutation, string) {
	m := bigtable.NewMutation()
	var d []string
	for range 1 + g.rng.IntN(3) {
		f, q := g.fam(), g.qual()
		switch n := g.rng.IntN(10); {
		case n < 6:
			ts, v := g.ts(), []string{"", "x", "yy", "v1", "zzz"}[g.rng.IntN(5)]
			m.Set(f, q, ts, []byte(v))
			d = append(d, fmt.Sprintf("set %s:%s@%d=%q", f, q, ts, v))
		case n < 8:
			s := g.ts()
			e := s + bigtable.Timestamp(1000*(1+g.rng.IntN(3)))
			m.DeleteTimestampRange(f, q, s, e)
			d = append(d, fmt.Sprintf("delete %s:%s [%d,%d)", f, q, s, e))
		case n < 9:
			m.DeleteCellsInColumn(f, q)
			d = append(d, fmt.Sprintf("delete %s:%s", f, q))
		default:
			if g.rng.IntN(3) == 0 {
				m.DeleteRow()
				d = append(d, "delete row")
			} else {
				m.DeleteCellsInFamily(f)
				d = append(d, "delete family "+f)
			}
		}
	}
	return m, strings.Join(d, ", ")
}

// filter is a random filter on which bttest is a faithful oracle.
func (g *apiGen) filter() (bigtable.Filter, string) {
	leaf := func() (bigtable.Filter, string) {
		switch g.rng.IntN(9) {
		case 0:
			f := g.fam()
			return bigtable.FamilyFilter(f), "family " + f
		case 1:
			q := []string{"a", "a.*", "b|c", ".*b"}[g.rng.IntN(4)]
			return bigtable.ColumnFilter(q), "column " + q
		case 2:
			v := []string{"x", "y+", "v.*", ""}[g.rng.IntN(4)]
			return bigtable.ValueFilter(v), "value " + v
		case 3:
			n := 1 + g.rng.IntN(2)
			return bigtable.LatestNFilter(n), fmt.Sprint("latest ", n)
		case 4:
			s := g.ts()
			return bigtable.TimestampRangeFilterMicros(s, s+2000), fmt.Sprintf("timestamps [%d,%d)", s, s+2000)
		case 5:
			f := g.fam()
			return bigtable.ColumnRangeFilter(f, "a", "b"), "column range " + f + " [a,b)"
		case 6:
			return bigtable.ValueRangeFilter([]byte("v"), []byte("z")), "value range [v,z)"
		case 7:
			n := 1 + g.rng.IntN(2)
			return bigtable.ChainFilters(bigtable.FamilyFilter("fa"), bigtable.CellsPerRowLimitFilter(n)), fmt.Sprint("fa, cells per row ", n)
		default:
			k := g.key()
			return bigtable.RowKeyFilter(k + ".*"), "row key " + k + ".*"
		}
	}
	switch g.rng.IntN(5) {
	case 0:
		a, da := leaf()
		b, db := leaf()
		return bigtable.ChainFilters(a, b), "chain(" + da + "; " + db + ")"
	case 1:
		a, da := leaf()
		b, db := leaf()
		return bigtable.InterleaveFilters(a, b), "interleave(" + da + "; " + db + ")"
	case 2:
		a, da := leaf()
		return bigtable.ChainFilters(a, bigtable.LabelFilter("hit")), "chain(" + da + "; label hit)"
	case 3:
		a, da := leaf()
		return bigtable.ChainFilters(a, bigtable.StripValueFilter()), "chain(" + da + "; strip)"
	default:
		return leaf()
	}
}

// rowRange is a random range, never starting after its end.
func (g *apiGen) rowRange() (bigtable.RowRange, string) {
	s, e := g.key(), g.key()
	if s > e {
		s, e = e, s
	}
	if s == e {
		e += "z"
	}
	switch g.rng.IntN(9) {
	case 0:
		return bigtable.NewRange(s, e), "[" + s + "," + e + ")"
	case 1:
		return bigtable.NewClosedRange(s, e), "[" + s + "," + e + "]"
	case 2:
		return bigtable.NewOpenRange(s, e), "(" + s + "," + e + ")"
	case 3:
		return bigtable.NewOpenClosedRange(s, e), "(" + s + "," + e + "]"
	case 4:
		return bigtable.PrefixRange(s[:2]), "prefix " + s[:2]
	case 5:
		return bigtable.InfiniteRange(s), "[" + s + ",∞)"
	case 6:
		return bigtable.InfiniteReverseRange(e), "(∞," + e + "]"
	case 7:
		return bigtable.RowRange{}, "all"
	default:
		return bigtable.NewClosedOpenRange(s, e), "[" + s + "," + e + ")"
	}
}

func (g *apiGen) rowSet() (bigtable.RowSet, string) {
	switch g.rng.IntN(4) {
	case 0:
		var l bigtable.RowList
		for range 1 + g.rng.IntN(4) {
			l = append(l, g.key())
		}
		return l, fmt.Sprint("keys ", []string(l))
	case 1:
		var l bigtable.RowRangeList
		var d []string
		for range 1 + g.rng.IntN(3) {
			r, s := g.rowRange()
			l, d = append(l, r), append(d, s)
		}
		return l, "ranges " + strings.Join(d, " ")
	default:
		r, s := g.rowRange()
		return r, "range " + s
	}
}

// diffRow renders a row with the server timestamps of family fc masked.
func diffRow(r bigtable.Row) string {
	if r == nil {
		return "<nil>"
	}
	for i := range r["fc"] {
		r["fc"][i].Timestamp = 0
	}
	return rowString(r)
}

func errCode(err error) string {
	if err == nil {
		return "ok"
	}
	return status.Code(err).String()
}

// step runs one random operation on both tables and renders both answers.
func (g *apiGen) step(ctx context.Context, ours, theirs *bigtable.Table) (desc, got, want string) {
	both := func(f func(*bigtable.Table) string) (string, string) { return f(ours), f(theirs) }
	switch n := g.rng.IntN(20); {
	case n < 6:
		k := g.key()
		m, d := g.mutation()
		desc = fmt.Sprintf("Apply %s: %s", k, d)
		got, want = both(func(t *bigtable.Table) string { return errCode(t.Apply(ctx, k, m)) })
	case n < 8:
		var keys []string
		var ms []*bigtable.Mutation
		var ds []string
		for range 1 + g.rng.IntN(5) {
			k := g.key()
			if slices.Contains(keys, k) {
				continue // entries of one row apply in an arbitrary order
			}
			m, d := g.mutation()
			keys, ms, ds = append(keys, k), append(ms, m), append(ds, k+": "+d)
		}
		desc = "ApplyBulk " + strings.Join(ds, "; ")
		got, want = both(func(t *bigtable.Table) string {
			errs, err := t.ApplyBulk(ctx, keys, ms)
			out := []string{errCode(err)}
			for _, e := range errs {
				out = append(out, errCode(e))
			}
			return strings.Join(out, " ")
		})
	case n < 10:
		k := g.key()
		f, df := g.filter()
		if g.rng.IntN(5) == 0 {
			f, df = nil, "the row has a cell"
		}
		mt, dt := g.mutation()
		mf, dff := g.mutation()
		desc = fmt.Sprintf("CheckAndMutate %s if %s then %s else %s", k, df, dt, dff)
		got, want = both(func(t *bigtable.Table) string {
			var matched bool
			err := t.Apply(ctx, k, bigtable.NewCondMutation(f, mt, mf), bigtable.GetCondMutationResult(&matched))
			return fmt.Sprint(errCode(err), " matched=", matched)
		})
	case n < 11:
		k := g.key()
		delta := int64(g.rng.IntN(7) - 3)
		desc = fmt.Sprintf("ReadModifyWrite %s: fc:n += %d, fc:s append x", k, delta)
		got, want = both(func(t *bigtable.Table) string {
			rmw := bigtable.NewReadModifyWrite()
			rmw.Increment("fc", "n", delta)
			rmw.AppendValue("fc", "s", []byte("x"))
			r, err := t.ApplyReadModifyWrite(ctx, k, rmw)
			if err != nil {
				return errCode(err)
			}
			var parts []string
			for _, it := range r["fc"] {
				v := string(it.Value)
				if it.Column == "fc:n" {
					v = fmt.Sprint(int64(binary.BigEndian.Uint64(it.Value)))
				}
				parts = append(parts, it.Column+"="+v)
			}
			return strings.Join(parts, " ")
		})
	case n < 13:
		k := g.key()
		var opts []bigtable.ReadOption
		desc = "ReadRow " + k
		if g.rng.IntN(2) == 0 {
			f, df := g.filter()
			opts = append(opts, bigtable.RowFilter(f))
			desc += " filter " + df
		}
		got, want = both(func(t *bigtable.Table) string {
			r, err := t.ReadRow(ctx, k, opts...)
			return errCode(err) + " " + diffRow(r)
		})
	default:
		rs, d := g.rowSet()
		var opts []bigtable.ReadOption
		desc = "ReadRows " + d
		if g.rng.IntN(2) == 0 {
			f, df := g.filter()
			opts = append(opts, bigtable.RowFilter(f))
			desc += " filter " + df
		}
		if g.rng.IntN(3) == 0 {
			opts = append(opts, bigtable.ReverseScan())
			desc += " reversed"
		}
		if g.rng.IntN(3) == 0 {
			n := int64(1 + g.rng.IntN(4))
			opts = append(opts, bigtable.LimitRows(n))
			desc += fmt.Sprint(" limit ", n)
		}
		got, want = both(func(t *bigtable.Table) string {
			var rows []string
			err := t.ReadRows(ctx, rs, func(r bigtable.Row) bool {
				rows = append(rows, diffRow(r))
				return true
			}, opts...)
			return errCode(err) + " " + strings.Join(rows, " | ")
		})
	}
	return desc, got, want
}
