package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
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
	conn, err := grpc.NewClient(listenAPI(t, New(c.Client(client.WithRetryTimeout(time.Second)), nil)), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	t.Parallel()
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
	conn, err := grpc.NewClient(listenAPI(t, New(cl, nil)), grpc.WithTransportCredentials(insecure.NewCredentials()))
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

// TestErrorsTable triggers every row of the "Errors" table of
// docs/bigtable-api.md through the frontend's gRPC server, and checks the
// code and that the message names what the table says (the table's
// resource name, the family, the method) and none of Bighive's internals.
// Most rows run over a real in-process cluster; those that need a
// tserver to fail in a given way (Unavailable, outcome unknown, Internal,
// DeadlineExceeded, Canceled) run over the client's fake cluster with an
// injected fault. The row of the value and row mutation limits is
// TestLargeRowsEmulatorHost's (it needs messages of 100 MiB and more). Aborted never leaves Bighive's client, which retries
// it; TestAPIErrCodes checks that the mapping keeps it.
func TestErrorsTable(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}})
	ctx := ctxT(t)
	raw := btpb.NewBigtableClient(a.conn)
	adm := adminpb.NewBigtableTableAdminClient(a.conn)

	fc := clienttest.Start(t, clienttest.Options{})
	if err := fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	fcl, err := client.Dial(ctx, fc.MasterAddrs(), client.WithRetryTimeout(300*time.Millisecond), client.WithBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fcl.Close() })
	fconn, _ := serveAPI(t, fcl)
	fraw := btpb.NewBigtableClient(fconn)
	// The rows where the caller's deadline or cancel ends the call go
	// through a frontend whose client retries for a minute, so that its
	// own retry timeout cannot answer first on a loaded machine.
	scl, err := client.Dial(ctx, fc.MasterAddrs(), client.WithRetryTimeout(time.Minute), client.WithBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scl.Close() })
	sconn, _ := serveAPI(t, scl)
	sraw := btpb.NewBigtableClient(sconn)

	const (
		parent  = "projects/p/instances/i"
		tn      = parent + "/tables/t"
		missing = parent + "/tables/nosuch"
	)
	set := func(fam string, ts int64, v []byte) []*btpb.Mutation {
		return []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{FamilyName: fam, ColumnQualifier: []byte("q"), TimestampMicros: ts, Value: v}}}}
	}
	mutate := func(c btpb.BigtableClient, ctx context.Context, table, fam string, ts int64) error {
		_, err := c.MutateRow(ctx, &btpb.MutateRowRequest{TableName: table, RowKey: []byte("r"), Mutations: set(fam, ts, []byte("abc"))})
		return err
	}
	increment := func(c btpb.BigtableClient, ctx context.Context, fam string) error {
		_, err := c.ReadModifyWriteRow(ctx, &btpb.ReadModifyWriteRowRequest{TableName: tn, RowKey: []byte("n"),
			Rules: []*btpb.ReadModifyWriteRule{{FamilyName: fam, ColumnQualifier: []byte("q"), Rule: &btpb.ReadModifyWriteRule_IncrementAmount{IncrementAmount: 1}}}})
		return err
	}
	readAll := func(c btpb.BigtableClient, ctx context.Context, req *btpb.ReadRowsRequest) error {
		st, err := c.ReadRows(ctx, req)
		for err == nil {
			_, err = st.Recv()
		}
		if err == io.EOF {
			return nil
		}
		return err
	}
	if _, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("n"), Mutations: set("f", 1000, []byte("abc"))}); err != nil {
		t.Fatal(err) // n's f:q holds 3 bytes
	}
	// Both frontends over the fake cluster locate the tablet before the
	// rows begin, so that a row's 300 ms retry budget goes to the fault it
	// injects, not to a first lookup on a loaded machine.
	for _, c := range []btpb.BigtableClient{fraw, sraw} {
		for err := mutate(c, ctx, tn, "f", 1000); err != nil; err = mutate(c, ctx, tn, "f", 1000) {
			if ctx.Err() != nil {
				t.Fatalf("a first write through the fake cluster: %v", err)
			}
			t.Logf("a first write through the fake cluster: %v; again", err)
		}
	}
	// The calls over the fake cluster have no deadline, so that its
	// client's retry timeout ends them (a deadline would govern instead);
	// a stuck one is canceled after a minute.
	nctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := time.AfterFunc(time.Minute, cancel)
	defer stuck.Stop()

	for _, tt := range []struct {
		code  codes.Code
		when  string
		call  func() error
		names []string // what the message must contain
	}{
		{codes.InvalidArgument, "a malformed table name", func() error {
			return mutate(raw, ctx, "projects/p/instances/i/t", "f", 1000)
		}, []string{"MutateRow", `malformed table name "projects/p/instances/i/t"`}},
		{codes.InvalidArgument, "a malformed request: no mutations", func() error {
			_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r")})
			return err
		}, []string{tn, "no mutations"}},
		{codes.InvalidArgument, "a malformed request: an empty time range (refused by the tserver)", func() error {
			_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_DeleteFromColumn_{
				DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{FamilyName: "f", ColumnQualifier: []byte("q"), TimeRange: &btpb.TimestampRange{StartTimestampMicros: 5000, EndTimestampMicros: 1000}}}}}})
			return err
		}, []string{tn, "[5000, 1000)"}},
		{codes.InvalidArgument, "a malformed request: a filter that does not compile", func() error {
			return readAll(raw, ctx, &btpb.ReadRowsRequest{TableName: tn, Filter: &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte("(")}}})
		}, []string{tn, "value_regex_filter"}},
		{codes.NotFound, "an unknown table (data)", func() error {
			return readAll(raw, ctx, &btpb.ReadRowsRequest{TableName: missing})
		}, []string{missing}},
		{codes.NotFound, "an unknown table (admin)", func() error {
			_, err := adm.GetTable(ctx, &adminpb.GetTableRequest{Name: missing})
			return err
		}, []string{missing}},
		{codes.NotFound, "a write to an unknown column family: MutateRow", func() error {
			return mutate(raw, ctx, tn, "nofam", 1000)
		}, []string{tn, `column family "nofam" not found`}},
		{codes.NotFound, "a write to an unknown column family: a MutateRows entry", func() error {
			st, err := raw.MutateRows(ctx, &btpb.MutateRowsRequest{TableName: tn, Entries: []*btpb.MutateRowsRequest_Entry{
				{RowKey: []byte("r"), Mutations: set("f", 1000, nil)}, {RowKey: []byte("r2"), Mutations: set("nofam", 1000, nil)}}})
			if err != nil {
				return err
			}
			resp, err := st.Recv()
			if err != nil {
				return err
			}
			if e := resp.GetEntries(); len(e) != 2 || e[0].GetStatus().GetCode() != 0 || e[1].GetIndex() != 1 {
				return fmt.Errorf("entries %v; want entry 0 OK", e)
			}
			return status.ErrorProto(resp.Entries[1].Status)
		}, []string{tn, "entry 1", `column family "nofam" not found`}},
		{codes.NotFound, "a write to an unknown column family: ReadModifyWriteRow", func() error {
			return increment(raw, ctx, "nofam")
		}, []string{tn, `column family "nofam" not found`}},
		{codes.NotFound, "ModifyColumnFamilies updating or dropping a missing family", func() error {
			_, err := adm.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: tn, Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
				{Id: "nofam", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{}},
					UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"value_type"}}}}})
			return err
		}, []string{tn, `column family "nofam"`}},
		{codes.AlreadyExists, "CreateTable of an existing table", func() error {
			_, err := adm.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent, TableId: "t"})
			return err
		}, []string{tn, "already exists"}},
		{codes.FailedPrecondition, "an increment of a cell that is not 8 bytes", func() error {
			return increment(raw, ctx, "f")
		}, []string{tn, "64-bit", "3 bytes"}},
		{codes.InvalidArgument, "an AddToCell without a qualifier", func() error {
			_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{}}}}})
			return err
		}, []string{tn, "AddToCell", "raw_value"}},
		{codes.Unimplemented, "what Bighive does not serve: a method", func() error {
			_, err := adm.UndeleteTable(ctx, &adminpb.UndeleteTableRequest{Name: parent + "/tables/t"})
			return err
		}, []string{"UndeleteTable"}},
		{codes.ResourceExhausted, "a request over the receive limit", func() error {
			return overLimitRequest(ctx, a.conn, limits.MaxRequestBytes+2<<20)
		}, []string{"larger than max"}},
		{codes.Unavailable, "the tablet servers stay unavailable", func() error {
			fc.Inject(clienttest.Fault{Method: "MutateRow", Times: 1 << 20, Err: apierr.Tablet(pb.TabletError_NOT_SERVING, "t0001", 1, "tserver 127.0.0.1:1: tablet t0001 not serving")})
			defer fc.ClearFaults()
			return mutate(fraw, nctx, tn, "f", 1000)
		}, []string{tn, "try again"}},
		{codes.Unavailable, "a write of unknown outcome", func() error {
			fc.Inject(clienttest.Fault{Method: "CheckAndMutateRow", Applied: true, Err: apierr.Unavailable("tserver 127.0.0.1:1: replica: connection reset")})
			defer fc.ClearFaults()
			_, err := fraw.CheckAndMutateRow(nctx, &btpb.CheckAndMutateRowRequest{TableName: tn, RowKey: []byte("r"), TrueMutations: set("f", 1000, nil)})
			return err
		}, []string{tn, "outcome unknown"}},
		{codes.DeadlineExceeded, "the caller's deadline passed", func() error {
			fc.Inject(clienttest.Fault{Method: "MutateRow", Delay: time.Minute})
			defer fc.ClearFaults()
			dctx, cancel := context.WithTimeout(nctx, 300*time.Millisecond)
			defer cancel()
			return mutate(sraw, dctx, tn, "f", 1000)
		}, nil},
		{codes.Canceled, "the caller canceled", func() error {
			fc.Inject(clienttest.Fault{Method: "MutateRow", Delay: time.Minute})
			defer fc.ClearFaults()
			cctx, cancel := context.WithCancel(nctx)
			time.AfterFunc(300*time.Millisecond, cancel)
			return mutate(sraw, cctx, tn, "f", 1000)
		}, nil},
		{codes.Internal, "an unexpected failure", func() error {
			fc.Inject(clienttest.Fault{Method: "MutateRow", Err: status.Error(codes.Internal, "tablet t0001: replica: checksum mismatch in block 7")})
			defer fc.ClearFaults()
			return mutate(fraw, nctx, tn, "f", 1000)
		}, []string{tn, "checksum mismatch in block 7"}},
	} {
		err := tt.call()
		t.Logf("%s: %v", tt.when, err)
		msg := status.Convert(err).Message()
		code := status.Code(err)
		if tt.code == codes.DeadlineExceeded && code == codes.Unavailable && strings.Contains(msg, "outcome unknown") {
			// The write reached the tserver, so its outcome is unknown: the
			// frontend's answer says so, and reaches the caller when it
			// comes before the caller's own gRPC deadline fires.
			code = codes.DeadlineExceeded
		}
		if code != tt.code {
			t.Errorf("%s: %v; want %v", tt.when, err, tt.code)
			continue
		}
		for _, n := range tt.names {
			if !strings.Contains(msg, n) {
				t.Errorf("%s: message %q does not name %q", tt.when, msg, n)
			}
		}
		for _, internal := range []string{"client:", "replica:", "tablet t0", "tserver 127", "frontend:"} {
			if strings.Contains(msg, internal) {
				t.Errorf("%s: message %q names Bighive's internals (%q)", tt.when, msg, internal)
			}
		}
	}
}

// overLimitRequest calls MutateRow with a message of n bytes that the
// frontend must refuse by its length alone: the message is one 64 KiB
// buffer sent over and over (sameBuffers), so the test holds no copy of n
// bytes, and the client's own send limit is lifted for the call.
func overLimitRequest(ctx context.Context, conn *grpc.ClientConn, n int) error {
	piece := make([]byte, 64<<10)
	var msg mem.BufferSlice
	for left := n; left > 0; left -= len(piece) {
		msg = append(msg, mem.SliceBuffer(piece[:min(len(piece), left)]))
	}
	return conn.Invoke(ctx, "/google.bigtable.v2.Bigtable/MutateRow", msg, new(btpb.MutateRowResponse),
		grpc.ForceCodecV2(sameBuffers{}), grpc.MaxCallSendMsgSize(math.MaxInt32))
}

// sameBuffers sends a mem.BufferSlice as it is.
type sameBuffers struct{}

func (sameBuffers) Marshal(v any) (mem.BufferSlice, error)      { return v.(mem.BufferSlice), nil }
func (sameBuffers) Unmarshal(data mem.BufferSlice, v any) error { return nil }
func (sameBuffers) Name() string                                { return "proto" }
