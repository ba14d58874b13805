package inproc_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/testkit/inproc"
)

// TestModel is a seeded randomized test of the whole tserver: a real
// master, three real tservers with real storage, and the real client run
// random mutations of every kind, reads, checkpoints, compactions,
// restarts and one failover, and every read is compared with a simple
// in-memory model of Bigtable's semantics. A difference fails with the
// seed and the index of the operation; rerun it with
//
//	go test ./testkit/inproc -run TestModel -model.seed=SEED [-model.ops=N] -v
//
// and raise -model.ops to run longer.
var (
	modelSeed = flag.Uint64("model.seed", 0, "TestModel: the seed (0: pick one from the clock)")
	modelOps  = flag.Int("model.ops", 2000, "TestModel: the number of operations (at most 500 with -short)")
)

// The model's semantics:
//   - a cell (row, family, qualifier, timestamp) written again is
//     overwritten;
//   - a delete (of a column, optionally a time range of it, a family, a
//     row) removes the cells written before it, in write order, whose
//     timestamps it covers; the operations of one mutation apply in order;
//   - a read returns the columns in order, each newest first;
//   - family "mv" keeps 2 versions: a read never shows more than 2 of a
//     column, and shows every cell that has always been among the newest 2
//     of its column. A cell that was ever pushed out (doomed) may still be
//     seen until a compaction drops it, since Bigtable collects garbage
//     lazily; the model accepts both.
const (
	modelTable = "model"
	modelRows  = 30
	modelMaxTS = 40 // explicit timestamps are in [1, modelMaxTS]
	mvVersions = 2
	// Server and client clocks are far above the explicit timestamps.
	clockTS = int64(1e12)
)

var (
	modelFamilies   = []string{"cf", "mv"}
	modelQualifiers = []string{"a", "b", "c"}
)

type mcol struct{ fam, q string }

type mcell struct {
	ts     int64
	val    string
	doomed bool // was once not among the newest mvVersions of its column
}

// model holds the cells of every row, each column newest first.
type model struct {
	rows map[string]map[mcol][]mcell
}

func (m *model) column(row string, c mcol) []mcell {
	return m.rows[row][c]
}

func (m *model) setCol(row string, c mcol, cells []mcell) {
	if len(cells) == 0 {
		delete(m.rows[row], c)
		if len(m.rows[row]) == 0 {
			delete(m.rows, row)
		}
		return
	}
	if m.rows[row] == nil {
		m.rows[row] = map[mcol][]mcell{}
	}
	m.rows[row][c] = cells
}

// op is one operation of a mutation.
type op struct {
	kind       string // "set", "delcol", "delfam", "delrow"
	fam, q     string
	ts         int64 // set: the timestamp (client.ServerTime: assigned)
	val        string
	start, end int64 // delcol: the time range; end 0 is unbounded; ranged false: all
	ranged     bool
}

func (o op) String() string {
	switch o.kind {
	case "set":
		ts := fmt.Sprint(o.ts)
		if o.ts == client.ServerTime {
			ts = "server"
		}
		return fmt.Sprintf("set %s:%s@%s=%s", o.fam, o.q, ts, o.val)
	case "delcol":
		if o.ranged {
			return fmt.Sprintf("delete %s:%s in [%d, %d)", o.fam, o.q, o.start, o.end)
		}
		return fmt.Sprintf("delete %s:%s", o.fam, o.q)
	case "delfam":
		return "delete family " + o.fam
	default:
		return "delete row"
	}
}

func (o op) apply(m *client.Mutation) {
	switch o.kind {
	case "set":
		m.Set(o.fam, o.q, o.ts, []byte(o.val))
	case "delcol":
		if o.ranged {
			m.DeleteTimestampRange(o.fam, o.q, o.start, o.end)
		} else {
			m.DeleteCellsInColumn(o.fam, o.q)
		}
	case "delfam":
		m.DeleteCellsInFamily(o.fam)
	default:
		m.DeleteRow()
	}
}

func covers(start, end, ts int64) bool { return ts >= start && (end == 0 || ts < end) }

// apply applies the operations of one row mutation to the model, in order.
func (m *model) apply(row string, ops []op) {
	for _, o := range ops {
		switch o.kind {
		case "set":
			c := mcol{o.fam, o.q}
			cells := slices.DeleteFunc(slices.Clone(m.column(row, c)), func(x mcell) bool { return x.ts == o.ts })
			cells = append(cells, mcell{ts: o.ts, val: o.val})
			slices.SortFunc(cells, func(a, b mcell) int { return compareInt(b.ts, a.ts) })
			m.setCol(row, c, cells)
		case "delcol":
			c := mcol{o.fam, o.q}
			m.setCol(row, c, slices.DeleteFunc(slices.Clone(m.column(row, c)), func(x mcell) bool {
				return !o.ranged || covers(o.start, o.end, x.ts)
			}))
		case "delfam":
			for c := range m.rows[row] {
				if c.fam == o.fam {
					m.setCol(row, c, nil)
				}
			}
		default:
			delete(m.rows, row)
		}
	}
	for c, cells := range m.rows[row] {
		if c.fam == "mv" {
			for i := mvVersions; i < len(cells); i++ {
				cells[i].doomed = true
			}
		}
	}
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// filter is a read's options, as the model evaluates them.
type filter struct {
	families   []string
	columns    []mcol
	start, end int64
	ranged     bool
	latest     int // 0: all
}

func (f filter) String() string {
	var parts []string
	if len(f.families) > 0 {
		parts = append(parts, "families "+strings.Join(f.families, ","))
	}
	for _, c := range f.columns {
		parts = append(parts, "column "+c.fam+":"+c.q)
	}
	if f.ranged {
		parts = append(parts, fmt.Sprintf("time [%d, %d)", f.start, f.end))
	}
	if f.latest > 0 {
		parts = append(parts, fmt.Sprintf("latest %d", f.latest))
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, ", ")
}

func (f filter) options() []client.ReadOption {
	var out []client.ReadOption
	if len(f.families) > 0 {
		out = append(out, client.Families(f.families...))
	}
	for _, c := range f.columns {
		out = append(out, client.Column(c.fam, c.q))
	}
	if f.ranged {
		out = append(out, client.TimeRange(f.start, f.end))
	}
	if f.latest > 0 {
		out = append(out, client.LatestN(f.latest))
	}
	return out
}

func (f filter) selects(c mcol, ts int64) bool {
	if f.ranged && !covers(f.start, f.end, ts) {
		return false
	}
	if len(f.families) == 0 && len(f.columns) == 0 {
		return true
	}
	return slices.Contains(f.families, c.fam) || slices.Contains(f.columns, c)
}

// expect is what a read of one row may return: per column, the cells it
// may show (newest first), the cells it must show, and a bound.
type expect struct {
	may  map[mcol][]mcell
	must map[mcol]map[int64]bool
	max  map[mcol]int // 0: no bound
}

func (e expect) mustShow() bool {
	for _, m := range e.must {
		if len(m) > 0 {
			return true
		}
	}
	return false
}

func (e expect) mayShow() bool { return len(e.may) > 0 }

func (m *model) expect(row string, f filter) expect {
	e := expect{may: map[mcol][]mcell{}, must: map[mcol]map[int64]bool{}, max: map[mcol]int{}}
	for c, cells := range m.rows[row] {
		var sel []mcell
		for _, x := range cells {
			if f.selects(c, x.ts) {
				sel = append(sel, x)
			}
		}
		if len(sel) == 0 {
			continue
		}
		e.may[c] = sel
		limit := f.latest
		if c.fam == "mv" && (limit == 0 || limit > mvVersions) {
			limit = mvVersions
		}
		e.max[c] = limit
		must := map[int64]bool{}
		for i, x := range sel {
			// A doomed cell the server still holds may rank above a cell
			// that has always been among the newest: only cells ranked
			// within the read's bound among everything it may see are
			// certain.
			if !x.doomed && (f.latest == 0 || i < f.latest) {
				must[x.ts] = true
			}
		}
		e.must[c] = must
	}
	return e
}

// check compares one row the server returned with the model's bounds and
// returns the difference, or "".
func (e expect) check(r client.Row) string {
	got := map[mcol][]client.Cell{}
	for i, c := range r.Cells {
		if i > 0 {
			p := r.Cells[i-1]
			if p.Family > c.Family || p.Family == c.Family && (p.Qualifier > c.Qualifier || p.Qualifier == c.Qualifier && p.Timestamp <= c.Timestamp) {
				return fmt.Sprintf("cells out of order at %d", i)
			}
		}
		k := mcol{c.Family, c.Qualifier}
		got[k] = append(got[k], c)
	}
	for k, cells := range got {
		may := map[int64]string{}
		for _, x := range e.may[k] {
			may[x.ts] = x.val
		}
		for _, c := range cells {
			v, ok := may[c.Timestamp]
			if !ok {
				return fmt.Sprintf("%s:%s@%d=%s should not be there", k.fam, k.q, c.Timestamp, c.Value)
			}
			if v != string(c.Value) {
				return fmt.Sprintf("%s:%s@%d is %q, want %q", k.fam, k.q, c.Timestamp, c.Value, v)
			}
		}
		if n := e.max[k]; n > 0 && len(cells) > n {
			return fmt.Sprintf("%s:%s shows %d versions, at most %d allowed", k.fam, k.q, len(cells), n)
		}
	}
	for k, must := range e.must {
		for ts := range must {
			if !slices.ContainsFunc(got[k], func(c client.Cell) bool { return c.Timestamp == ts }) {
				return fmt.Sprintf("%s:%s@%d is missing", k.fam, k.q, ts)
			}
		}
	}
	return ""
}

func (e expect) String() string {
	var cols []mcol
	for c := range e.may {
		cols = append(cols, c)
	}
	slices.SortFunc(cols, func(a, b mcol) int { return strings.Compare(a.fam+":"+a.q, b.fam+":"+b.q) })
	var parts []string
	for _, c := range cols {
		for _, x := range e.may[c] {
			s := fmt.Sprintf("%s:%s@%d=%s", c.fam, c.q, x.ts, x.val)
			if !e.must[c][x.ts] {
				s += "(may)"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func rowString(r client.Row) string {
	var parts []string
	for _, c := range r.Cells {
		parts = append(parts, fmt.Sprintf("%s:%s@%d=%s", c.Family, c.Qualifier, c.Timestamp, c.Value))
	}
	return strings.Join(parts, " ")
}

// modelRun is one run of the model test.
type modelRun struct {
	t      *testing.T
	seed   uint64
	rnd    *rand.Rand
	c      modelCluster
	tbl    *client.Table
	m      model
	i      int      // the operation running
	ops    int      // the operations of the run
	recent []string // the last operations, for the failure message
	// lastServerTS is the newest timestamp the server assigned in each
	// row: server timestamps increase strictly per tablet.
	lastServerTS map[string]int64
	stats        map[string]int
	took         map[string]time.Duration
}

// opKind names the kind of operation n picks in runModel, for the timing
// summary.
func opKind(n int) string {
	switch {
	case n < 490:
		return "write"
	case n < 980:
		return "read"
	case n < 997:
		return "checkpoint/compact"
	default:
		return "restart"
	}
}

func (r *modelRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("the last operations:\n%s", strings.Join(r.recent, "\n"))
	r.t.Fatalf("model: seed %d, op %d: %s\nrerun: go test ./testkit/inproc -run TestModel -model.seed=%d -model.ops=%d -v",
		r.seed, r.i, fmt.Sprintf(format, args...), r.seed, r.ops)
}

func (r *modelRun) note(format string, args ...any) {
	r.recent = append(r.recent, fmt.Sprintf("%5d ", r.i)+fmt.Sprintf(format, args...))
	if len(r.recent) > 40 {
		r.recent = r.recent[1:]
	}
}

func (r *modelRun) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

func (r *modelRun) row() string { return fmt.Sprintf("r%02d", r.rnd.IntN(modelRows)) }

func (r *modelRun) pick(xs []string) string { return xs[r.rnd.IntN(len(xs))] }

func (r *modelRun) ts() int64 { return 1 + r.rnd.Int64N(modelMaxTS) }

// randOp returns a random operation with an explicit timestamp.
func (r *modelRun) randOp() op {
	fam, q := r.pick(modelFamilies), r.pick(modelQualifiers)
	switch n := r.rnd.IntN(20); {
	case n < 12:
		return op{kind: "set", fam: fam, q: q, ts: r.ts(), val: fmt.Sprintf("v%d.%d", r.i, r.rnd.IntN(1000))}
	case n < 15:
		return op{kind: "delcol", fam: fam, q: q}
	case n < 18:
		start := r.rnd.Int64N(modelMaxTS)
		end := int64(0)
		if r.rnd.IntN(3) > 0 {
			end = start + 1 + r.rnd.Int64N(15)
		}
		return op{kind: "delcol", fam: fam, q: q, ranged: true, start: start, end: end}
	case n < 19:
		return op{kind: "delfam", fam: fam}
	default:
		return op{kind: "delrow"}
	}
}

func (r *modelRun) randFilter() filter {
	var f filter
	switch n := r.rnd.IntN(10); {
	case n < 4:
	case n < 6:
		f.families = []string{r.pick(modelFamilies)}
	case n < 9:
		f.columns = []mcol{{r.pick(modelFamilies), r.pick(modelQualifiers)}}
	default:
		f.families = []string{r.pick(modelFamilies)}
		f.columns = []mcol{{r.pick(modelFamilies), r.pick(modelQualifiers)}}
	}
	if r.rnd.IntN(10) < 3 {
		f.ranged = true
		f.start = r.rnd.Int64N(modelMaxTS)
		if r.rnd.IntN(3) > 0 {
			f.end = f.start + 1 + r.rnd.Int64N(20)
		}
	}
	if r.rnd.IntN(10) < 3 {
		f.latest = 1 + r.rnd.IntN(3)
	}
	return f
}

// mutate applies ops to row through the client and the model.
func (r *modelRun) mutate(row string, ops []op) {
	r.t.Helper()
	m := client.NewMutation()
	var desc []string
	for _, o := range ops {
		o.apply(m)
		desc = append(desc, o.String())
	}
	r.note("apply %s: %s", row, strings.Join(desc, "; "))
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.tbl.Apply(ctx, row, m); err != nil {
		r.fail("apply to %s: %v", row, err)
	}
	r.m.apply(row, ops)
}

// setClock writes one cell whose timestamp a clock assigns, the server's
// (Apply with ServerTime) or the client's (Put), and learns it by reading
// the cell back.
func (r *modelRun) setClock(row string, server bool) {
	r.t.Helper()
	fam, q := r.pick(modelFamilies), r.pick(modelQualifiers)
	val := fmt.Sprintf("v%d.clock", r.i)
	ctx, cancel := r.ctx()
	defer cancel()
	var err error
	if server {
		r.note("apply %s: set %s:%s@server=%s", row, fam, q, val)
		m := client.NewMutation()
		m.Set(fam, q, client.ServerTime, []byte(val))
		err = r.tbl.Apply(ctx, row, m)
	} else {
		r.note("put %s %s:%s=%s", row, fam, q, val)
		err = r.tbl.Put(ctx, row, fam, q, []byte(val))
	}
	if err != nil {
		r.fail("write %s: %v", row, err)
	}
	got, err := r.tbl.Get(ctx, row, client.Column(fam, q), client.TimeRange(clockTS, 0))
	if err != nil {
		r.fail("get %s to learn a timestamp: %v", row, err)
	}
	i := slices.IndexFunc(got.Cells, func(c client.Cell) bool { return string(c.Value) == val })
	if i < 0 {
		r.fail("the cell %s:%s=%s just written to %s is not there: %s", fam, q, val, row, rowString(got))
	}
	ts := got.Cells[i].Timestamp
	if i != 0 {
		r.fail("the cell just written, %s:%s@%d=%s, is not the newest of %s: %s", fam, q, ts, val, row, rowString(got))
	}
	if server {
		if last := r.lastServerTS[row]; ts <= last {
			r.fail("server timestamp %d for %s is not above the last one it assigned there, %d", ts, row, last)
		}
		r.lastServerTS[row] = ts
	}
	r.note("  learned timestamp %d", ts)
	r.m.apply(row, []op{{kind: "set", fam: fam, q: q, ts: ts, val: val}})
}

func (r *modelRun) get() {
	r.t.Helper()
	row, f := r.row(), r.randFilter()
	r.note("get %s (%s)", row, f)
	ctx, cancel := r.ctx()
	defer cancel()
	got, err := r.tbl.Get(ctx, row, f.options()...)
	if err != nil {
		r.fail("get %s: %v", row, err)
	}
	e := r.m.expect(row, f)
	if d := e.check(got); d != "" {
		r.fail("get %s (%s): %s\n got %s\nwant %s", row, f, d, rowString(got), e)
	}
	if len(got.Cells) == 0 && e.mustShow() {
		r.fail("get %s (%s): no cells, want %s", row, f, e)
	}
}

func (r *modelRun) scan(start, end string, limit int, f filter) {
	r.t.Helper()
	r.note("scan [%q, %q) limit %d (%s)", start, end, limit, f)
	opts := f.options()
	if limit > 0 {
		opts = append(opts, client.LimitRows(int64(limit)))
	}
	ctx, cancel := r.ctx()
	defer cancel()
	var got []client.Row
	if err := r.tbl.Scan(ctx, start, end, func(row client.Row) bool { got = append(got, row); return true }, opts...); err != nil {
		r.fail("scan: %v", err)
	}
	if limit > 0 && len(got) > limit {
		r.fail("scan [%q, %q) limit %d returned %d rows", start, end, limit, len(got))
	}
	// Walk the model's rows of the range alongside the rows returned.
	var keys []string
	for k := range r.m.rows {
		if k >= start && (end == "" || k < end) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	j := 0
	for _, g := range got {
		for ; j < len(keys) && keys[j] < g.Key; j++ {
			if e := r.m.expect(keys[j], f); e.mustShow() {
				r.fail("scan [%q, %q) (%s): row %s is missing, want %s", start, end, f, keys[j], e)
			}
		}
		e := r.m.expect(g.Key, f)
		if !e.mayShow() {
			r.fail("scan [%q, %q) (%s): row %s should not be there: %s", start, end, f, g.Key, rowString(g))
		}
		if d := e.check(g); d != "" {
			r.fail("scan [%q, %q) (%s): row %s: %s\n got %s\nwant %s", start, end, f, g.Key, d, rowString(g), e)
		}
		j++
	}
	if limit == 0 || len(got) < limit {
		for ; j < len(keys); j++ {
			if e := r.m.expect(keys[j], f); e.mustShow() {
				r.fail("scan [%q, %q) (%s): row %s is missing after the %d rows returned, want %s", start, end, f, keys[j], len(got), e)
			}
		}
	}
}

func (r *modelRun) randScan() {
	a, b := r.row(), r.row()
	if a > b {
		a, b = b, a
	}
	switch r.rnd.IntN(4) {
	case 0:
		a = ""
	case 1:
		b = ""
	}
	limit := 0
	if r.rnd.IntN(2) == 0 {
		limit = 1 + r.rnd.IntN(10)
	}
	r.scan(a, b, limit, r.randFilter())
}

// verify compares every row with the model by a full scan, and with gets
// too.
func (r *modelRun) verify(stage string, gets bool) {
	r.t.Helper()
	r.note("verify (%s)", stage)
	r.scan("", "", 0, filter{})
	if !gets {
		return
	}
	ctx, cancel := r.ctx()
	defer cancel()
	for k := range modelRows {
		row := fmt.Sprintf("r%02d", k)
		got, err := r.tbl.Get(ctx, row)
		if err != nil {
			r.fail("%s: get %s: %v", stage, row, err)
		}
		e := r.m.expect(row, filter{})
		if d := e.check(got); d != "" {
			r.fail("%s: get %s: %s\n got %s\nwant %s", stage, row, d, rowString(got), e)
		}
	}
}

// admin runs a checkpoint, compaction, restart or failover, waits until
// the table serves again and verifies every row.
func (r *modelRun) admin(what string, fn func(ctx context.Context) error) {
	r.t.Helper()
	r.note("%s", what)
	r.stats[what]++
	ctx, cancel := r.ctx()
	defer cancel()
	if err := fn(ctx); err != nil {
		r.fail("%s: %v", what, err)
	}
	if err := r.c.WaitServing(ctx, modelTable); err != nil {
		r.fail("%s: %v", what, err)
	}
	r.verify("after "+what, strings.Contains(what, "tserver"))
}

// modelCluster is what the model test drives: the real in-process cluster,
// or the client's in-memory fake, whose semantics are simple enough to
// trust, as a check of the model itself.
type modelCluster interface {
	MasterAddrs() []string
	Running() []int
	Checkpoint(ctx context.Context) error
	Compact(ctx context.Context, major bool) error
	RestartTServer(i int) error
	StopTServer(i int) error
	WaitServing(ctx context.Context, table string) error
}

// fakeCluster adapts clienttest: checkpoints and compactions have nothing
// to do, a restart restarts the fake tserver's gRPC server, and a stopped
// tserver keeps its tablets (the fake models no failover).
type fakeCluster struct {
	c       *clienttest.Cluster
	stopped map[int]bool
}

func (f *fakeCluster) MasterAddrs() []string { return f.c.MasterAddrs() }
func (f *fakeCluster) Running() []int {
	var out []int
	for i := range 3 {
		if !f.stopped[i] {
			out = append(out, i)
		}
	}
	return out
}
func (f *fakeCluster) Checkpoint(context.Context) error          { return nil }
func (f *fakeCluster) Compact(context.Context, bool) error       { return nil }
func (f *fakeCluster) WaitServing(context.Context, string) error { return nil }
func (f *fakeCluster) StopTServer(i int) error                   { f.stopped[i] = true; return nil }
func (f *fakeCluster) RestartTServer(i int) error {
	f.c.StopTServer(i)
	return f.c.RestartTServer(i)
}

func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Run("fake", func(t *testing.T) {
		runModel(t, seed, &fakeCluster{c: clienttest.Start(t, clienttest.Options{TServers: 3}), stopped: map[int]bool{}})
	})
	t.Run("real", func(t *testing.T) {
		runModel(t, seed, inproc.Start(t, inproc.Options{TServers: 3, MemLimit: 256 << 10}))
	})
}

func runModel(t *testing.T, seed uint64, c modelCluster) {
	ops := *modelOps
	if testing.Short() { // the fast loop: a quarter of the operations, the failover still half-way
		ops = min(ops, 500)
	}
	t.Logf("model: seed %d, %d ops (-model.seed=%d -model.ops=%d to replay)", seed, ops, seed, ops)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := client.TableSpec{Name: modelTable, SplitKeys: []string{"r08", "r16", "r24"},
		Families: []client.FamilySpec{{Name: "cf"}, {Name: "mv", MaxVersions: mvVersions}}}
	cl, err := client.Dial(ctx, c.MasterAddrs(), client.WithBackoff(5*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, modelTable); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, modelTable)
	if err != nil {
		t.Fatal(err)
	}
	r := &modelRun{t: t, seed: seed, ops: ops, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), c: c, tbl: tbl,
		m: model{rows: map[string]map[mcol][]mcell{}}, lastServerTS: map[string]int64{}, stats: map[string]int{}, took: map[string]time.Duration{}}
	failoverAt := ops / 2
	began := time.Now()
	for r.i = 0; r.i < ops; r.i++ {
		if r.i == failoverAt {
			running := c.Running()
			victim := running[r.rnd.IntN(len(running))]
			opBegan := time.Now()
			r.admin(fmt.Sprintf("failover: stop tserver %d for good", victim), func(context.Context) error { return c.StopTServer(victim) })
			r.took["failover"] += time.Since(opBegan)
			continue
		}
		opBegan := time.Now()
		n := r.rnd.IntN(1000)
		switch {
		case n < 300:
			r.mutate(r.row(), []op{r.randOp()})
		case n < 340:
			r.setClock(r.row(), true)
		case n < 360:
			r.setClock(r.row(), false)
		case n < 440:
			var ops []op
			for range 2 + r.rnd.IntN(3) {
				ops = append(ops, r.randOp())
			}
			r.mutate(r.row(), ops)
		case n < 490:
			r.bulk()
		case n < 800:
			r.get()
		case n < 980:
			r.randScan()
		case n < 988:
			r.admin("checkpoint", c.Checkpoint)
		case n < 993:
			r.admin("minor compaction", func(ctx context.Context) error { return c.Compact(ctx, false) })
		case n < 997:
			r.admin("major compaction", func(ctx context.Context) error { return c.Compact(ctx, true) })
		default:
			running := c.Running()
			i := running[r.rnd.IntN(len(running))]
			r.admin(fmt.Sprintf("restart tserver %d", i), func(context.Context) error { return c.RestartTServer(i) })
		}
		r.took[opKind(n)] += time.Since(opBegan)
	}
	r.verify("at the end", true)
	for k, d := range r.took {
		r.took[k] = d.Round(time.Millisecond)
	}
	t.Logf("model: seed %d: %d ops in %v, no difference; admin operations %v; time by kind %v",
		seed, ops, time.Since(began).Round(time.Millisecond), r.stats, r.took)
}

// bulk writes 2 to 8 distinct rows in one ApplyBulk (distinct: the order
// in which a bulk write applies its rows is not defined).
func (r *modelRun) bulk() {
	r.t.Helper()
	n := 2 + r.rnd.IntN(7)
	perm := r.rnd.Perm(modelRows)[:n]
	rows := make([]string, n)
	ms := make([]*client.Mutation, n)
	opss := make([][]op, n)
	var desc []string
	for j, k := range perm {
		rows[j] = fmt.Sprintf("r%02d", k)
		ms[j] = client.NewMutation()
		var d []string
		for range 1 + r.rnd.IntN(3) {
			o := r.randOp()
			o.apply(ms[j])
			opss[j] = append(opss[j], o)
			d = append(d, o.String())
		}
		desc = append(desc, rows[j]+": "+strings.Join(d, "; "))
	}
	r.note("bulk %s", strings.Join(desc, " | "))
	ctx, cancel := r.ctx()
	defer cancel()
	errs, err := r.tbl.ApplyBulk(ctx, rows, ms)
	if err != nil || errs != nil {
		r.fail("bulk: %v %v", errs, err)
	}
	for j := range n {
		r.m.apply(rows[j], opss[j])
	}
}
