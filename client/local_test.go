package client_test

import (
	"context"
	"fmt"
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
