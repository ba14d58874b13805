package tablet

import (
	"context"
	"errors"
	"strings"
	"testing"

	"bighive/storage/mutation"
)

func openGranular(t *testing.T, g Granularity, clock *fakeClock) *Tablet {
	t.Helper()
	s := testSchema()
	s.Granularity = g
	tb, err := Open(Options{ID: "t", Schema: s, Store: newStore(t), Now: clock.now, PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

func setOp(qual string, ts int64, value string) mutation.Op {
	return mutation.Op{Kind: mutation.SetCell, Family: "c", Qualifier: []byte(qual), Timestamp: ts, Value: []byte(value)}
}

func cellsOf(t *testing.T, tb *Tablet, row string) []Cell {
	t.Helper()
	r, _, err := tb.Get(context.Background(), []byte(row), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Cells
}

// TestGranularityServerTimestamps: under Millis a server timestamp is the
// clock truncated to whole milliseconds, shared by every op of a mutation
// and by the writes of one millisecond (the later write replaces the
// earlier: same timestamp, higher sequence), and never below a timestamp
// assigned or observed; under Micros it is the clock, strictly increasing.
func TestGranularityServerTimestamps(t *testing.T) {
	for _, tc := range []struct {
		g Granularity
		// versions is how many versions 20 writes leave, 4 in each of
		// five milliseconds.
		versions int
	}{
		{Micros, 20},
		{Millis, 5},
	} {
		t.Run(tc.g.String(), func(t *testing.T) {
			clock := &fakeClock{}
			tb := openGranular(t, tc.g, clock)
			var last int64
			for i := 0; i < 20; i++ {
				// Four writes 100 µs apart in each millisecond.
				clock.us.Store(1_000_000_250 + int64(i/4)*1000 + int64(i%4)*100)
				m := writeRow(t, tb, "r", setOp("q", mutation.ServerTime, string(rune('a'+i))), setOp("p", mutation.ServerTime, "x"))
				ts0, ts1 := m.Ops[0].Timestamp, m.Ops[1].Timestamp
				switch tc.g {
				case Millis:
					if ts0%1000 != 0 || ts1 != ts0 || ts0 < last {
						t.Fatalf("write %d: timestamps %d, %d after %d: want one whole millisecond, not decreasing", i, ts0, ts1, last)
					}
					if want := clock.us.Load() - clock.us.Load()%1000; ts0 != want {
						t.Fatalf("write %d: timestamp %d, want the clock truncated, %d", i, ts0, want)
					}
				default:
					if ts0 <= last || ts1 != ts0+1 {
						t.Fatalf("write %d: timestamps %d, %d after %d: want strictly increasing µs", i, ts0, ts1, last)
					}
				}
				last = ts1
			}
			var got []Cell
			for _, c := range cellsOf(t, tb, "r") {
				if string(c.Qualifier) == "q" {
					got = append(got, c)
				}
			}
			if len(got) != tc.versions {
				t.Fatalf("%d versions of c:q, want %d: %v", len(got), tc.versions, got)
			}
			if v := string(got[0].Value); v != "t" {
				t.Fatalf("newest value %q, want the last write's %q", v, "t")
			}
			if tc.g == Millis {
				// The last write of each millisecond won it.
				for i, c := range got {
					if want := string(rune('a' + 19 - 4*i)); string(c.Value) != want {
						t.Fatalf("version %d (ts %d) holds %q, want %q", i, c.Timestamp, c.Value, want)
					}
				}
			}

			// The clock stepping back, and a timestamp observed ahead of
			// it (not a whole millisecond): later timestamps stay above.
			clock.us.Add(-5000)
			tb.ObserveTimestamp(last + 1500)
			m := writeRow(t, tb, "r", setOp("q", mutation.ServerTime, "z"))
			ts := m.Ops[0].Timestamp
			if ts <= last+1500 || (tc.g == Millis && ts != ceilMillis(last+1500)) {
				t.Fatalf("after observing %d: timestamp %d", last+1500, ts)
			}
		})
	}
}

// TestGranularityClientTimestamps: under Millis a client timestamp that is
// not a whole millisecond is refused, naming the value and the
// granularity, and nothing is assigned; delete ranges are not checked; a
// logged record replays with its timestamps as they are.
func TestGranularityClientTimestamps(t *testing.T) {
	cases := []struct {
		name   string
		op     mutation.Op
		millis bool // accepted under Millis (Micros accepts all)
	}{
		{"whole millisecond", setOp("q", 2000, "v"), true},
		{"zero", setOp("q", 0, "v"), true},
		{"1500 µs", setOp("q", 1500, "v"), false},
		{"1 µs", setOp("q", 1, "v"), false},
		{"server time", setOp("q", mutation.ServerTime, "v"), true},
		{"delete range in µs", mutation.Op{Kind: mutation.DeleteColumn, Family: "c", Qualifier: []byte("q"), Timestamp: 1500, End: 2500}, true},
		{"delete family", mutation.Op{Kind: mutation.DeleteFamily, Family: "c", Timestamp: 1}, true},
	}
	for _, g := range []Granularity{Micros, Millis} {
		for _, tc := range cases {
			t.Run(g.String()+"/"+tc.name, func(t *testing.T) {
				tb := openGranular(t, g, &fakeClock{})
				m := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{setOp("ok", 1000, "v"), tc.op}}
				err := tb.AssignTimestamps(&m)
				if ok := g == Micros || tc.millis; ok {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrInvalidMutation) {
					t.Fatalf("err = %v, want ErrInvalidMutation", err)
				}
				for _, want := range []string{"granularity", "1500", "millisecond", "op 1"} {
					if tc.op.Timestamp == 1 && want == "1500" {
						want = "timestamp 1 µs"
					}
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not name %q", err, want)
					}
				}
				if m.Seq != 0 {
					t.Fatalf("a refused mutation got sequence %d", m.Seq)
				}
			})
		}
	}

	t.Run("replay keeps logged timestamps", func(t *testing.T) {
		tb := openGranular(t, Millis, &fakeClock{})
		m := mutation.RowMutation{Row: []byte("r"), Seq: 5, Ops: []mutation.Op{setOp("q", 1500, "old")}}
		if err := tb.Replay(&m, 1600); err != nil {
			t.Fatal(err)
		}
		cells := cellsOf(t, tb, "r")
		if len(cells) != 1 || cells[0].Timestamp != 1500 {
			t.Fatalf("replayed cells %v, want one at 1500", cells)
		}
		// The clock continues above the replayed record, in whole
		// milliseconds.
		w := writeRow(t, tb, "r", setOp("q", mutation.ServerTime, "new"))
		if ts := w.Ops[0].Timestamp; ts != 2000 {
			t.Fatalf("first server timestamp after replay %d, want 2000", ts)
		}
	})
}
