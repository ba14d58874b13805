package frontend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/testkit/inproc"
)

// TestAPIErrCodes: the codes Bigtable clients retry on (Unavailable,
// Aborted) and NotFound reach them unchanged, wrapped or not; context
// errors become their gRPC codes. DeadlineExceeded, which they take for
// their own deadline, final, reaches them only once their deadline has
// passed: before, it is Unavailable.
func TestAPIErrCodes(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	var s *Server // the mapping needs no server (it logs through one if given)
	c := rowCall("MutateRow", "projects/p/instances/i/tables/t", []byte("r"))
	for _, tt := range []struct {
		ctx  context.Context
		err  error
		want codes.Code
	}{
		{live, status.Error(codes.Unavailable, "client: tserver down"), codes.Unavailable},
		{live, fmt.Errorf("frontend: x: %w", status.Error(codes.Aborted, "aborted")), codes.Aborted},
		{live, status.Error(codes.DeadlineExceeded, "client: the attempt timed out"), codes.Unavailable},
		{expired, status.Error(codes.DeadlineExceeded, "client: context deadline exceeded"), codes.DeadlineExceeded},
		{live, apierr.NotFound("table %q not found", "t"), codes.NotFound},
		{live, apierr.Unavailable("tablet splitting"), codes.Unavailable},
		{live, fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.Unavailable},
		{expired, fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{live, context.Canceled, codes.Canceled},
		{live, errors.New("boom"), codes.Internal},
	} {
		if got := status.Code(s.apiErr(tt.ctx, c, tt.err)); got != tt.want {
			t.Errorf("apiErr(%v) has code %v; want %v", tt.err, got, tt.want)
		}
	}
	if s.apiErr(live, c, nil) != nil {
		t.Error("apiErr(nil) is not nil")
	}
}

// TestDataUnavailableIsRetryable: with the only tserver down, a write
// without a deadline through the frontend fails, once the frontend's
// client gives up retrying, with Unavailable, which Bigtable clients
// retry: not DeadlineExceeded (final to them), Internal or Unknown.
func TestDataUnavailableIsRetryable(t *testing.T) {
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	New(c.Client(client.WithRetryTimeout(time.Second)), nil).Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := btpb.NewBigtableClient(conn)
	req := &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/t", RowKey: []byte("r"), Mutations: []*btpb.Mutation{{
		Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{FamilyName: "f", ColumnQualifier: []byte("q"), TimestampMicros: 1000, Value: []byte("v")}},
	}}}
	if _, err := raw.MutateRow(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.StopTServer(0); err != nil {
		t.Fatal(err)
	}
	// No deadline on the call, so the frontend's client gives up after
	// its retry timeout (a deadline would govern instead) and the code
	// comes from the frontend; a stuck call is canceled after a minute.
	nctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := time.AfterFunc(time.Minute, cancel)
	defer stuck.Stop()
	_, err = raw.MutateRow(nctx, req)
	t.Logf("MutateRow with the tserver down: %v", err)
	if code := status.Code(err); code != codes.Unavailable {
		t.Errorf("MutateRow with the tserver down = %v; want Unavailable", err)
	}
}

// TestReadRowsFailureSendsRowsFirst: when a read fails part-way (the
// tserver of its second tablet is down, and stays so past the frontend
// client's retry timeout, the lease being long), the rows already read
// from the first tablet reach the caller before the error, so a Bigtable
// client resumes after them.
func TestReadRowsFailureSendsRowsFirst(t *testing.T) {
	c := inproc.Start(t, inproc.Options{TServers: 2, Lease: 5 * time.Minute})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", SplitKeys: []string{"m"}, Families: []client.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	tablets, err := c.Client().Tablets(ctx, "t")
	if err != nil || len(tablets) != 2 {
		t.Fatalf("tablets = %v, %v", tablets, err)
	}
	if tablets[0].TServer == tablets[1].TServer {
		t.Skipf("both tablets on %s; the test needs them apart", tablets[0].TServer)
	}
	cl := c.Client(client.WithRetryTimeout(time.Second))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", "x", "y"} {
		if err := tbl.Put(ctx, k, "f", "q", []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.TServers() {
		if c.TServerAddr(i) == tablets[1].TServer {
			if err := c.StopTServer(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	New(cl, nil).Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	nctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := time.AfterFunc(time.Minute, cancel)
	defer stuck.Stop()
	st, err := btpb.NewBigtableClient(conn).ReadRows(nctx, &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/t"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for {
		r, err := st.Recv()
		if err != nil {
			if code := status.Code(err); code != codes.Unavailable {
				t.Errorf("ReadRows ended with %v; want Unavailable (the call has no deadline)", err)
			}
			break
		}
		for _, ch := range r.Chunks {
			if ch.RowKey != nil {
				keys = append(keys, string(ch.RowKey))
			}
		}
	}
	if fmt.Sprint(keys) != "[a b c]" {
		t.Errorf("rows before the error = %v; want [a b c]", keys)
	}
}
