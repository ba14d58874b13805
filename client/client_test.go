package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/fastloop"
)

// setup starts a fake cluster with table "t" (families cf, meta) split at
// the given keys, and returns it with a client and the open table.
func setup(t *testing.T, opts clienttest.Options, splits ...string) (*clienttest.Cluster, *client.Client, *client.Table) {
	t.Helper()
	return setupWith(t, opts, nil, splits...)
}

// unaryOnly makes setup's clients use unary calls instead of the batch
// stream (TestUnaryCalls sets it while it reruns tests).
var unaryOnly bool

// setupWith is setup with extra client options.
func setupWith(t *testing.T, opts clienttest.Options, copts []client.Option, splits ...string) (*clienttest.Cluster, *client.Client, *client.Table) {
	t.Helper()
	fc := clienttest.Start(t, opts)
	if err := fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}, {Name: "meta", MaxVersions: 2}}}, splits...); err != nil {
		t.Fatal(err)
	}
	copts = append([]client.Option{client.WithBackoff(time.Millisecond, 20*time.Millisecond), client.WithAttemptTimeout(2 * time.Second)}, copts...)
	if unaryOnly {
		copts = append(copts, client.WithBatchStream(false))
	}
	c, err := client.Dial(context.Background(), fc.MasterAddrs(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tbl, err := c.Open(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	return fc, c, tbl
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func scanAll(t *testing.T, tbl *client.Table, start, end string, opts ...client.ReadOption) []string {
	t.Helper()
	var keys []string
	err := tbl.Scan(ctxT(t), start, end, func(r client.Row) bool {
		keys = append(keys, r.Key)
		return true
	}, opts...)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return keys
}

func rowKey(i int) string { return fmt.Sprintf("row%03d", i) }

// TestRoutingRetries: every routing error and an unreachable tserver make
// the client refresh the location and retry, for reads and for writes of
// both kinds (a routing error is known to precede logging).
func TestRoutingRetries(t *testing.T) {
	notServing := apierr.Tablet(pb.TabletError_NOT_SERVING, "", 0, "not served here")
	tests := []struct {
		name   string
		method string
		err    error
	}{
		{"not serving", "MutateRow", notServing},
		{"wrong tablet", "MutateRow", apierr.Tablet(pb.TabletError_WRONG_TABLET, "", 0, "split")},
		{"recovering", "MutateRow", apierr.Tablet(pb.TabletError_RECOVERING, "", 0, "replaying")},
		{"read not serving", "ReadRow", notServing},
		{"lookup no leader", "GetTableLocations", apierr.NotLeader("")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc, _, tbl := setup(t, clienttest.Options{})
			ctx := ctxT(t)
			if err := tbl.Put(ctx, "warm", "cf", "q", nil); err != nil {
				t.Fatal(err)
			}
			fc.Inject(clienttest.Fault{Method: tc.method, Err: tc.err, Times: 3})
			if tc.method == "GetTableLocations" {
				fc.MoveTablet("t", "r", 0) // force a lookup
			}
			lookups := fc.Calls("GetTableLocations")
			m := client.NewMutation()
			m.Set("cf", "q", client.ServerTime, []byte("v"))
			if err := tbl.Apply(ctx, "r", m); err != nil {
				t.Fatalf("apply: %v", err)
			}
			r, err := tbl.Get(ctx, "r")
			if err != nil || len(r.Cells) != 1 {
				t.Fatalf("get: %+v %v", r, err)
			}
			if fc.Calls("GetTableLocations") <= lookups {
				t.Errorf("the location was not refreshed")
			}
		})
	}
}

func TestTabletMovesAndSplits(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{TServers: 3}, "m")
	ctx := ctxT(t)
	for i := 0; i < 30; i++ {
		if err := tbl.Put(ctx, rowKey(i), "cf", "q", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	fc.MoveTablet("t", "row005", 2)
	fc.Split("t", "row010")
	fc.Split("t", "row020")
	if err := tbl.Put(ctx, rowKey(5), "cf", "q", []byte("moved")); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(ctx, rowKey(15), "cf", "q", []byte("split")); err != nil {
		t.Fatal(err)
	}
	r, err := tbl.Get(ctx, rowKey(5))
	if v, _ := r.Value("cf", "q"); err != nil || string(v) != "moved" {
		t.Fatalf("get after move: %q %v", v, err)
	}
	// A tserver that went away: its tablets move, the client follows.
	fc.StopTServer(2)
	for _, row := range []string{"row005", "row015", "row025"} {
		fc.MoveTablet("t", row, 1)
	}
	if _, err := tbl.Get(ctx, rowKey(5)); err != nil {
		t.Fatal(err)
	}
	if keys := scanAll(t, tbl, "", ""); len(keys) != 30 {
		t.Fatalf("scan after moves: %d rows", len(keys))
	}
}

// TestScanNeverRepeats: a scan whose stream fails mid-tablet, and whose
// tablets split and move under it, delivers every row once, in order.
func TestScanNeverRepeats(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{TServers: 2}, "row050")
	ctx := ctxT(t)
	rows := make([]string, 100)
	ms := make([]*client.Mutation, 100)
	for i := range rows {
		rows[i] = rowKey(i)
		ms[i] = client.NewMutation()
		ms[i].Set("cf", "q", 1, []byte("v"))
	}
	if errs, err := tbl.ApplyBulk(ctx, rows, ms); errs != nil || err != nil {
		t.Fatal(errs, err)
	}
	fc.Inject(clienttest.Fault{Method: "ScanRows", AfterRows: 7, Err: apierr.Unavailable("tserver crashed"), Times: 2})
	var got []string
	err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
		got = append(got, r.Key)
		switch len(got) {
		case 20:
			fc.Split("t", "row030")
		case 40:
			fc.MoveTablet("t", "row045", 0)
		case 60:
			fc.Inject(clienttest.Fault{Method: "ScanRows", Err: apierr.Tablet(pb.TabletError_NOT_SERVING, "", 0, "moved")})
			fc.MoveTablet("t", "row070", 1)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 {
		t.Fatalf("scan delivered %d rows", len(got))
	}
	for i, k := range got {
		if k != rowKey(i) {
			t.Fatalf("row %d is %q", i, k)
		}
	}
}

// TestServerTimeRetryRules: a lost reply after the tserver applied a write
// is retried only for idempotent mutations.
func TestServerTimeRetryRules(t *testing.T) {
	tests := []struct {
		name      string
		ts        int64
		wantErr   codes.Code
		wantCalls int
	}{
		{"server time is not retried", client.ServerTime, codes.Unavailable, 1},
		{"client time is retried", 12345, codes.OK, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc, _, tbl := setup(t, clienttest.Options{})
			ctx := ctxT(t)
			fc.Inject(clienttest.Fault{Method: "MutateRow", Applied: true, Err: apierr.Unavailable("connection reset after the write")})
			m := client.NewMutation()
			m.Set("cf", "q", tc.ts, []byte("v"))
			err := tbl.Apply(ctx, "r", m)
			if status.Code(err) != tc.wantErr {
				t.Fatalf("apply: %v, want %v", err, tc.wantErr)
			}
			if got := fc.Calls("MutateRow"); got != tc.wantCalls {
				t.Errorf("%d MutateRow calls, want %d", got, tc.wantCalls)
			}
			r, _ := tbl.Get(ctx, "r")
			if len(r.Cells) != 1 {
				t.Errorf("the write applied %d times", len(r.Cells))
			}
		})
	}
}

func TestDeadlineWhileUnassigned(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{})
	fc.MoveTablet("t", "r", -1)
	// A deadline long enough for the first lookups to answer on a loaded
	// machine, so the error names what they found.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := tbl.Put(ctx, "r", "cf", "q", []byte("v"))
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no tserver") {
		t.Fatalf("put: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	// Retries were bounded by the backoff (max 20 ms here: at most about
	// 50 in a second), not a busy loop.
	if n := fc.Calls("GetTableLocations"); n > 150 {
		t.Errorf("%d lookups in 1 s", n)
	}
	fc.MoveTablet("t", "r", 0)
	if err := tbl.Put(ctxT(t), "r", "cf", "q", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

func TestAttemptTimeout(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{})
	fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}})
	c, err := client.Dial(context.Background(), fc.MasterAddrs(), client.WithAttemptTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tbl, err := c.Open(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	fc.Inject(clienttest.Fault{Method: "ReadRow", Delay: 10 * time.Second})
	fc.Inject(clienttest.Fault{Method: "ScanRows", Delay: 10 * time.Second})
	start := time.Now()
	if _, err := tbl.Get(ctxT(t), "r"); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Scan(ctxT(t), "", "", func(client.Row) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a hung server held the calls %v", d)
	}
}

func TestMasterLeaderFollowing(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{Masters: 3})
	fc.SetLeader(2)
	fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}})
	addrs := fc.MasterAddrs()
	tests := []struct {
		name    string
		masters []string
	}{
		{"hint", []string{addrs[0]}},
		{"dead first", []string{"127.0.0.1:1", addrs[1], addrs[2]}},
	}
	for _, tc := range tests {
		c, err := client.Dial(context.Background(), tc.masters, client.WithBackoff(time.Millisecond, 10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		names, err := c.ListTables(ctxT(t))
		if err != nil || len(names) != 1 || names[0] != "t" {
			t.Errorf("%s: %v %v", tc.name, names, err)
		}
		c.Close()
	}
	// No master leads: the call fails with Unavailable at the deadline.
	fc.SetLeader(1)
	c, _ := client.Dial(context.Background(), []string{addrs[0]})
	defer c.Close()
	fc.Inject(clienttest.Fault{Method: "ListTables", Err: apierr.NotLeader(""), Times: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.ListTables(ctx)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not the leader") {
		t.Errorf("no leader: %v", err)
	}
}

// TestApplyBulkRowRefusedWhileSplitting: a row of a bulk write that the
// tserver refused because its tablet is splitting (a per-row status with
// a TabletError detail) is looked up again and retried, not failed: a
// bulk load into a table that splits as it grows must succeed.
func TestApplyBulkRowRefusedWhileSplitting(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{})
	ctx := ctxT(t)
	var rows []string
	var ms []*client.Mutation
	for i := range 10 {
		m := client.NewMutation()
		m.Set("cf", "q", 7, []byte(fmt.Sprint(i)))
		rows, ms = append(rows, rowKey(i)), append(ms, m)
	}
	// The refused row is server-timestamped: only a routing refusal makes
	// retrying it safe.
	ms[5] = client.NewMutation()
	ms[5].Set("cf", "q", client.ServerTime, []byte("5"))
	fc.Inject(clienttest.Fault{Method: "MutateRows", Row: rowKey(5),
		Err: apierr.Tablet(pb.TabletError_WRONG_TABLET, "t1", 1, "tablet t1 is splitting; refresh its location")})
	errs, err := tbl.ApplyBulk(ctx, rows, ms)
	if err != nil || errs != nil {
		t.Fatalf("ApplyBulk: %v %v", errs, err)
	}
	for i := range 10 {
		r, err := tbl.Get(ctx, rowKey(i))
		if v, _ := r.Value("cf", "q"); err != nil || string(v) != fmt.Sprint(i) {
			t.Errorf("row %d: %q %v", i, v, err)
		}
	}
}

// TestApplyBulkRoutingRetries: rows whose tablet answered NOT_SERVING are
// looked up again and retried; a bad row fails alone (the contract checks
// bulk writes without faults).
func TestApplyBulkRoutingRetries(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{TServers: 3}, "row010", "row020")
	ctx := ctxT(t)
	var rows []string
	var ms []*client.Mutation
	for i := 0; i < 30; i++ {
		m := client.NewMutation()
		m.Set("cf", "q", 7, []byte(fmt.Sprint(i)))
		rows, ms = append(rows, rowKey(i)), append(ms, m)
	}
	bad := client.NewMutation()
	bad.Set("nofamily", "q", 7, nil)
	rows, ms = append(rows, "row999", ""), append(ms, bad, ms[0])
	fc.Inject(clienttest.Fault{Method: "MutateRows", Err: apierr.Tablet(pb.TabletError_NOT_SERVING, "", 0, "moved"), Times: 2})
	errs, err := tbl.ApplyBulk(ctx, rows, ms)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 32 {
		t.Fatalf("%d errors", len(errs))
	}
	for i := 0; i < 30; i++ {
		if errs[i] != nil {
			t.Errorf("row %d: %v", i, errs[i])
		}
	}
	if status.Code(errs[30]) != codes.InvalidArgument || status.Code(errs[31]) != codes.InvalidArgument {
		t.Errorf("bad rows: %v / %v", errs[30], errs[31])
	}
	if keys := scanAll(t, tbl, "", ""); len(keys) != 30 {
		t.Errorf("%d rows applied", len(keys))
	}
	if n := fc.Calls("MutateRows"); n < 5 {
		t.Errorf("%d MutateRows calls: the refused ones were not retried", n)
	}
}

// TestBadInputStaysLocal: the client refuses bad input (the contract
// checks the codes and messages) before anything is sent.
func TestBadInputStaysLocal(t *testing.T) {
	fc, c, tbl := setup(t, clienttest.Options{})
	for _, tc := range badInputCases(ctxT(t), c, tbl) {
		if err := tc.call(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, m := range []string{"MutateRow", "MutateRows", "ReadRow", "ScanRows", "SplitTablet"} {
		if n := fc.Calls(m); n != 0 {
			t.Errorf("%d bad %s requests were sent", n, m)
		}
	}
}

// TestConcurrentMisses: many requests missing the cache at once cost a
// few master lookups, not one each.
func TestConcurrentMisses(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{TServers: 2}, "row050")
	ctx := ctxT(t)
	fc.MoveTablet("t", "row010", 1)
	fc.MoveTablet("t", "row060", 0)
	before := fc.Calls("GetTableLocations")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- tbl.Put(ctx, rowKey(i), "cf", "q", []byte("v"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := fc.Calls("GetTableLocations") - before; n > 8 {
		t.Errorf("%d lookups for 64 concurrent misses", n)
	}
}

// TestRetryTimeoutWithoutDeadline: with no context deadline, every call
// gives up after the client's retry timeout of failing, with Unavailable
// (never DeadlineExceeded, which a caller would take for its own).
func TestRetryTimeoutWithoutDeadline(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{})
	fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}})
	c, err := client.Dial(context.Background(), fc.MasterAddrs(), client.WithRetryTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tbl, err := c.Open(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	fc.MoveTablet("t", "r", -1)
	calls := []struct {
		name string
		call func() error
	}{
		{"put", func() error { return tbl.Put(context.Background(), "r", "cf", "q", nil) }},
		{"scan", func() error {
			return tbl.Scan(context.Background(), "", "", func(client.Row) bool { return true })
		}},
		{"bulk", func() error {
			m := client.NewMutation()
			m.Set("cf", "q", 1, nil)
			errs, err := tbl.ApplyBulk(context.Background(), []string{"r"}, []*client.Mutation{m})
			if err != nil {
				return err
			}
			return errs[0]
		}},
	}
	for _, tc := range calls {
		start := time.Now()
		err := tc.call()
		// Unavailable, not DeadlineExceeded: the caller set no deadline.
		if status.Code(err) != codes.Unavailable || time.Since(start) > 3*time.Second {
			t.Errorf("%s: %v after %v", tc.name, err, time.Since(start))
		}
	}
}

func TestMain(m *testing.M) { fastloop.Main(m, stopExampleCluster) }
