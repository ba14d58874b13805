package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
)

func counter(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func rmwTable(t *testing.T, c *inproc.Cluster, ctx context.Context, splits ...string) (*client.Client, *client.Table) {
	t.Helper()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}, {Name: "g"}}, SplitKeys: splits}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	return cl, tbl
}

// TestReadModifyWriteSemantics runs ReadModifyWriteRow through the real
// servers: each case prepares a row, applies rules, and checks the
// returned cells, the error code, and what a read sees afterwards.
func TestReadModifyWriteSemantics(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	_, tbl := rmwTable(t, c, ctx)
	type cell struct{ fam, col, val string }
	cases := []struct {
		name  string
		setup []cell
		rules func(m *client.ReadModifyWrite)
		code  codes.Code
		want  []cell // the returned cells and the latest cells afterwards
	}{
		{"increment a missing cell", nil,
			func(m *client.ReadModifyWrite) { m.Increment("cf", "n", 5) },
			codes.OK, []cell{{"cf", "n", string(counter(5))}}},
		{"increment an existing counter", []cell{{"cf", "n", string(counter(40))}},
			func(m *client.ReadModifyWrite) { m.Increment("cf", "n", 2) },
			codes.OK, []cell{{"cf", "n", string(counter(42))}}},
		{"negative delta", []cell{{"cf", "n", string(counter(1))}},
			func(m *client.ReadModifyWrite) { m.Increment("cf", "n", -3) },
			codes.OK, []cell{{"cf", "n", string(counter(-2))}}},
		{"two increments of one column add up", nil,
			func(m *client.ReadModifyWrite) { m.Increment("cf", "n", 3); m.Increment("cf", "n", 4) },
			codes.OK, []cell{{"cf", "n", string(counter(7))}}},
		{"append to a missing cell", nil,
			func(m *client.ReadModifyWrite) { m.AppendValue("cf", "s", []byte("ab")) },
			codes.OK, []cell{{"cf", "s", "ab"}}},
		{"append to an existing value, twice", []cell{{"cf", "s", "x"}},
			func(m *client.ReadModifyWrite) {
				m.AppendValue("cf", "s", []byte("y"))
				m.AppendValue("cf", "s", []byte("z"))
			},
			codes.OK, []cell{{"cf", "s", "xyz"}}},
		{"rules on several columns and families", []cell{{"g", "n", string(counter(9))}},
			func(m *client.ReadModifyWrite) {
				m.Increment("g", "n", 1)
				m.AppendValue("cf", "s", []byte("v"))
			},
			codes.OK, []cell{{"cf", "s", "v"}, {"g", "n", string(counter(10))}}},
		{"append then increment makes a non-counter", nil,
			func(m *client.ReadModifyWrite) {
				m.AppendValue("cf", "n", []byte("abc"))
				m.Increment("cf", "n", 1)
			},
			codes.FailedPrecondition, nil},
		{"increment of a cell that is not 8 bytes", []cell{{"cf", "n", "short"}},
			func(m *client.ReadModifyWrite) {
				m.AppendValue("cf", "s", []byte("never"))
				m.Increment("cf", "n", 1)
			},
			codes.FailedPrecondition, []cell{{"cf", "n", "short"}}},
		{"unknown family", nil,
			func(m *client.ReadModifyWrite) { m.Increment("nope", "n", 1) },
			codes.InvalidArgument, nil},
		{"no rules", nil, func(*client.ReadModifyWrite) {}, codes.InvalidArgument, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			row := fmt.Sprintf("row%02d", i)
			for _, s := range tc.setup {
				if err := tbl.Put(ctx, row, s.fam, s.col, []byte(s.val)); err != nil {
					t.Fatal(err)
				}
			}
			before, err := tbl.Get(ctx, row)
			if err != nil {
				t.Fatal(err)
			}
			m := client.NewReadModifyWrite()
			tc.rules(m)
			start := time.Now().UnixMicro()
			got, err := tbl.ApplyReadModifyWrite(ctx, row, m)
			if code := status.Code(err); code != tc.code {
				t.Fatalf("code %v (%v), want %v", code, err, tc.code)
			}
			after, gerr := tbl.Get(ctx, row)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tc.code != codes.OK {
				if fmt.Sprint(after) != fmt.Sprint(before) {
					t.Fatalf("a failed read-modify-write changed the row:\nbefore %v\nafter  %v", before, after)
				}
				return
			}
			if got.Key != row || len(got.Cells) != len(tc.want) {
				t.Fatalf("returned %+v, want %d cells %v", got, len(tc.want), tc.want)
			}
			for j, w := range tc.want {
				g := got.Cells[j]
				if g.Family != w.fam || g.Qualifier != w.col || !bytes.Equal(g.Value, []byte(w.val)) || g.Timestamp < start {
					t.Errorf("returned cell %d = %s:%s=%q @%d, want %s:%s=%q at a server timestamp ≥ %d", j, g.Family, g.Qualifier, g.Value, g.Timestamp, w.fam, w.col, w.val, start)
				}
				if v, _ := after.Value(w.fam, w.col); !bytes.Equal(v, []byte(w.val)) {
					t.Errorf("read after: %s:%s = %q, want %q", w.fam, w.col, v, w.val)
				}
			}
		})
	}

	t.Run("a latest cell in the future keeps its timestamp", func(t *testing.T) {
		future := time.Now().Add(time.Hour).UnixMicro()
		m := client.NewMutation()
		m.Set("cf", "n", future, counter(1))
		if err := tbl.Apply(ctx, "future", m); err != nil {
			t.Fatal(err)
		}
		r := client.NewReadModifyWrite()
		r.Increment("cf", "n", 1)
		got, err := tbl.ApplyReadModifyWrite(ctx, "future", r)
		if err != nil {
			t.Fatal(err)
		}
		if got.Cells[0].Timestamp != future || !bytes.Equal(got.Cells[0].Value, counter(2)) {
			t.Fatalf("got %+v, want the value 2 at the future timestamp %d", got.Cells[0], future)
		}
		after, err := tbl.Get(ctx, "future", client.LatestN(1))
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := after.Value("cf", "n"); !bytes.Equal(v, counter(2)) {
			t.Fatalf("latest value %x, want 2", v)
		}
	})
}

// incrementers runs n goroutines that each increment row's counter m
// times, until stop is closed or they are done, and returns the count of
// acknowledged increments and of increments whose outcome is unknown (an
// error after the request may have reached a tserver). Errors that prove
// nothing was applied are retried by the client itself.
func incrementers(ctx context.Context, tbl *client.Table, row string, n, m int) (acked, unknown *atomic.Int64, wait func()) {
	acked, unknown = new(atomic.Int64), new(atomic.Int64)
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < m; i++ {
				rmw := client.NewReadModifyWrite()
				rmw.Increment("cf", "n", 1)
				if _, err := tbl.ApplyReadModifyWrite(ctx, row, rmw); err != nil {
					unknown.Add(1)
					continue
				}
				acked.Add(1)
			}
		}()
	}
	return acked, unknown, wg.Wait
}

func readCounter(t *testing.T, ctx context.Context, tbl *client.Table, row string) int64 {
	t.Helper()
	r, err := tbl.Get(ctx, row, client.LatestN(1))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := r.Value("cf", "n")
	if !ok || len(v) != 8 {
		t.Fatalf("counter cell %x (present %v)", v, ok)
	}
	return int64(binary.BigEndian.Uint64(v))
}

// waitAcked polls until at least n increments were acknowledged.
func waitAcked(t *testing.T, ctx context.Context, acked *atomic.Int64, n int64) {
	t.Helper()
	wait.ForCtx(t, ctx, fmt.Sprintf("%d acknowledged increments", n), func() error {
		if got := acked.Load(); got < n {
			return fmt.Errorf("only %d", got)
		}
		return nil
	})
}

// TestIncrementConcurrent: N goroutines increment one counter M times
// each; the counter ends at exactly the number of increments.
func TestIncrementConcurrent(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	_, tbl := rmwTable(t, c, ctx)
	const n, m = 8, 40
	acked, unknown, wait := incrementers(ctx, tbl, "ctr", n, m)
	wait()
	if unknown.Load() != 0 {
		t.Fatalf("%d increments failed on a healthy cluster", unknown.Load())
	}
	if got := readCounter(t, ctx, tbl, "ctr"); got != n*m || acked.Load() != n*m {
		t.Fatalf("counter %d, acknowledged %d, want %d", got, acked.Load(), n*m)
	}
}

// TestIncrementAcrossFailures: increments run while the counter's
// tserver restarts, while it stops for good (its tablet fails over to
// another tserver), and while its tablet splits at the counter's row;
// after each, the counter lies between the acknowledged increments and
// the acknowledged plus the unknown ones, and it keeps counting from
// there.
func TestIncrementAcrossFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts, splits and fails over tservers: not in the fast loop (-short)")
	}
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 2, Lease: time.Second})
	ctx := ctxT(t)
	cl, tbl := rmwTable(t, c, ctx)
	const n, m = 4, 60
	const row = "ctr"
	holder := func() int {
		tablets, err := cl.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tablets {
			if tb.StartRow <= row && (tb.EndRow == "" || row < tb.EndRow) {
				for _, i := range c.Running() {
					if c.TServerAddr(i) == tb.TServer {
						return i
					}
				}
			}
		}
		t.Fatalf("no running tserver serves row %q", row)
		return -1
	}
	base := int64(0)
	for _, stage := range []string{"restart", "split", "failover"} {
		acked, unknown, wait := incrementers(ctx, tbl, row, n, m)
		waitAcked(t, ctx, acked, n*m/4)
		var err error
		switch stage {
		case "restart":
			err = c.RestartTServer(holder())
		case "split":
			err = cl.SplitTablet(ctx, "t", row)
		case "failover":
			err = c.StopTServer(holder())
		}
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		wait()
		got := readCounter(t, ctx, tbl, row) - base
		a, u := acked.Load(), unknown.Load()
		t.Logf("%s: counter +%d, acknowledged %d, unknown %d", stage, got, a, u)
		if got < a || got > a+u {
			t.Fatalf("%s: counter grew by %d, want within [acknowledged %d, acknowledged+unknown %d]", stage, got, a, a+u)
		}
		base += got
	}
}

// BenchmarkIncrement measures ReadModifyWrite increments through the real
// in-process cluster (real WAL with fsync, gRPC on loopback): "one row",
// 32 goroutines on one counter (they serialise on its row lock, one log
// sync each), and "many rows", 32 goroutines on 1024 counters (their
// appends share group commits).
func BenchmarkIncrement(b *testing.B) {
	for _, bc := range []struct {
		name string
		rows int64
	}{{"one row", 1}, {"many rows", 1024}} {
		b.Run(bc.name, func(b *testing.B) {
			c := inproc.Start(b, inproc.Options{MemLimit: 64 << 20})
			ctx := context.Background()
			if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
				b.Fatal(err)
			}
			tbl, err := c.Client().Open(ctx, "t")
			if err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(16) // 32 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m := client.NewReadModifyWrite()
					m.Increment("cf", "n", 1)
					if _, err := tbl.ApplyReadModifyWrite(ctx, fmt.Sprintf("ctr%04d", n.Add(1)%bc.rows), m); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPutReal is the plain-write baseline for BenchmarkIncrement:
// the same cluster and concurrency, 32 goroutines on 1024 rows.
func BenchmarkPutReal(b *testing.B) {
	c := inproc.Start(b, inproc.Options{MemLimit: 64 << 20})
	ctx := context.Background()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		b.Fatal(err)
	}
	tbl, err := c.Client().Open(ctx, "t")
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := tbl.Put(ctx, fmt.Sprintf("ctr%04d", n.Add(1)%1024), "cf", "n", counter(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
