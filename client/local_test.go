package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"bighive/client"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/inproc"
	"bighive/tserver"
)

// countingLocal is a real in-process tserver as a client.LocalTServer,
// counting the commands it ran for the client.
type countingLocal struct {
	ts    *tserver.Server
	calls atomic.Int64
}

func (l *countingLocal) Addr() string { return l.ts.Addr() }

func (l *countingLocal) Command(ctx context.Context, cmd *pb.BatchCommandsRequest_Command) *pb.BatchCommandsResponse_Result {
	l.calls.Add(1)
	return l.ts.Command(ctx, cmd)
}

// TestLocalTServer: with WithLocalTServer, Puts, Gets, Pings and the
// errors of one command reach the tserver in this process directly, for
// its tablets only; the tablets of another tserver, scans and bulk writes
// go over gRPC. What each path wrote, the other reads.
func TestLocalTServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := inproc.Start(t, inproc.Options{TServers: 2})
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch stream %v", batch), func(t *testing.T) {
			local := &countingLocal{ts: c.TServer(0)}
			lc := c.Client(client.WithLocalTServer(local), client.WithBatchStream(batch))
			tbl, err := lc.Open(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			plain, err := c.Client().Open(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			// One row of each tserver's tablet: the write of the local
			// tserver's row runs one command there, the other's none.
			var here, there string
			for _, row := range []string{"a" + fmt.Sprint(batch), "z" + fmt.Sprint(batch)} {
				v := []byte(row)
				before := local.calls.Load()
				if err := tbl.Put(ctx, row, "cf", "q", v); err != nil {
					t.Fatalf("put %s: %v", row, err)
				}
				if local.calls.Load() > before {
					here = row
				} else {
					there = row
				}
				got, err := plain.Get(ctx, row)
				if err != nil || len(got.Cells) != 1 || string(got.Cells[0].Value) != string(v) {
					t.Fatalf("the other path reads %s as %+v, %v; want %q", row, got, err, v)
				}
				if got, err := tbl.Get(ctx, row); err != nil || len(got.Cells) != 1 || string(got.Cells[0].Value) != string(v) {
					t.Fatalf("get %s: %+v, %v; want %q", row, got, err, v)
				}
			}
			if here == "" || there == "" {
				t.Fatalf("rows of the local tserver: %q, of the other: %q; want one each", here, there)
			}
			if err := tbl.Ping(ctx, here); err != nil {
				t.Fatal(err)
			}
			// put, get, ping of the local tablet's row: 3 commands.
			if n := local.calls.Load(); n != 3 {
				t.Fatalf("the local tserver ran %d commands, want 3 (put, get and ping of row %q)", n, here)
			}
			// An error of one command comes back as over the stream.
			if err := tbl.Put(ctx, here, "nope", "q", []byte("x")); err == nil {
				t.Fatal("a put to an unknown family succeeded")
			}
			var rows int
			err = tbl.Scan(ctx, "", "", func(r client.Row) bool {
				if r.Key == here || r.Key == there {
					rows++
				}
				return true
			})
			if err != nil || rows != 2 {
				t.Fatalf("scan: %d of the rows written, %v; want 2", rows, err)
			}
		})
	}
}

// scanningLocal is countingLocal that also scans in this process
// (client.LocalScanner), counting the scans.
type scanningLocal struct {
	countingLocal
	scans atomic.Int64
}

func (l *scanningLocal) ScanLocal(ctx context.Context, req *pb.ScanRowsRequest) func() (*pb.ScanRowsResponse, error) {
	l.scans.Add(1)
	return l.ts.ScanLocal(ctx, req)
}

// TestLocalScan: with a LocalScanner, the scans of the local tserver's
// tablets run in this process and read what the same scans read over
// gRPC, whichever way they read: forward and reversed, row lists, limits,
// filters, rows larger than a message, and a scan its caller stops early.
func TestLocalScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := inproc.Start(t, inproc.Options{TServers: 2})
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf", MaxVersions: 2}},
		SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	plain, err := c.Client().Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var ms []*client.Mutation
	for i := range 300 {
		m := client.NewMutation()
		for v := int64(1); v <= 3; v++ {
			m.Set("cf", fmt.Sprint("q", i%3), v*1000, []byte(fmt.Sprint(i, "/", v)))
		}
		keys, ms = append(keys, fmt.Sprintf("%c%04d", 'a'+i%26, i)), append(ms, m)
	}
	big := client.NewMutation() // over one message: sent in chunks
	for q := range 3 {
		big.Set("cf", fmt.Sprint("big", q), 1000, make([]byte, 700<<10))
	}
	keys, ms = append(keys, "b-big", "x-big"), append(ms, big, big)
	if errs, err := plain.ApplyBulk(ctx, keys, ms); err != nil || errs != nil {
		t.Fatal(err, errs)
	}
	local := &scanningLocal{countingLocal: countingLocal{ts: c.TServer(0)}}
	tbl, err := c.Client(client.WithLocalTServer(local)).Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	read := func(tb *client.Table, set client.RowSet, stopAfter int, opts ...client.ReadOption) []string {
		t.Helper()
		var out []string
		err := tb.ReadRows(ctx, set, func(r client.Row) bool {
			for _, cl := range r.Cells {
				out = append(out, fmt.Sprintf("%s %s:%s@%d %d %x", r.Key, cl.Family, cl.Qualifier, cl.Timestamp, len(cl.Value), cl.Value[:min(8, len(cl.Value))]))
			}
			return stopAfter == 0 || len(out) < stopAfter
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cases := []struct {
		name string
		set  client.RowSet
		stop int
		opts []client.ReadOption
		both bool // reads both tablets: one is the local tserver's
	}{
		{"everything", client.InfiniteRange(""), 0, nil, true},
		{"reversed", client.InfiniteRange(""), 0, []client.ReadOption{client.ReverseScan()}, true},
		{"row list", client.RowList{"a0000", "b-big", "c0002", "n0013", "x-big", "zz"}, 0, nil, true},
		{"limit", client.InfiniteRange(""), 0, []client.ReadOption{client.LimitRows(7)}, false},
		{"latest version", client.NewRange("b", "p"), 0, []client.ReadOption{client.LatestN(1)}, true},
		{"stopped early", client.InfiniteRange(""), 10, nil, false},
	}
	for _, tc := range cases {
		before := local.scans.Load()
		got, want := read(tbl, tc.set, tc.stop, tc.opts...), read(plain, tc.set, tc.stop, tc.opts...)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%s: the local scan read %d cells, over gRPC %d (or other ones)", tc.name, len(got), len(want))
		}
		if local.scans.Load() == before && tc.both {
			t.Fatalf("%s: no scan of the local tserver ran in this process", tc.name)
		}
	}
}
