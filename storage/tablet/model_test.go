package tablet

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
)

// model is the plain reference: maps of cells and tombstones, read by
// brute force. Every cell and tombstone keeps the write sequence of its
// op (the mutation's Seq+i: ops apply in order); a tombstone hides the
// cells in its range with a lower one.
type model struct {
	schema Schema
	cells  map[string]map[string]map[string]map[int64]modelCell // row → family → qual → ts → cell
	// operands of aggregate cells: row → family → qual → ts → every
	// MergeCell written there, folded by get.
	operands map[string]map[string]map[string]map[int64][]modelOperand
	rowTombs map[string][]uint64
	famTombs map[string]map[string][]uint64
	colTombs map[string]map[string]map[string][]modelColTomb
}

type modelCell struct {
	value string
	seq   uint64
}

type modelOperand struct {
	v   int64
	seq uint64
}

type modelColTomb struct {
	start, end int64
	seq        uint64
}

func newModel(s Schema) *model {
	return &model{schema: s, cells: map[string]map[string]map[string]map[int64]modelCell{},
		operands: map[string]map[string]map[string]map[int64][]modelOperand{},
		rowTombs: map[string][]uint64{}, famTombs: map[string]map[string][]uint64{}, colTombs: map[string]map[string]map[string][]modelColTomb{}}
}

// apply applies mu, whose Seq is above every one applied before.
func (m *model) apply(mu *mutation.RowMutation) {
	row := string(mu.Row)
	for i, op := range mu.Ops {
		seq := mu.OpSeq(i)
		q := string(op.Qualifier)
		switch op.Kind {
		case mutation.SetCell:
			if m.cells[row] == nil {
				m.cells[row] = map[string]map[string]map[int64]modelCell{}
			}
			if m.cells[row][op.Family] == nil {
				m.cells[row][op.Family] = map[string]map[int64]modelCell{}
			}
			if m.cells[row][op.Family][q] == nil {
				m.cells[row][op.Family][q] = map[int64]modelCell{}
			}
			m.cells[row][op.Family][q][op.Timestamp] = modelCell{value: string(op.Value), seq: seq}
		case mutation.MergeCell:
			if m.operands[row] == nil {
				m.operands[row] = map[string]map[string]map[int64][]modelOperand{}
			}
			if m.operands[row][op.Family] == nil {
				m.operands[row][op.Family] = map[string]map[int64][]modelOperand{}
			}
			if m.operands[row][op.Family][q] == nil {
				m.operands[row][op.Family][q] = map[int64][]modelOperand{}
			}
			m.operands[row][op.Family][q][op.Timestamp] = append(m.operands[row][op.Family][q][op.Timestamp],
				modelOperand{v: int64(binary.BigEndian.Uint64(op.Value)), seq: seq})
		case mutation.DeleteColumn:
			if m.colTombs[row] == nil {
				m.colTombs[row] = map[string]map[string][]modelColTomb{}
			}
			if m.colTombs[row][op.Family] == nil {
				m.colTombs[row][op.Family] = map[string][]modelColTomb{}
			}
			m.colTombs[row][op.Family][q] = append(m.colTombs[row][op.Family][q], modelColTomb{op.Timestamp, op.End, seq})
		case mutation.DeleteFamily:
			if m.famTombs[row] == nil {
				m.famTombs[row] = map[string][]uint64{}
			}
			m.famTombs[row][op.Family] = append(m.famTombs[row][op.Family], seq)
		case mutation.DeleteRow:
			m.rowTombs[row] = append(m.rowTombs[row], seq)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (m *model) get(row string, o ReadOptions, now int64) (Row, bool) {
	var out Row
	dead := func(seq uint64, fam, q string, ts int64) bool {
		for _, d := range m.rowTombs[row] {
			if seq < d {
				return true
			}
		}
		for _, d := range m.famTombs[row][fam] {
			if seq < d {
				return true
			}
		}
		for _, r := range m.colTombs[row][fam][q] {
			if seq < r.seq && ts >= r.start && (r.end == 0 || ts < r.end) {
				return true
			}
		}
		return false
	}
	fams := map[string]bool{}
	for f := range m.cells[row] {
		fams[f] = true
	}
	for f := range m.operands[row] {
		fams[f] = true
	}
	for _, fam := range sortedKeys(fams) {
		pol, ok := m.schema.Families[fam]
		if !ok {
			continue
		}
		quals := map[string]bool{}
		for q := range m.cells[row][fam] {
			quals[q] = true
		}
		for q := range m.operands[row][fam] {
			quals[q] = true
		}
		for _, q := range sortedKeys(quals) {
			// The column's visible versions: its live cells, or its
			// aggregate cells' visible operands folded.
			type version struct {
				ts    int64
				value []byte
			}
			var vs []version
			if pol.Aggregate != NoAggregate {
				for ts, ops := range m.operands[row][fam][q] {
					n, acc := 0, int64(0)
					for _, op := range ops {
						if dead(op.seq, fam, q, ts) {
							continue
						}
						if n == 0 {
							acc = op.v
						} else {
							acc = pol.Aggregate.fold(acc, op.v)
						}
						n++
					}
					if n > 0 {
						vs = append(vs, version{ts, binary.BigEndian.AppendUint64(nil, uint64(acc))})
					}
				}
			} else {
				for ts, c := range m.cells[row][fam][q] {
					if !dead(c.seq, fam, q, ts) {
						vs = append(vs, version{ts, []byte(c.value)})
					}
				}
			}
			sort.Slice(vs, func(i, j int) bool { return vs[i].ts > vs[j].ts })
			live, returned := 0, 0
			for _, v := range vs {
				ts := v.ts
				live++
				if pol.MaxVersions > 0 && live > pol.MaxVersions {
					continue
				}
				if pol.MaxAge > 0 && ts < now-pol.MaxAge.Microseconds() {
					continue
				}
				if !o.selected(fam, []byte(q)) {
					continue
				}
				if ts < o.TimeRange.Start || (o.TimeRange.End != 0 && ts >= o.TimeRange.End) {
					continue
				}
				returned++
				if o.MaxVersions > 0 && returned > o.MaxVersions {
					continue
				}
				var qual []byte
				if q != "" {
					qual = []byte(q)
				}
				out.Cells = append(out.Cells, Cell{Family: fam, Qualifier: qual, Timestamp: ts, Value: v.value})
			}
		}
	}
	if len(out.Cells) == 0 {
		return Row{}, false
	}
	out.Key = []byte(row)
	return out, true
}

func (m *model) rows() []string {
	rows := map[string]bool{}
	for r := range m.cells {
		rows[r] = true
	}
	for r := range m.operands {
		rows[r] = true
	}
	return sortedKeys(rows)
}

// normalize makes empty slices nil so rows compare with reflect.DeepEqual.
func normalize(r Row) Row {
	for i := range r.Cells {
		if len(r.Cells[i].Qualifier) == 0 {
			r.Cells[i].Qualifier = nil
		}
		if len(r.Cells[i].Value) == 0 {
			r.Cells[i].Value = []byte{}
		}
	}
	return r
}

func testSchema() Schema {
	return Schema{Families: map[string]FamilyPolicy{
		"a": {MaxVersions: 2},
		"b": {MaxAge: 300 * time.Microsecond},
		"c": {},
		// Aggregate families: a sum that keeps 2 versions, a max.
		"s": {MaxVersions: 2, Aggregate: Sum},
		"m": {Aggregate: Max},
	}}
}

func newStore(t testing.TB) blockstore.Manager {
	t.Helper()
	m, _, err := blockstore.Open(blockstore.Options{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// fakeClock advances a microsecond counter by hand.
type fakeClock struct{ us atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.UnixMicro(c.us.Load()) }

func seedFromEnv(t *testing.T) int64 {
	if s := os.Getenv("TABLET_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return time.Now().UnixNano()
}

// TestModel runs random mutations, replays, swaps, flushes, compactions,
// restarts and reads against the reference model. Replay a failure with
// TABLET_SEED=<seed>.
func TestModel(t *testing.T) {
	seed := seedFromEnv(t)
	t.Logf("seed %d (replay: TABLET_SEED=%d go test -run TestModel ./storage/tablet/)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	store := newStore(t)
	clock := &fakeClock{}
	clock.us.Store(1000)
	cache := blockcache.New(blockcache.Options{Capacity: 256 << 10, Shards: 4})
	schema := testSchema()
	opts := Options{ID: "t1", Schema: schema, Store: store, Cache: cache, PageSize: 512, Now: clock.now}
	tb, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { tb.Close() }()
	ref := newModel(schema)
	var history []mutation.RowMutation

	fams := []string{"a", "b", "c", "s", "m"}
	aggregate := func(fam string) bool { return schema.Families[fam].Aggregate != NoAggregate }
	randRow := func() string { return fmt.Sprintf("r%03d", rng.Intn(60)) }
	randTS := func() int64 {
		if rng.Intn(2) == 0 {
			return mutation.ServerTime
		}
		return rng.Int63n(clock.us.Load() + 20)
	}
	randMutation := func() mutation.RowMutation {
		m := mutation.RowMutation{Row: []byte(randRow())}
		for n := 1 + rng.Intn(4); n > 0; n-- {
			fam := fams[rng.Intn(len(fams))]
			q := []byte(fmt.Sprintf("q%d", rng.Intn(3)))
			if rng.Intn(8) == 0 {
				q = nil
			}
			switch k := rng.Intn(30); {
			case k < 24 && aggregate(fam):
				// A few timestamps, so that operands meet in one cell.
				ts := clock.us.Load() - rng.Int63n(4)*100
				m.Ops = append(m.Ops, mutation.Op{Kind: mutation.MergeCell, Family: fam, Qualifier: q, Timestamp: max(ts, 0),
					Value: binary.BigEndian.AppendUint64(nil, uint64(rng.Int63n(2001)-1000))})
			case k < 24:
				v := make([]byte, rng.Intn(40))
				rng.Read(v)
				m.Ops = append(m.Ops, mutation.Op{Kind: mutation.SetCell, Family: fam, Qualifier: q, Timestamp: randTS(), Value: v})
			case k < 27:
				op := mutation.Op{Kind: mutation.DeleteColumn, Family: fam, Qualifier: q, Timestamp: randTS()}
				if op.Timestamp != mutation.ServerTime && rng.Intn(2) == 0 {
					op.End = op.Timestamp + 1 + rng.Int63n(50)
				}
				m.Ops = append(m.Ops, op)
			case k < 29:
				m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteFamily, Family: fam, Timestamp: randTS()})
			default:
				m.Ops = append(m.Ops, mutation.Op{Kind: mutation.DeleteRow, Timestamp: randTS()})
			}
		}
		return m
	}
	randOpts := func() ReadOptions {
		var o ReadOptions
		switch rng.Intn(5) {
		case 0:
			o.Families = []string{fams[rng.Intn(len(fams))]}
		case 1:
			o.Columns = []Column{{Family: fams[rng.Intn(len(fams))], Qualifier: []byte(fmt.Sprintf("q%d", rng.Intn(3)))}}
		}
		if rng.Intn(4) == 0 {
			o.TimeRange.Start = rng.Int63n(clock.us.Load() + 1)
			if rng.Intn(2) == 0 {
				o.TimeRange.End = o.TimeRange.Start + 1 + rng.Int63n(200)
			}
		}
		if rng.Intn(3) == 0 {
			o.MaxVersions = 1 + rng.Intn(2)
		}
		return o
	}
	check := func(step int, what string, got, want Row, gotOK, wantOK bool) {
		t.Helper()
		if gotOK != wantOK || (gotOK && !reflect.DeepEqual(normalize(got), normalize(want))) {
			t.Fatalf("seed %d step %d %s:\n got %v %+v\nwant %v %+v", seed, step, what, gotOK, got, wantOK, want)
		}
	}

	deadline := time.Now().Add(3 * time.Second)
	var stats [8]int
	// swappedSeq is the highest sequence assigned before the last swap of
	// the buffers: a mutation above it is in the active buffer only.
	var swappedSeq uint64
	swapped := func() {
		if len(history) > 0 {
			swappedSeq = history[len(history)-1].LastSeq() // history is in sequence order
		}
	}
	for step := 0; step < 4000 && time.Now().Before(deadline); step++ {
		clock.us.Add(rng.Int63n(4))
		switch k := rng.Intn(100); {
		case k < 50: // write
			m := randMutation()
			if err := tb.AssignTimestamps(&m); err != nil {
				t.Fatalf("step %d: assign: %v", step, err)
			}
			if err := tb.Apply(&m); err != nil {
				t.Fatalf("step %d: apply: %v", step, err)
			}
			ref.apply(&m)
			history = append(history, m)
			stats[0]++
		case k < 55: // two concurrent writes to one row, applied out of sequence order
			m1, m2 := randMutation(), randMutation()
			m2.Row = m1.Row
			for _, m := range []*mutation.RowMutation{&m1, &m2} {
				if err := tb.AssignTimestamps(m); err != nil {
					t.Fatalf("step %d: assign: %v", step, err)
				}
			}
			for _, m := range []*mutation.RowMutation{&m2, &m1} {
				if err := tb.Apply(m); err != nil {
					t.Fatalf("step %d: apply: %v", step, err)
				}
			}
			ref.apply(&m1)
			ref.apply(&m2)
			history = append(history, m1, m2)
			stats[0] += 2
		case k < 57: // replay the last mutations again: no visible change
			// Except a mutation with an operand that is no longer only in
			// the active buffer: once flushed, a compaction may fold it
			// into an operand of another sequence, and a copy applied
			// again would count twice. Replay never applies a record the
			// files hold (FlushedSeq), and a tablet flushes no buffer
			// while it replays, so no record reaches two files.
			n := min(len(history), 1+rng.Intn(10))
			for _, m := range history[len(history)-n:] {
				if m.Seq <= swappedSeq && slices.ContainsFunc(m.Ops, func(op mutation.Op) bool { return op.Kind == mutation.MergeCell }) {
					continue
				}
				if err := tb.Apply(&m); err != nil {
					t.Fatal(err)
				}
			}
			stats[1]++
		case k < 62:
			tb.SwapBuffers()
			swapped()
			stats[2]++
		case k < 66: // flush, sometimes right after a swap
			tb.SwapBuffers()
			swapped()
			if tb.HasStandby() {
				info, err := tb.FlushStandby(ctx)
				if err != nil {
					t.Fatalf("step %d: flush: %v", step, err)
				}
				if err := tb.InstallFlushed(info); err != nil {
					t.Fatal(err)
				}
				stats[3]++
			}
		case k < 68: // minor compaction of adjacent files (no major: what a GC
			// rule calls garbage it drops for good, while the model brings
			// it back when a later delete hides the newer versions;
			// TestFoldCompactionsKeepReads checks majors' folds)
			files := tb.Files()
			if len(files) >= 2 {
				i := rng.Intn(len(files) - 1)
				n := 2 + rng.Intn(min(3, len(files)-i)-1)
				var ids []blockstore.BlockRef
				for _, f := range files[i : i+n] {
					ids = append(ids, f.FooterRef())
				}
				info, err := tb.CompactFiles(ctx, ids, false)
				if err != nil {
					t.Fatalf("step %d: compact: %v", step, err)
				}
				if err := tb.InstallCompacted(ids, info); err != nil {
					t.Fatal(err)
				}
				stats[4]++
			}
		case k < 69: // restart from the files once the buffers are flushed
			swapped()
			for tb.SwapBuffers() || tb.HasStandby() {
				info, err := tb.FlushStandby(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallFlushed(info); err != nil {
					t.Fatal(err)
				}
			}
			if tb.MemoryUsage() != 0 {
				t.Fatalf("step %d: buffers hold %d bytes after flushing", step, tb.MemoryUsage())
			}
			var refs []FileRef
			for _, f := range tb.Files() {
				refs = append(refs, FileRef{Footer: f.FooterRef()})
			}
			tb.Close()
			o := opts
			o.Files = refs
			if tb, err = Open(o); err != nil {
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			stats[5]++
		case k < 80: // multi-get of rows in any order, some repeated
			rows := make([][]byte, 1+rng.Intn(12))
			for i := range rows {
				rows[i] = []byte(randRow())
				if i > 0 && rng.Intn(5) == 0 {
					rows[i] = rows[rng.Intn(i)]
				}
			}
			o := randOpts()
			got := make([]*Row, len(rows))
			last := ""
			if err := tb.GetRows(ctx, rows, o, func(i int, r Row) bool {
				if string(rows[i]) < last {
					t.Fatalf("seed %d step %d: GetRows delivered %q after %q", seed, step, rows[i], last)
				}
				last = string(rows[i])
				got[i] = &r
				return true
			}); err != nil {
				t.Fatal(err)
			}
			for i, row := range rows {
				want, wok := ref.get(string(row), o, clock.us.Load())
				var g Row
				if got[i] != nil {
					g = *got[i]
				}
				check(step, fmt.Sprintf("GetRows(%q)[%d], %+v", rows, i, o), g, want, got[i] != nil, wok)
			}
			stats[6]++
		case k < 88: // point read
			row, o := randRow(), randOpts()
			got, ok, err := tb.Get(ctx, []byte(row), o)
			if err != nil {
				t.Fatal(err)
			}
			want, wok := ref.get(row, o, clock.us.Load())
			check(step, fmt.Sprintf("Get(%s, %+v)", row, o), got, want, ok, wok)
			stats[6]++
		default: // scan
			a, b := randRow(), randRow()
			if a > b {
				a, b = b, a
			}
			var end []byte
			if rng.Intn(4) > 0 {
				end = []byte(b)
			}
			limit := rng.Intn(8)
			o := randOpts()
			var got []Row
			if err := tb.Scan(ctx, []byte(a), end, limit, o, func(r Row) bool { got = append(got, r); return true }); err != nil {
				t.Fatal(err)
			}
			var want []Row
			for _, row := range ref.rows() {
				if row < a || (end != nil && row >= b) || (limit > 0 && len(want) >= limit) {
					continue
				}
				if r, ok := ref.get(row, o, clock.us.Load()); ok {
					want = append(want, r)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("seed %d step %d: Scan[%s,%q) limit %d %+v: %d rows, want %d", seed, step, a, end, limit, o, len(got), len(want))
			}
			for i := range got {
				if !reflect.DeepEqual(normalize(got[i]), normalize(want[i])) {
					dumpRow(t, tb, want[i].Key, o.Families)
					dumpFiles(t, tb, want[i].Key)
					for _, h := range history {
						if bytes.Equal(h.Row, want[i].Key) {
							t.Logf("mutation %+v", h.Ops)
						}
					}
				}
				check(step, fmt.Sprintf("Scan[%s,%q) limit %d %+v row %d (%s)", a, end, limit, o, i, want[i].Key), got[i], want[i], true, true)
			}
			// The same range reversed: the model's rows in descending
			// order, the limit keeping the last ones.
			var gotRev []Row
			if err := tb.ScanRanges(ctx, []KeyRange{{Start: []byte(a), End: end}}, true, limit, o, func(r Row) bool { gotRev = append(gotRev, r); return true }); err != nil {
				t.Fatal(err)
			}
			var wantRev []Row
			rowsDesc := ref.rows()
			for i := len(rowsDesc) - 1; i >= 0; i-- {
				row := rowsDesc[i]
				if row < a || (end != nil && row >= b) || (limit > 0 && len(wantRev) >= limit) {
					continue
				}
				if r, ok := ref.get(row, o, clock.us.Load()); ok {
					wantRev = append(wantRev, r)
				}
			}
			if len(gotRev) != len(wantRev) {
				t.Fatalf("seed %d step %d: reverse Scan[%s,%q) limit %d %+v: %d rows, want %d", seed, step, a, end, limit, o, len(gotRev), len(wantRev))
			}
			for i := range gotRev {
				check(step, fmt.Sprintf("reverse Scan[%s,%q) limit %d %+v row %d (%s)", a, end, limit, o, i, wantRev[i].Key), gotRev[i], wantRev[i], true, true)
			}
			stats[7]++
		}
	}
	t.Logf("writes %d, replays %d, swaps %d, flushes %d, compactions %d, restarts %d, gets %d, scans %d; files now %d; cache %+v",
		stats[0], stats[1], stats[2], stats[3], stats[4], stats[5], stats[6], stats[7], len(tb.Files()), cache.Stats())

}
