package memstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"
	"unsafe"

	"bighive/storage/mutation"
)

func set(row, fam, q string, ts int64, v string) Entry {
	return Entry{Row: []byte(row), Family: fam, Qualifier: []byte(q), Timestamp: ts, Kind: mutation.SetCell, Value: []byte(v)}
}

func collect(t *testing.T, it Iterator) []Entry {
	t.Helper()
	var out []Entry
	for it.First(); it.Valid(); it.Next() {
		out = append(out, it.Entry().Clone())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOrder(t *testing.T) {
	// Written in scrambled order; read back in the documented order.
	want := []Entry{
		{Row: []byte("a"), Kind: mutation.DeleteRow, Timestamp: 9},
		{Row: []byte("a"), Family: "f", Kind: mutation.DeleteFamily, Timestamp: 5},
		{Row: []byte("a"), Family: "f", Qualifier: nil, Kind: mutation.SetCell, Timestamp: 3},
		{Row: []byte("a"), Family: "f", Qualifier: []byte("q"), Kind: mutation.DeleteColumn, Timestamp: 1, End: 2},
		{Row: []byte("a"), Family: "f", Qualifier: []byte("q"), Kind: mutation.DeleteColumn, Timestamp: 1, End: 4},
		set("a", "f", "q", 7, "x"),
		set("a", "f", "q", 2, "y"),
		set("a", "g", "", 1, "z"),
		{Row: []byte("b"), Kind: mutation.DeleteRow, Timestamp: 1},
		set("b", "f", "q", 1, "w"),
	}
	m := New()
	perm := rand.New(rand.NewSource(1)).Perm(len(want))
	for _, i := range perm {
		m.Apply([]Entry{want[i]})
	}
	got := collect(t, m.NewIterator())
	if len(got) != len(want) {
		t.Fatalf("got %d entries want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if Compare(&got[i], &want[i]) != 0 || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("entry %d: got %v want %v", i, &got[i], &want[i])
		}
	}
}

func TestOverwriteAndSnapshot(t *testing.T) {
	m := New()
	m.Apply([]Entry{set("r", "f", "q", 1, "old")})
	snap := m.NewIterator()
	m.Apply([]Entry{set("r", "f", "q", 1, "new"), set("r", "f", "q", 2, "two")})
	got := collect(t, m.NewIterator())
	if len(got) != 2 || string(got[0].Value) != "two" || string(got[1].Value) != "new" {
		t.Fatalf("after overwrite: %v", got)
	}
	old := collect(t, snap)
	if len(old) != 1 || string(old[0].Value) != "old" {
		t.Fatalf("snapshot saw later writes: %v", old)
	}
	it := m.NewIterator()
	it.SeekGE(RowStart([]byte("r")))
	if !it.Valid() || it.Entry().Timestamp != 2 {
		t.Fatalf("SeekGE: %v", it.Valid())
	}
	it.SeekGE(RowStart([]byte("s")))
	if it.Valid() {
		t.Fatalf("SeekGE past end is valid: %v", it.Entry())
	}
}

func TestMemoryAccounting(t *testing.T) {
	m := New()
	var min int64
	for i := 0; i < 1000; i++ {
		e := set(fmt.Sprintf("row%04d", i), "fam", "qual", int64(i), "value-value")
		m.Apply([]Entry{e})
		min += EntryOverhead + towerSlotSize + int64(len(e.Row)+len(e.Family)+len(e.Qualifier)+len(e.Value))
	}
	got := m.MemoryUsage()
	// Every entry has a tower of at least one level; with p=1/4 the mean
	// extra is 1/3 level.
	if got < min || got > min+1000*towerSlotSize {
		t.Fatalf("MemoryUsage = %d, want in [%d, %d]", got, min, min+1000*towerSlotSize)
	}
	if m.Len() != 1000 {
		t.Fatalf("Len = %d", m.Len())
	}
}

// TestConcurrentAtomicBatches checks that readers running alongside the
// writer see each batch whole: every batch writes the same value to all
// columns of a row, so a reader must never see two values in one row.
func TestConcurrentAtomicBatches(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	m := New()
	const rows, cols, batches = 20, 8, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				it := m.NewIterator()
				vals := map[string]string{}
				var prev Entry
				first := true
				for it.First(); it.Valid(); it.Next() {
					e := it.Entry()
					if !first && Compare(&prev, e) >= 0 {
						errc <- fmt.Errorf("out of order: %v then %v", &prev, e)
						return
					}
					first = false
					prev = e.Clone()
					if e.Timestamp != 1 {
						continue
					}
					if v, ok := vals[string(e.Row)]; ok && v != string(e.Value) {
						errc <- fmt.Errorf("row %s half applied: %s and %s", e.Row, v, e.Value)
						return
					}
					vals[string(e.Row)] = string(e.Value)
				}
			}
		}()
	}
	for b := 0; b < batches; b++ {
		row := fmt.Sprintf("r%02d", rng.Intn(rows))
		v := fmt.Sprintf("v%d", b)
		batch := make([]Entry, cols)
		for c := range batch {
			batch[c] = set(row, "f", fmt.Sprintf("c%d", c), 1, v)
		}
		// Some noise at other timestamps so the skiplist grows.
		batch = append(batch, set(row, "f", "noise", int64(b+2), v))
		m.Apply(batch)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

func TestMerge(t *testing.T) {
	newer, older := New(), New()
	older.Apply([]Entry{set("a", "f", "q", 1, "old"), set("b", "f", "q", 1, "b")})
	newer.Apply([]Entry{set("a", "f", "q", 1, "new"), set("c", "f", "q", 1, "c")})
	third := New()
	third.Apply([]Entry{set("a", "f", "q", 1, "oldest"), set("a", "f", "q", 0, "z")})
	got := collect(t, Merge(newer.NewIterator(), older.NewIterator(), third.NewIterator()))
	var s []string
	for _, e := range got {
		s = append(s, fmt.Sprintf("%s@%d=%s", e.Row, e.Timestamp, e.Value))
	}
	want := []string{"a@1=new", "a@0=z", "b@1=b", "c@1=c"}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("merge = %v want %v", s, want)
	}
}

func TestRandomAgainstSort(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	m := New()
	ref := map[string]Entry{}
	key := func(e *Entry) string {
		return fmt.Sprintf("%s|%s|%d|%s|%d|%d|%d", e.Row, e.Family, e.level(), e.Qualifier, e.rank(), e.Timestamp, e.End)
	}
	for i := 0; i < 3000; i++ {
		e := set(fmt.Sprint(rng.Intn(50)), []string{"a", "b"}[rng.Intn(2)], fmt.Sprint(rng.Intn(5)), int64(rng.Intn(10)), fmt.Sprint(i))
		if rng.Intn(10) == 0 {
			e.Kind, e.Value = mutation.DeleteColumn, nil
			e.End = e.Timestamp + int64(rng.Intn(3))
		}
		m.Apply([]Entry{e})
		ref[key(&e)] = e
	}
	var want []Entry
	for _, e := range ref {
		want = append(want, e)
	}
	sort.Slice(want, func(i, j int) bool { return Compare(&want[i], &want[j]) < 0 })
	got := collect(t, m.NewIterator())
	if len(got) != len(want) {
		t.Fatalf("got %d want %d", len(got), len(want))
	}
	for i := range want {
		if Compare(&got[i], &want[i]) != 0 || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("entry %d: got %v want %v", i, &got[i], &want[i])
		}
	}
}

// TestRowOrderEdgeCases checks the skiplist's row-prefix fast path against
// bytes.Compare on rows that differ only in length, in zero bytes, or past
// the 16-byte prefix, inserted in a seeded random order.
func TestRowOrderEdgeCases(t *testing.T) {
	rows := []string{"\x00", "\x00\x00", "a", "a\x00", "a\x00\x00", "a\x01", "ab", "\xff", "\xff\xff",
		"0123456789abcdef", "0123456789abcdef\x00", "0123456789abcdeg", "0123456789abcde", "0123456789abcdef0",
		"0123456789abcdefa", "0123456789abcdef\xff", "01234567", "01234567\x00\x00\x00\x00\x00\x00\x00\x00", "z"}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	m := New()
	for _, i := range rng.Perm(len(rows)) {
		m.Apply([]Entry{set(rows[i], "f", "q", 1, rows[i])})
	}
	want := append([]string(nil), rows...)
	sort.Slice(want, func(i, j int) bool { return bytes.Compare([]byte(want[i]), []byte(want[j])) < 0 })
	got := collect(t, m.NewIterator())
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i].Row) != want[i] {
			t.Fatalf("row %d: got %q, want %q", i, got[i].Row, want[i])
		}
	}
	// Seeks land on the exact row, also for rows that share the prefix.
	for _, r := range rows {
		it := m.NewIterator()
		it.SeekGE(RowStart([]byte(r)))
		if !it.Valid() || string(it.Entry().Row) != r {
			t.Fatalf("SeekGE(%q) landed on %v", r, it.Entry())
		}
		it.Close()
	}
}

// TestHigherSeqWins: of the entries of one key only the one with the
// highest write sequence is returned, whatever the order the buffer got
// them in or the source that holds it; seeks land on it, never inside the
// key's older versions.
func TestHigherSeqWins(t *testing.T) {
	withSeq := func(e Entry, seq uint64) Entry { e.Seq = seq; return e }
	a5 := withSeq(set("r", "f", "a", 10, "seq5"), 5)
	a6 := withSeq(set("r", "f", "a", 10, "seq6"), 6)
	b7 := withSeq(set("r", "f", "b", 10, "b"), 7)
	cases := []struct {
		name    string
		batches [][]Entry // applied in this order
	}{
		{"in sequence order", [][]Entry{{a5}, {a6}, {b7}}},
		{"lower sequence applied last", [][]Entry{{b7}, {a6}, {a5}}},
		{"lower sequence applied twice", [][]Entry{{a5}, {a6}, {a5}, {b7}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			for _, b := range tc.batches {
				m.Apply(b)
			}
			got := collect(t, m.NewIterator())
			if len(got) != 2 || string(got[0].Value) != "seq6" || got[0].Seq != 6 || got[1].Seq != 7 {
				t.Fatalf("got %v, want the seq 6 cell and b", got)
			}
			it := m.NewIterator()
			it.SeekGE(&Entry{Row: []byte("r"), Family: "f", Qualifier: []byte("a"), Timestamp: 10, Kind: mutation.SetCell})
			if !it.Valid() || it.Entry().Seq != 6 {
				t.Fatalf("seek to the key (seq 0) landed on %v, want seq 6", it.Entry())
			}
		})
	}
	// Across sources: the highest sequence wins even in an older source.
	older, newer := New(), New()
	older.Apply([]Entry{a6})
	newer.Apply([]Entry{a5, b7})
	got := collect(t, Merge(newer.NewIterator(), older.NewIterator()))
	if len(got) != 2 || string(got[0].Value) != "seq6" || string(got[1].Value) != "b" {
		t.Fatalf("merge got %v, want the seq 6 cell from the older source, then b", got)
	}
	// Two ops of one mutation on one key (same seq, one batch): the later op.
	m := New()
	m.Apply([]Entry{a5, withSeq(set("r", "f", "a", 10, "later op"), 5)})
	if got := collect(t, m.NewIterator()); len(got) != 1 || string(got[0].Value) != "later op" {
		t.Fatalf("same-mutation overwrite got %v", got)
	}
}

// TestOperandsAreKeptApart checks that the MergeCell operands of one cell
// are not overwritten by each other, in one buffer and across a merge, that
// each comes once however often it is applied (replay), newest first and
// after a SetCell of the same cell, and that the next cell follows.
func TestOperandsAreKeptApart(t *testing.T) {
	op := func(seq uint64, v string) Entry {
		return Entry{Row: []byte("r"), Family: "agg", Qualifier: []byte("q"), Timestamp: 10, Kind: mutation.MergeCell, Seq: seq, Value: []byte(v)}
	}
	plain := set("r", "agg", "q", 10, "set")
	plain.Seq = 1
	older := set("r", "agg", "q", 9, "older")
	older.Seq = 2
	a, b := New(), New()
	a.Apply([]Entry{op(5, "five"), op(3, "three")})
	a.Apply([]Entry{op(5, "five")}) // replayed
	a.Apply([]Entry{older})
	b.Apply([]Entry{op(4, "four"), op(3, "three"), plain})
	want := []string{"SetCell@10/1=set", "MergeCell@10/5=five", "MergeCell@10/4=four", "MergeCell@10/3=three", "SetCell@9/2=older"}
	for _, tc := range []struct {
		name string
		it   Iterator
	}{
		{"merged", Merge(a.NewIterator(), b.NewIterator())},
		{"merged other way", Merge(b.NewIterator(), a.NewIterator())},
	} {
		var got []string
		for _, e := range collect(t, tc.it) {
			got = append(got, fmt.Sprintf("%s@%d/%d=%s", e.Kind, e.Timestamp, e.Seq, e.Value))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, want)
		}
	}
	// A seek to an operand's key lands on it, not on a newer operand.
	it := a.NewIterator()
	it.SeekGE(&Entry{Row: []byte("r"), Family: "agg", Qualifier: []byte("q"), Timestamp: 10, Kind: mutation.MergeCell, Seq: 3})
	if !it.Valid() || it.Entry().Seq != 3 {
		t.Fatalf("seek to operand seq 3 landed on %v", it.Entry())
	}
}

// TestTowerFollowsNode: node.tower finds slot l at the node's end, so
// every node type must put its tower right after its node.
func TestTowerFollowsNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset uintptr
	}{
		{"node1", unsafe.Offsetof(node1{}.t)},
		{"node2", unsafe.Offsetof(node2{}.t)},
		{"node4", unsafe.Offsetof(node4{}.t)},
		{"node8", unsafe.Offsetof(node8{}.t)},
		{"nodeMax", unsafe.Offsetof(nodeMax{}.t)},
	} {
		if tc.offset != nodeSize {
			t.Errorf("%s: tower at offset %d, node size %d", tc.name, tc.offset, nodeSize)
		}
	}
	var x node4
	for l := range x.t {
		if x.n.tower(l) != &x.t[l] {
			t.Errorf("node4: tower(%d) is not t[%d]", l, l)
		}
	}
}
