package client_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
)

var (
	dSeed   = flag.Uint64("diff.seed", 0, "seed of TestDifferential (0: random)")
	dOps    = flag.Int("diff.ops", 3000, "random operations TestDifferential runs (at most 600 with -short)")
	dRounds = flag.Int("diff.round", 150, "operations of one TestDifferential round; a checkpoint, compaction, restart or split and a whole-table comparison follow each (at most 100 with -short)")
)

// TestDifferential drives the same seeded random operations through a
// real in-process Bighive cluster and through Google's emulator bttest
// (via the official Cloud Bigtable Go client) and compares every answer:
// single-row mutations of every kind, bulk writes, read-modify-writes,
// conditional mutations (CheckAndMutateRow), reads of one row or of a
// range with random read options and RowFilter trees, and ReadRows over
// random row sets (keys and ranges with every bound kind) with row limits
// and reverse scans. Every -diff.round operations it checkpoints, runs a
// minor or major compaction, restarts the tserver or splits a tablet,
// and compares the whole table. The keyspace is small (30 keys, 3
// families, 7 qualifiers including the empty one, explicit timestamps
// 0..8000 µs) so that operations collide. On a mismatch it stops with the
// seed, the operation's index and both answers; rerun with
// -diff.seed=SEED (and -diff.ops) to reproduce.
//
// Adding an operation kind is one entry in diffOpKinds: a name, a weight
// (its share of the random picks) and a method of diffRun that builds the
// operation from d.rng (d.key, d.mutation and d.readOpts give random
// keys, mutations and read options for both clients), runs it on d.bh
// (Bighive) and d.bt (bttest), compares the answers (d.sameRows for rows
// in order; d.reread compares a row it wrote) and reports a
// difference with d.failf, which stops the test with the seed and the
// operation. Set d.desc first to what the operation does. A kind that
// writes server timestamps calls d.serverTime() after it.
//
// Where bttest is not a faithful oracle, the comparison is restricted:
//   - Server timestamps (ServerTime sets, read-modify-write cells) come
//     from two clocks; they are compared by rank within their column (a
//     server timestamp is newer than every explicit one in its column),
//     never by value. bttest truncates them to the table's millisecond
//     granularity, so two in one millisecond would replace each other
//     there while Bighive's are distinct microseconds: after every
//     operation that assigns one the test waits for the next millisecond,
//     and a mutation sets at most one ServerTime cell per column (Bighive
//     gives op i of a mutation base+i µs).
//   - Explicit timestamps beyond the clock (futureTS) are written only to
//     the qualifier futureQual, which no ServerTime set or
//     read-modify-write names. Bighive deviates from Bigtable there: a
//     tablet opened (restart, move, split) continues its server clock
//     above the largest timestamp of its TSFiles and log records, client
//     timestamps included, so after a reopen a ServerTime write lands
//     above a future client cell of its column (and a read-modify-write of
//     that column adds a version instead of replacing the future cell),
//     while before the reopen, as in Bigtable, it lands at the clock,
//     below it.
//   - Explicit timestamps are multiples of 1000: bttest, like Bigtable's
//     default millisecond granularity, refuses others.
//   - bttest applies a failing mutation or read-modify-write partially
//     (the rules before the failing one stay). Mutations here are always
//     valid; a read-modify-write whose increment would meet a cell that
//     is not 8 bytes (predicted from the row's current cells) is cut to
//     the rules before that one, unless it is the first rule: then both
//     must fail and nothing is written. Bighive answers FailedPrecondition,
//     as Bigtable documents; bttest answers Unknown (a plain error), so
//     only its failure is checked.
//   - bttest gives each read-modify-write rule its own clock reading, so
//     two rules of one column a millisecond apart leave two new versions
//     where Bigtable writes one cell per column; the test deletes bttest's
//     extra versions after such a read-modify-write.
//   - A bulk write names each row at most once (Bigtable applies the
//     entries of one MutateRows in no fixed order).
//   - The random filter trees are those of TestFilterDifferential, with
//     its restrictions (see its comment).
//   - No GC rules: bttest collects garbage lazily, Bighive hides it at
//     once, so reads of garbage legitimately differ.
func TestDifferential(t *testing.T) {
	t.Parallel()
	seed := *dSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -diff.seed=%d)", seed, seed)
	d := &diffRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc908)), splits: map[string]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d.ctx = ctx
	for i := range 30 {
		d.keys = append(d.keys, fmt.Sprintf("r%d%s", i%4, strings.Repeat("k", i/4)))
	}
	slices.Sort(d.keys)

	// A small write buffer: the tserver also checkpoints on its own, while
	// the operations run.
	d.c = inproc.Start(t, inproc.Options{TServers: 2, MemLimit: 16 << 10})
	d.cl = d.c.Client()
	d.bh = bighiveTable(t, ctx, d.c)
	d.bt = bttestTable(t, ctx)

	ops, round := *dOps, *dRounds
	if testing.Short() { // the fast loop: a fifth of the operations, still six rounds of maintenance
		ops, round = min(ops, 600), min(round, 100)
	}
	total := 0
	for _, k := range diffOpKinds {
		total += k.weight
	}
	counts := map[string]int{}
	start := time.Now()
	for d.op = 0; d.op < ops; d.op++ {
		n := d.rng.IntN(total)
		for _, k := range diffOpKinds {
			if n -= k.weight; n < 0 {
				d.kind, d.desc = k.name, ""
				k.run(d)
				counts[k.name]++
				break
			}
		}
		if (d.op+1)%round == 0 || d.op+1 == ops {
			d.kind, d.desc = "between rounds", ""
			d.maintain()
			d.kind = "full scan"
			d.compareScan("", "", "", nil, nil, false, false, 0)
		}
	}
	t.Logf("%d operations in %v: %v; maintenance %v", ops, time.Since(start).Round(time.Millisecond), counts, d.maintained)
}

// diffOpKinds are the random operations of TestDifferential, picked with
// probability weight/sum of weights. Add a kind with one entry.
var diffOpKinds = []struct {
	name   string
	weight int
	run    func(*diffRun)
}{
	{"apply", 30, (*diffRun).opApply},
	{"apply bulk", 8, (*diffRun).opBulk},
	{"read-modify-write", 10, (*diffRun).opReadModifyWrite},
	{"get", 12, (*diffRun).opGet},
	{"scan", 12, (*diffRun).opScan},
	{"check-and-mutate", 10, (*diffRun).opCheckAndMutate},
	{"read rows", 12, (*diffRun).opReadRows},
	{"sample row keys", 1, (*diffRun).opSampleRowKeys},
}

// opCheckAndMutate runs one conditional mutation on both: a random
// predicate (nil a sixth of the time) and random true and false mutations
// (either may be absent; with both absent Bighive must refuse it, as
// Bigtable does, while bttest accepts it). The predicate's match and the
// row afterwards are compared.
func (d *diffRun) opCheckAndMutate() {
	key := d.key()
	var pred client.Filter
	var bpred bigtable.Filter
	pdesc := "nil predicate"
	g := &filterGen{rng: d.rng}
	if d.rng.IntN(6) != 0 {
		pred, bpred = g.tree(3)
		pdesc = pred.String()
	}
	branch := func() (*client.Mutation, *bigtable.Mutation, string, bool) {
		if d.rng.IntN(3) == 0 {
			return nil, nil, "none", false
		}
		return d.mutation()
	}
	mt, bmt, dt, st := branch()
	mf, bmf, df, sf := branch()
	d.desc = fmt.Sprintf("on %s: if %s then [%s] else [%s]", key, pdesc, dt, df)
	var matched, bmatched bool
	err := d.bh.Apply(d.ctx, key, client.NewCondMutation(pred, mt, mf), client.GetCondMutationResult(&matched))
	if g.invalid > 0 || mt == nil && mf == nil {
		if status.Code(err) != codes.InvalidArgument {
			d.failf("bighive err %v, want InvalidArgument", err)
		}
		d.reread(key) // nothing was written
		return
	}
	berr := d.bt.Apply(d.ctx, key, bigtable.NewCondMutation(bpred, bmt, bmf), bigtable.GetCondMutationResult(&bmatched))
	if err != nil || berr != nil {
		d.failf("bighive err %v, bttest err %v", err, berr)
	}
	if matched != bmatched {
		d.failf("bighive matched %v, bttest %v", matched, bmatched)
	}
	if matched && st || !matched && sf {
		d.serverTime()
	}
	d.reread(key)
}

// opReadRows reads a random row set (keys, a range, or several ranges
// with every bound kind) from both, with random read options, a row
// limit a third of the time and in reverse a third of the time.
func (d *diffRun) opReadRows() {
	rs, brs, sdesc := (&rowSetGen{rng: d.rng, keys: d.keys}).set()
	opts, chain, odesc, labels, invalid := d.readOpts()
	bopts := btFilter(chain)
	var limit int64
	if d.rng.IntN(3) == 0 {
		limit = int64(1 + d.rng.IntN(5))
		opts, bopts = append(opts, client.LimitRows(limit)), append(bopts, bigtable.LimitRows(limit))
	}
	reverse := d.rng.IntN(3) == 0
	if reverse {
		opts, bopts = append(opts, client.ReverseScan()), append(bopts, bigtable.ReverseScan())
	}
	if invalid {
		// An empty row set sends no request (in the official client too),
		// so nothing checks the filter: read the whole table instead.
		rs, brs, sdesc = client.InfiniteRange(""), bigtable.InfiniteRange(""), "Infinite(\"\")"
	}
	d.desc = fmt.Sprintf("%s limit %d reverse %v %s", sdesc, limit, reverse, odesc)
	var got []client.Row
	err := d.bh.ReadRows(d.ctx, rs, func(r client.Row) bool { got = append(got, r); return true }, opts...)
	if invalid {
		if status.Code(err) != codes.InvalidArgument {
			d.failf("an invalid filter: bighive err %v, want InvalidArgument", err)
		}
		return
	}
	var want []bigtable.Row
	berr := d.bt.ReadRows(d.ctx, brs, func(r bigtable.Row) bool { want = append(want, r); return true }, bopts...)
	if err != nil || berr != nil {
		d.failf("bighive err %v, bttest err %v", err, berr)
	}
	d.sameRows(d.desc, got, want, labels)
}

// opSampleRowKeys checks the shape of Bighive's samples only: bttest's
// are not a size estimate (it samples every few rows), so the keys
// cannot be compared. They must be strictly increasing and end with ""
// (the end of the table), with offsets that never decrease.
func (d *diffRun) opSampleRowKeys() {
	d.desc = "SampleRowKeyOffsets(16 KiB)"
	samples, err := d.bh.SampleRowKeyOffsets(d.ctx, 16<<10)
	if err != nil {
		d.failf("bighive err %v", err)
	}
	if len(samples) == 0 || samples[len(samples)-1].Key != "" {
		d.failf("samples %+v: want the last one to be the end of the table", samples)
	}
	for i := 1; i < len(samples); i++ {
		p, c := samples[i-1], samples[i]
		if c.Key != "" && c.Key <= p.Key || c.OffsetBytes < p.OffsetBytes {
			d.failf("samples %+v: not increasing at %d", samples, i)
		}
	}
}

// diffRun is the state of one TestDifferential.
type diffRun struct {
	t    *testing.T
	ctx  context.Context
	seed uint64
	rng  *rand.Rand
	c    *inproc.Cluster
	cl   *client.Client
	bh   *client.Table
	bt   *bigtable.Table
	keys []string

	op         int    // the index of the operation running
	kind       string // its kind
	desc       string // what it does, when set
	splits     map[string]bool
	maintained []string
}

// failf stops the test with the seed, the operation and what differs.
func (d *diffRun) failf(format string, args ...any) {
	d.t.Helper()
	kind := d.kind
	if d.desc != "" {
		kind += ": " + d.desc
	}
	d.t.Fatalf("seed %d, op %d (%s): %s\n(rerun with -diff.seed=%d -diff.ops=%d)", d.seed, d.op, kind,
		fmt.Sprintf(format, args...), d.seed, d.op+1)
}

func (d *diffRun) key() string { return d.keys[d.rng.IntN(len(d.keys))] }

func (d *diffRun) pick(ss ...string) string { return ss[d.rng.IntN(len(ss))] }

var (
	diffQuals = []string{"a", "b", "c", "ab", "q1", "", futureQual}
	diffVals  = []string{"", "x", "y", "zz", "v1", "v22", "abc",
		"é", "a\xff", // bytes above 0x7f, matched by regexes as one character each
		"\x00\x00\x00\x00\x00\x00\x00\x02", "\x00\x00\x00\x00\x00\x00\x01\x00", "\xff\xff\xff\xff\xff\xff\xff\xfe"}
)

// futureTS is an explicit timestamp beyond the clocks (in 2096), written
// only to qualifier futureQual (see TestDifferential's comment).
const (
	futureTS   = int64(4e15)
	futureQual = "ft"
)

// explicitTS is a random explicit timestamp of qualifier q: a multiple of
// 1000 µs (bttest's table granularity) in [0, 8000], so that writes
// collide, or for futureQual sometimes futureTS.
func (d *diffRun) explicitTS(q string) int64 {
	if q == futureQual && d.rng.IntN(3) == 0 {
		return futureTS
	}
	return int64(d.rng.IntN(9)) * 1000
}

// serverQual is a random qualifier for a server timestamp: not futureQual.
func (d *diffRun) serverQual() string {
	for {
		if q := d.pick(diffQuals...); q != futureQual {
			return q
		}
	}
}

// serverTime waits until bttest's clock (this process's, truncated to
// milliseconds) has moved past the last server timestamp it assigned.
func (d *diffRun) serverTime() {
	ms := time.Now().UnixMilli()
	for time.Now().UnixMilli() <= ms {
		time.Sleep(100 * time.Microsecond)
	}
}

// mutation builds the same random mutation for both; desc lists its ops.
// server reports whether it sets a cell with a server timestamp.
func (d *diffRun) mutation() (m *client.Mutation, bm *bigtable.Mutation, desc string, server bool) {
	m, bm = client.NewMutation(), bigtable.NewMutation()
	var ops []string
	serverCols := map[string]bool{}
	for range 1 + d.rng.IntN(5) {
		fam, q := d.pick(diffFamilies...), d.pick(diffQuals...)
		switch r := d.rng.IntN(100); {
		case r < 8:
			m.DeleteCellsInColumn(fam, q)
			bm.DeleteCellsInColumn(fam, q)
			ops = append(ops, fmt.Sprintf("DeleteCellsInColumn(%s:%s)", fam, q))
		case r < 20:
			start := int64(d.rng.IntN(8)) * 1000
			end := int64(0)
			if d.rng.IntN(3) != 0 {
				end = start + int64(1+d.rng.IntN(4))*1000
			}
			m.DeleteTimestampRange(fam, q, start, end)
			bm.DeleteTimestampRange(fam, q, bigtable.Timestamp(start), bigtable.Timestamp(end))
			ops = append(ops, fmt.Sprintf("DeleteTimestampRange(%s:%s, %d, %d)", fam, q, start, end))
		case r < 27:
			m.DeleteCellsInFamily(fam)
			bm.DeleteCellsInFamily(fam)
			ops = append(ops, fmt.Sprintf("DeleteCellsInFamily(%s)", fam))
		case r < 31:
			m.DeleteRow()
			bm.DeleteRow()
			ops = append(ops, "DeleteRow()")
		default:
			ts := d.explicitTS(q)
			if r < 36 && q != futureQual && !serverCols[fam+":"+q] {
				serverCols[fam+":"+q], server, ts = true, true, client.ServerTime
			}
			v := d.pick(diffVals...)
			m.Set(fam, q, ts, []byte(v))
			bm.Set(fam, q, bigtable.Timestamp(ts), []byte(v))
			ops = append(ops, fmt.Sprintf("Set(%s:%s, %d, %q)", fam, q, ts, v))
		}
	}
	return m, bm, strings.Join(ops, "; "), server
}

func (d *diffRun) opApply() {
	key := d.key()
	m, bm, desc, server := d.mutation()
	d.desc = "apply to " + key + " [" + desc + "]"
	err := d.bh.Apply(d.ctx, key, m)
	berr := d.bt.Apply(d.ctx, key, bm)
	if err != nil || berr != nil {
		d.failf("bighive err %v, bttest err %v", err, berr)
	}
	if server {
		d.serverTime()
	}
	if d.rng.IntN(3) == 0 { // read the row back at once too
		d.reread(key)
	}
}

func (d *diffRun) opBulk() {
	n := 2 + d.rng.IntN(5)
	keys := slices.Clone(d.keys)
	d.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	keys = keys[:n]
	var ms []*client.Mutation
	var bms []*bigtable.Mutation
	var descs []string
	server := false
	for _, k := range keys {
		m, bm, desc, s := d.mutation()
		ms, bms, descs, server = append(ms, m), append(bms, bm), append(descs, k+": "+desc), server || s
	}
	d.desc = strings.Join(descs, " | ")
	errs, err := d.bh.ApplyBulk(d.ctx, keys, ms)
	berrs, berr := d.bt.ApplyBulk(d.ctx, keys, bms)
	if err != nil || berr != nil || errs != nil || berrs != nil {
		d.failf("bighive %v %v, bttest %v %v", errs, err, berrs, berr)
	}
	if server {
		d.serverTime()
	}
}

// rmwRule is one read-modify-write rule, for both clients.
type rmwRule struct {
	fam, qual string
	incr      bool
	delta     int64
	app       []byte
}

func (r rmwRule) String() string {
	if r.incr {
		return fmt.Sprintf("Increment(%s:%s, %d)", r.fam, r.qual, r.delta)
	}
	return fmt.Sprintf("AppendValue(%s:%s, %q)", r.fam, r.qual, r.app)
}

func (d *diffRun) opReadModifyWrite() {
	key := d.key()
	var rules []rmwRule
	for range 1 + d.rng.IntN(3) {
		r := rmwRule{fam: d.pick(diffFamilies...), qual: d.serverQual()}
		if d.rng.IntN(2) == 0 {
			r.incr, r.delta = true, int64(d.rng.IntN(9)-3)
		} else {
			r.app = []byte(d.pick("", "x", "ab", "\x00\x01"))
		}
		rules = append(rules, r)
	}
	// Predict which rule, if any, increments a cell that is not 8 bytes,
	// from the row's latest cells (read from Bighive: its state equals
	// bttest's, or an earlier comparison would have stopped the test).
	row, err := d.bh.Get(d.ctx, key)
	if err != nil {
		d.failf("get %s: %v", key, err)
	}
	cur := map[string][]byte{}
	for _, c := range row.Cells {
		if _, ok := cur[c.Family+":"+c.Qualifier]; !ok {
			cur[c.Family+":"+c.Qualifier] = c.Value
		}
	}
	failing := -1
	for i, r := range rules {
		col := r.fam + ":" + r.qual
		v, ok := cur[col]
		if !r.incr {
			cur[col] = append(slices.Clone(v), r.app...)
			continue
		}
		if ok && len(v) != 8 {
			failing = i
			break
		}
		var n int64
		if ok {
			n = int64(binary.BigEndian.Uint64(v))
		}
		cur[col] = binary.BigEndian.AppendUint64(nil, uint64(n+r.delta))
	}
	if failing > 0 {
		rules = rules[:failing] // bttest would keep the rules before the failing one
	}
	// bttest writes each rule's cell at its own clock reading: two rules
	// of one column a millisecond apart leave two new versions there,
	// where Bigtable (and Bighive) write one cell per column. Note the
	// latest timestamp of each column before, to delete bttest's extra
	// versions after: before is the column's latest timestamp + 1 ms.
	brow, err := d.bt.ReadRow(d.ctx, key)
	if err != nil {
		d.failf("bttest read %s: %v", key, err)
	}
	before := map[string]int64{}
	for _, c := range bttestCells(brow) {
		if col := c.fam + ":" + c.qual; c.ts >= before[col] {
			before[col] = c.ts + 1000
		}
	}
	m, bm := client.NewReadModifyWrite(), bigtable.NewReadModifyWrite()
	var descs []string
	for _, r := range rules {
		if r.incr {
			m.Increment(r.fam, r.qual, r.delta)
			bm.Increment(r.fam, r.qual, r.delta)
		} else {
			m.AppendValue(r.fam, r.qual, r.app)
			bm.AppendValue(r.fam, r.qual, r.app)
		}
		descs = append(descs, r.String())
	}
	desc := fmt.Sprintf("read-modify-write of %s [%s]", key, strings.Join(descs, "; "))
	d.desc = desc
	got, err := d.bh.ApplyReadModifyWrite(d.ctx, key, m)
	want, berr := d.bt.ApplyReadModifyWrite(d.ctx, key, bm)
	d.serverTime()
	if berr == nil {
		fix := bigtable.NewMutation()
		fixes := 0
		for _, c := range bttestCells(want) {
			n := 0
			for _, r := range rules {
				if r.fam == c.fam && r.qual == c.qual {
					n++
				}
			}
			start := before[c.fam+":"+c.qual] // 0 if the column was empty
			if n > 1 && start < c.ts {
				fix.DeleteTimestampRange(c.fam, c.qual, bigtable.Timestamp(start), bigtable.Timestamp(c.ts))
				fixes++
			}
		}
		if fixes > 0 {
			if err := d.bt.Apply(d.ctx, key, fix); err != nil {
				d.failf("bttest: delete the extra versions of a read-modify-write: %v", err)
			}
		}
	}
	if failing == 0 {
		// Bigtable answers FailedPrecondition; bttest a plain error
		// (codes.Unknown), so only that it failed is compared.
		if status.Code(err) != codes.FailedPrecondition || berr == nil {
			d.failf("%s: an increment of a cell that is not 8 bytes: bighive err %v (want FailedPrecondition), bttest err %v (want an error)", desc, err, berr)
		}
		d.reread(key)
		return
	}
	if err != nil || berr != nil {
		d.failf("%s: bighive err %v, bttest err %v", desc, err, berr)
	}
	gs, ws := renderRow(nil, bighiveCells(got), false), renderRow(nil, bttestCells(want), false)
	if gs != ws {
		d.failf("%s:\nbighive %s\nbttest  %s", desc, gs, ws)
	}
	d.reread(key)
}

// readOpts builds random read options for both clients: a selection
// (families, one column, a time range, latest N: Bighive's ReadOptions,
// bttest's equivalent filters chained in the order Bighive applies them)
// and, half the time, a random RowFilter tree of TestFilterDifferential.
// labels says whether labels are comparable, invalid whether Bighive must
// refuse the read with InvalidArgument.
func (d *diffRun) readOpts() (opts []client.ReadOption, chain []bigtable.Filter, desc string, labels, invalid bool) {
	var ds []string
	switch d.rng.IntN(7) {
	case 2:
		// A family and a column of another family: the union.
		fs := slices.Clone(diffFamilies)
		d.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		q := d.pick(diffQuals...)
		opts = append(opts, client.Families(fs[0]), client.Column(fs[1], q))
		chain = append(chain, bigtable.InterleaveFilters(bigtable.FamilyFilter(fs[0]),
			bigtable.ChainFilters(bigtable.FamilyFilter(fs[1]), bigtable.ColumnFilter(regexp.QuoteMeta(q)))))
		ds = append(ds, fmt.Sprintf("Families(%s) Column(%s:%s)", fs[0], fs[1], q))
	case 0:
		fs := slices.Clone(diffFamilies)
		d.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		fs = fs[:1+d.rng.IntN(2)]
		opts = append(opts, client.Families(fs...))
		chain = append(chain, bigtable.FamilyFilter(strings.Join(fs, "|")))
		ds = append(ds, fmt.Sprintf("Families%q", fs))
	case 1:
		f, q := d.pick(diffFamilies...), d.pick(diffQuals...)
		opts = append(opts, client.Column(f, q))
		chain = append(chain, bigtable.FamilyFilter(f), bigtable.ColumnFilter(regexp.QuoteMeta(q)))
		ds = append(ds, fmt.Sprintf("Column(%s:%s)", f, q))
	}
	if d.rng.IntN(5) == 0 {
		s := int64(d.rng.IntN(6)) * 1000
		e := int64(0)
		if d.rng.IntN(2) == 0 {
			e = s + int64(1+d.rng.IntN(4))*1000
		}
		opts = append(opts, client.TimeRange(s, e))
		chain = append(chain, bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(s), bigtable.Timestamp(e)))
		ds = append(ds, fmt.Sprintf("TimeRange(%d, %d)", s, e))
	}
	if d.rng.IntN(5) == 0 {
		n := 1 + d.rng.IntN(3)
		opts = append(opts, client.LatestN(n))
		chain = append(chain, bigtable.LatestNFilter(n))
		ds = append(ds, fmt.Sprintf("LatestN(%d)", n))
	}
	labels = true
	if d.rng.IntN(2) == 0 {
		g := &filterGen{rng: d.rng}
		ours, theirs := g.tree(3)
		opts = append(opts, client.RowFilter(ours))
		chain = append(chain, theirs)
		ds = append(ds, "RowFilter("+ours.String()+")")
		labels, invalid = !(g.labels > 0 && g.strips > 0), g.invalid > 0
	}
	return opts, chain, strings.Join(ds, " "), labels, invalid
}

// btFilter is the chain of filters as one bttest read option.
func btFilter(chain []bigtable.Filter) []bigtable.ReadOption {
	switch len(chain) {
	case 0:
		return nil
	case 1:
		return []bigtable.ReadOption{bigtable.RowFilter(chain[0])}
	}
	return []bigtable.ReadOption{bigtable.RowFilter(bigtable.ChainFilters(chain...))}
}

func (d *diffRun) opGet() {
	key := d.key()
	if d.rng.IntN(10) == 0 {
		key += "-missing"
	}
	opts, chain, desc, labels, invalid := d.readOpts()
	d.compareGet(key, desc, opts, chain, labels, invalid)
}

// reread compares the whole of row key in both.
func (d *diffRun) reread(key string) {
	d.t.Helper()
	d.compareGet(key, "", nil, nil, false, false)
}

// compareGet reads row key from both with the read options of readOpts.
func (d *diffRun) compareGet(key, optsDesc string, opts []client.ReadOption, chain []bigtable.Filter, labels, invalid bool) {
	d.t.Helper()
	desc := fmt.Sprintf("get %s %s", key, optsDesc)
	got, err := d.bh.Get(d.ctx, key, opts...)
	if invalid {
		if status.Code(err) != codes.InvalidArgument {
			d.failf("%s: an invalid filter: bighive err %v, want InvalidArgument", desc, err)
		}
		return
	}
	want, berr := d.bt.ReadRow(d.ctx, key, btFilter(chain)...)
	if err != nil || berr != nil {
		d.failf("%s: bighive err %v, bttest err %v", desc, err, berr)
	}
	d.checkOrder(got)
	gs, ws := renderRow(nil, bighiveCells(got), labels), renderRow(nil, bttestCells(want), labels)
	if gs != ws {
		d.failf("%s:\nbighive %s\nbttest  %s", desc, gs, ws)
	}
}

func (d *diffRun) opScan() {
	bounds := append([]string{""}, d.keys...)
	start, end := d.pick(bounds...), d.pick(bounds...)
	if d.rng.IntN(4) == 0 {
		start += "\x00"
	}
	if end != "" && end <= start {
		start, end = end, start
		if start == "" || end <= start {
			end = ""
		}
	}
	limit := int64(0)
	if d.rng.IntN(3) == 0 {
		limit = int64(1 + d.rng.IntN(5))
	}
	opts, chain, desc, labels, invalid := d.readOpts()
	d.compareScan(start, end, desc, opts, chain, labels, invalid, limit)
}

// compareScan scans [start, end) of both (with a row limit when limit >
// 0) and compares the rows.
func (d *diffRun) compareScan(start, end, optsDesc string, opts []client.ReadOption, chain []bigtable.Filter, labels, invalid bool, limit int64) {
	d.t.Helper()
	desc := fmt.Sprintf("scan [%q, %q) limit %d %s", start, end, limit, optsDesc)
	bopts := btFilter(chain)
	if limit > 0 {
		opts = append(opts, client.LimitRows(limit))
		bopts = append(bopts, bigtable.LimitRows(limit))
	}
	var got []client.Row
	var want []bigtable.Row
	err := d.bh.Scan(d.ctx, start, end, func(r client.Row) bool {
		got = append(got, r)
		return true
	}, opts...)
	if invalid {
		if status.Code(err) != codes.InvalidArgument {
			d.failf("%s: an invalid filter: bighive err %v, want InvalidArgument", desc, err)
		}
		return
	}
	rr := bigtable.RowSet(bigtable.InfiniteRange(start))
	if end != "" {
		rr = bigtable.NewRange(start, end)
	}
	berr := d.bt.ReadRows(d.ctx, rr, func(r bigtable.Row) bool {
		want = append(want, r)
		return true
	}, bopts...)
	if err != nil || berr != nil {
		d.failf("%s: bighive err %v, bttest err %v", desc, err, berr)
	}
	d.sameRows(desc, got, want, labels)
}

// sameRows compares the rows two reads returned, in their order, with
// labels when comparable, and checks the order of Bighive's cells.
func (d *diffRun) sameRows(desc string, got []client.Row, want []bigtable.Row, labels bool) {
	d.t.Helper()
	var gs, ws []string
	for _, r := range got {
		d.checkOrder(r)
		gs = append(gs, renderRow(&r.Key, bighiveCells(r), labels))
	}
	for _, r := range want {
		k := r.Key()
		ws = append(ws, renderRow(&k, bttestCells(r), labels))
	}
	if !slices.Equal(gs, ws) {
		d.failf("%s:\nbighive %d rows:\n  %s\nbttest %d rows:\n  %s", desc,
			len(gs), strings.Join(gs, "\n  "), len(ws), strings.Join(ws, "\n  "))
	}
}

// checkOrder checks that a Bighive row's cells are in family, qualifier,
// newest-first order (the rendering below sorts, so it would not see it).
func (d *diffRun) checkOrder(r client.Row) {
	d.t.Helper()
	for i := 1; i < len(r.Cells); i++ {
		p, c := r.Cells[i-1], r.Cells[i]
		if p.Family > c.Family || p.Family == c.Family && (p.Qualifier > c.Qualifier || p.Qualifier == c.Qualifier && p.Timestamp < c.Timestamp) {
			d.failf("row %s: bighive's cells out of order at %d: %+v", r.Key, i, r.Cells)
		}
	}
}

// diffCellOf is one returned cell of either system.
type diffCellOf struct {
	fam, qual string
	ts        int64
	val       []byte
	labels    []string
}

func bighiveCells(r client.Row) []diffCellOf {
	var out []diffCellOf
	for _, c := range r.Cells {
		out = append(out, diffCellOf{c.Family, c.Qualifier, c.Timestamp, c.Value, c.Labels})
	}
	return out
}

func bttestCells(r bigtable.Row) []diffCellOf {
	var out []diffCellOf
	for fam, items := range r {
		for _, it := range items {
			out = append(out, diffCellOf{fam, strings.TrimPrefix(it.Column, fam+":"), int64(it.Timestamp), it.Value, it.Labels})
		}
	}
	return out
}

// minServerTS separates server timestamps (this century's clock, in µs)
// from the test's small explicit ones; futureTS, above it, ranks the same
// in both (its column has no server timestamps).
const minServerTS = int64(1e15)

// renderRow renders a row's cells canonically: sorted (so the families'
// and equal cells' order does not matter: bttest walks families in map
// order and sorts duplicates unstably), a server timestamp as its rank
// among the distinct server timestamps returned of its column (S0 the
// newest), labels only when comparable. key, when set, prefixes it.
func renderRow(key *string, cells []diffCellOf, labels bool) string {
	server := map[string][]int64{}
	for _, c := range cells {
		if col := c.fam + ":" + c.qual; c.ts >= minServerTS && !slices.Contains(server[col], c.ts) {
			server[col] = append(server[col], c.ts)
		}
	}
	for _, ts := range server {
		slices.Sort(ts)
		slices.Reverse(ts)
	}
	var cs []string
	for _, c := range cells {
		ts := fmt.Sprint(c.ts)
		if c.ts >= minServerTS {
			ts = fmt.Sprintf("S%d", slices.Index(server[c.fam+":"+c.qual], c.ts))
		}
		cs = append(cs, diffCell(c.fam, c.qual, 0, c.val, c.labels, labels))
		cs[len(cs)-1] = strings.Replace(cs[len(cs)-1], "@0=", "@"+ts+"=", 1)
	}
	slices.Sort(cs)
	s := strings.Join(cs, " ")
	if key != nil {
		s = *key + " " + s
	}
	return s
}

// unavailableRetry calls fn again while it fails with Unavailable: a
// tablet moving between the tservers (the master rebalances them) or a
// tserver restarting refuses a checkpoint or a split for a moment.
func (d *diffRun) unavailableRetry(fn func() error) error {
	for {
		err := fn()
		if status.Code(err) != codes.Unavailable || d.ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// maintain runs one of the between-round actions on Bighive: a
// checkpoint, a minor or a major compaction, a restart of the tserver, or
// a split of the tablet of a random key at that key (at most 8 splits a
// run).
func (d *diffRun) maintain() {
	what := d.pick("checkpoint", "minor compaction", "major compaction", "split", "split", "restart")
	if what == "split" && len(d.splits) >= 8 {
		what = "major compaction"
	}
	began := time.Now()
	var err error
	switch what {
	case "checkpoint":
		err = d.unavailableRetry(func() error { _, err := d.cl.CheckpointAll(d.ctx); return err })
	case "minor compaction":
		err = d.c.Compact(d.ctx, false)
	case "major compaction":
		err = d.c.Compact(d.ctx, true)
	case "restart":
		// The tserver reloads its tablets from TSFiles and replays its log
		// (or the master moves them to the other one, which replays its
		// part of the log).
		i := d.rng.IntN(d.c.TServers())
		what += fmt.Sprint(" ", i)
		if err = d.c.RestartTServer(i); err == nil {
			err = d.c.WaitServing(d.ctx, "t")
		}
	case "split":
		var at string
		for at == "" || d.splits[at] || at == d.keys[0] {
			at = d.key()
		}
		d.splits[at] = true
		what += " at " + at
		before, lerr := d.cl.Tablets(d.ctx, "t")
		if lerr != nil {
			d.failf("tablets: %v", lerr)
		}
		if err = d.unavailableRetry(func() error { return d.cl.SplitTablet(d.ctx, "t", at) }); err != nil {
			break
		}
		if err := wait.Until(d.ctx, func() error {
			tablets, err := d.cl.Tablets(d.ctx, "t")
			if err == nil && len(tablets) != len(before)+1 {
				err = fmt.Errorf("tablets %+v", tablets)
			}
			return err
		}); err != nil {
			d.failf("the split at %s did not finish: %v", at, err)
		}
		err = d.c.WaitServing(d.ctx, "t")
	}
	if err != nil {
		d.failf("%s: %v", what, err)
	}
	d.maintained = append(d.maintained, fmt.Sprintf("%s %v", what, time.Since(began).Round(time.Millisecond)))
}
