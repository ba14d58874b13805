package frontend

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/limits"
	"bighive/testkit/inproc"
)

// apiCluster is a real in-process cluster with a frontend in front of it
// on loopback, and the official Cloud Bigtable client dialed to it.
type apiCluster struct {
	c    *inproc.Cluster
	conn *grpc.ClientConn
	bt   *bigtable.Client
}

func startAPI(t *testing.T, spec client.TableSpec) *apiCluster {
	t.Helper()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if spec.Name != "" {
		if err := c.CreateTable(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	conn, bt := serveAPI(t, c.Client())
	return &apiCluster{c: c, conn: conn, bt: bt}
}

// serveAPI serves the API over cl on loopback, and returns a connection
// to it and the official client dialed on that connection.
func serveAPI(t *testing.T, cl *client.Client) (*grpc.ClientConn, *bigtable.Client) {
	t.Helper()
	return serveAPIWhole(t, cl, 0)
}

// listenAPI serves srv's Bigtable API on a loopback port until the test
// ends, and returns its address.
func listenAPI(t testing.TB, srv *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	srv.Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// serveAPIWhole is serveAPI with the server's whole-row bound set to
// whole (0: the default).
func serveAPIWhole(t *testing.T, cl *client.Client, whole int) (*grpc.ClientConn, *bigtable.Client) {
	t.Helper()
	addr := listenAPI(t, New(cl, nil).SetWholeRowBytes(whole))
	// The receive limit the official client sets on the connections it
	// dials itself (a row goes whole in one response).
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<28), grpc.MaxCallSendMsgSize(1<<28)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	bt, err := bigtable.NewClient(ctxT(t), "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	return conn, bt
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rowString renders a row of the official client as "key fam:qual@ts=value[labels] ...".
func rowString(r bigtable.Row) string {
	var parts []string
	fams := make([]string, 0, len(r))
	for f := range r {
		fams = append(fams, f)
	}
	slices.Sort(fams)
	for _, f := range fams {
		for _, it := range r[f] {
			s := fmt.Sprintf("%s@%d=%s", it.Column, it.Timestamp, it.Value)
			if len(it.Labels) > 0 {
				s += fmt.Sprint(it.Labels)
			}
			parts = append(parts, s)
		}
	}
	return r.Key() + " " + strings.Join(parts, " ")
}

func readAll(ctx context.Context, t *testing.T, tbl *bigtable.Table, rs bigtable.RowSet, opts ...bigtable.ReadOption) ([]string, error) {
	t.Helper()
	var out []string
	err := tbl.ReadRows(ctx, rs, func(r bigtable.Row) bool {
		out = append(out, rowString(r))
		return true
	}, opts...)
	return out, err
}

func keysOf(rows []string) string {
	ks := make([]string, len(rows))
	for i, r := range rows {
		ks[i], _, _ = strings.Cut(r, " ")
	}
	return strings.Join(ks, ",")
}

// TestDataOfficialClient drives every data method through the official
// Cloud Bigtable Go client against the frontend of a real cluster (split
// in two tablets, so reads cross a tablet boundary).
func TestDataOfficialClient(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", SplitKeys: []string{"r3"}, Families: []client.FamilySpec{{Name: "fa"}, {Name: "fb"}}})
	ctx := ctxT(t)
	tbl := a.bt.Open("t")

	// Apply and ApplyBulk; one bulk entry names a missing family.
	for i := 1; i <= 5; i++ {
		m := bigtable.NewMutation()
		m.Set("fa", "x", 1000, []byte(fmt.Sprint("ax", i)))
		m.Set("fa", "x", 2000, []byte(fmt.Sprint("ax", i, "new")))
		m.Set("fb", "y", 1000, []byte(fmt.Sprint("by", i)))
		if err := tbl.Apply(ctx, fmt.Sprint("r", i), m); err != nil {
			t.Fatalf("Apply r%d: %v", i, err)
		}
	}
	var rows []string
	var muts []*bigtable.Mutation
	for _, k := range []string{"s1", "s2", "s3"} {
		m := bigtable.NewMutation()
		fam := "fa"
		if k == "s2" {
			fam = "nofam"
		}
		m.Set(fam, "z", 5000, []byte("v"+k))
		rows, muts = append(rows, k), append(muts, m)
	}
	errs, err := tbl.ApplyBulk(ctx, rows, muts)
	if err != nil || len(errs) != 3 || errs[0] != nil || errs[2] != nil || status.Code(errs[1]) != codes.InvalidArgument && status.Code(errs[1]) != codes.NotFound {
		t.Fatalf("ApplyBulk = %v, %v; want only entry 1 (missing family) failed", errs, err)
	}

	r, err := tbl.ReadRow(ctx, "r2")
	if got, want := rowString(r), "r2 fa:x@2000=ax2new fa:x@1000=ax2 fb:y@1000=by2"; err != nil || got != want {
		t.Errorf("ReadRow r2 = %q, %v; want %q", got, err, want)
	}
	if r, err := tbl.ReadRow(ctx, "nope"); err != nil || r != nil {
		t.Errorf("ReadRow of a missing row = %v, %v; want nil, nil", r, err)
	}

	// Every RowSet kind.
	for _, tt := range []struct {
		name string
		rs   bigtable.RowSet
		want string
	}{
		{"RowList", bigtable.RowList{"r4", "r1", "nope", "s3"}, "r1,r4,s3"},
		{"SingleRow", bigtable.SingleRow("r3"), "r3"},
		{"NewRange", bigtable.NewRange("r2", "r4"), "r2,r3"},
		{"NewClosedRange", bigtable.NewClosedRange("r2", "r4"), "r2,r3,r4"},
		{"NewOpenRange", bigtable.NewOpenRange("r2", "r4"), "r3"},
		{"NewOpenClosedRange", bigtable.NewOpenClosedRange("r2", "r4"), "r3,r4"},
		{"NewClosedOpenRange", bigtable.NewClosedOpenRange("r2", "r4"), "r2,r3"},
		{"PrefixRange", bigtable.PrefixRange("s"), "s1,s3"},
		{"InfiniteRange", bigtable.InfiniteRange("r4"), "r4,r5,s1,s3"},
		{"InfiniteReverseRange", bigtable.InfiniteReverseRange("r2"), "r1,r2"},
		{"RowRangeList", bigtable.RowRangeList{bigtable.NewRange("s", "t"), bigtable.NewClosedRange("r1", "r2"), bigtable.NewRange("r1", "r1\x00")}, "r1,r2,s1,s3"},
		{"all", bigtable.RowRange{}, "r1,r2,r3,r4,r5,s1,s3"},
	} {
		got, err := readAll(ctx, t, tbl, tt.rs)
		if err != nil || keysOf(got) != tt.want {
			t.Errorf("ReadRows %s = %v, %v; want keys %s", tt.name, got, err, tt.want)
		}
	}

	// Filters, passed through to the tservers.
	for _, tt := range []struct {
		name string
		f    bigtable.Filter
		want string
	}{
		{"family", bigtable.FamilyFilter("fb"), "r1 fb:y@1000=by1|r2 fb:y@1000=by2"},
		{"latest+column", bigtable.ChainFilters(bigtable.ColumnFilter("x"), bigtable.LatestNFilter(1)), "r1 fa:x@2000=ax1new|r2 fa:x@2000=ax2new"},
		{"label", bigtable.ChainFilters(bigtable.FamilyFilter("fb"), bigtable.LabelFilter("hit")), "r1 fb:y@1000=by1[hit]|r2 fb:y@1000=by2[hit]"},
		{"strip", bigtable.ChainFilters(bigtable.FamilyFilter("fb"), bigtable.StripValueFilter()), "r1 fb:y@1000=|r2 fb:y@1000="},
		{"value", bigtable.ValueFilter("ax2.*"), "r2 fa:x@2000=ax2new fa:x@1000=ax2"},
		{"timestamp", bigtable.ChainFilters(bigtable.FamilyFilter("fa"), bigtable.TimestampRangeFilterMicros(2000, 0)), "r1 fa:x@2000=ax1new|r2 fa:x@2000=ax2new"},
		{"interleave", bigtable.InterleaveFilters(bigtable.FamilyFilter("fb"), bigtable.ValueFilter("ax1new")), "r1 fa:x@2000=ax1new fb:y@1000=by1|r2 fb:y@1000=by2"},
		{"condition", bigtable.ConditionFilter(bigtable.RowKeyFilter("r1"), bigtable.FamilyFilter("fb"), bigtable.BlockAllFilter()), "r1 fb:y@1000=by1"},
		{"cells-per-row", bigtable.CellsPerRowLimitFilter(1), "r1 fa:x@2000=ax1new|r2 fa:x@2000=ax2new"},
	} {
		got, err := readAll(ctx, t, tbl, bigtable.NewRange("r1", "r3"), bigtable.RowFilter(tt.f))
		if err != nil || strings.Join(got, "|") != tt.want {
			t.Errorf("ReadRows with filter %s = %q, %v; want %q", tt.name, strings.Join(got, "|"), err, tt.want)
		}
	}
	if _, err := readAll(ctx, t, tbl, bigtable.RowRange{}, bigtable.RowFilter(bigtable.ValueFilter("("))); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ReadRows with a bad regex = %v; want InvalidArgument", err)
	}

	// ReverseScan and LimitRows, alone and together.
	if got, err := readAll(ctx, t, tbl, bigtable.NewRange("r2", "s2"), bigtable.ReverseScan()); err != nil || keysOf(got) != "s1,r5,r4,r3,r2" {
		t.Errorf("ReverseScan = %v, %v", keysOf(got), err)
	}
	if got, err := readAll(ctx, t, tbl, bigtable.RowRange{}, bigtable.LimitRows(3)); err != nil || keysOf(got) != "r1,r2,r3" {
		t.Errorf("LimitRows(3) = %v, %v", keysOf(got), err)
	}
	if got, err := readAll(ctx, t, tbl, bigtable.RowRange{}, bigtable.LimitRows(2), bigtable.ReverseScan()); err != nil || keysOf(got) != "s3,s1" {
		t.Errorf("LimitRows(2) ReverseScan = %v, %v", keysOf(got), err)
	}

	// CheckAndMutate, both ways.
	for _, tt := range []struct {
		row   string
		match bool
	}{{"r1", true}, {"r9", false}} {
		mt, mf := bigtable.NewMutation(), bigtable.NewMutation()
		mt.Set("fb", "cond", 3000, []byte("true"))
		mf.Set("fb", "cond", 3000, []byte("false"))
		var matched bool
		cm := bigtable.NewCondMutation(bigtable.ColumnFilter("x"), mt, mf)
		if err := tbl.Apply(ctx, tt.row, cm, bigtable.GetCondMutationResult(&matched)); err != nil || matched != tt.match {
			t.Errorf("CheckAndMutate %s = matched %v, %v; want %v", tt.row, matched, err, tt.match)
		}
		r, err := tbl.ReadRow(ctx, tt.row, bigtable.RowFilter(bigtable.ColumnFilter("cond")))
		if want := fmt.Sprintf("%s fb:cond@3000=%v", tt.row, tt.match); err != nil || rowString(r) != want {
			t.Errorf("after CheckAndMutate: %q, %v; want %q", rowString(r), err, want)
		}
	}

	// ApplyReadModifyWrite: increments and an append; the result carries
	// the new cells.
	for i := int64(1); i <= 3; i++ {
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment("fa", "n", 5)
		rmw.AppendValue("fb", "s", []byte("ab"))
		r, err := tbl.ApplyReadModifyWrite(ctx, "counter", rmw)
		if err != nil {
			t.Fatal(err)
		}
		if len(r["fa"]) != 1 || len(r["fb"]) != 1 || int64(binary.BigEndian.Uint64(r["fa"][0].Value)) != 5*i || string(r["fb"][0].Value) != strings.Repeat("ab", int(i)) {
			t.Errorf("ApplyReadModifyWrite #%d = %v", i, r)
		}
	}

	// Deletes: a column's time range, a family, a row; a server-time Set.
	m := bigtable.NewMutation()
	m.DeleteTimestampRange("fa", "x", 1000, 2000)
	m.Set("fb", "now", bigtable.ServerTime, []byte("t"))
	if err := tbl.Apply(ctx, "r3", m); err != nil {
		t.Fatal(err)
	}
	r, err = tbl.ReadRow(ctx, "r3")
	if err != nil || len(r["fa"]) != 1 || r["fa"][0].Timestamp != 2000 || len(r["fb"]) != 2 {
		t.Errorf("after DeleteTimestampRange and a ServerTime set: %q, %v", rowString(r), err)
	}
	for _, it := range r["fb"] {
		if it.Column == "fb:now" && time.Since(it.Timestamp.Time()) > time.Hour {
			t.Errorf("ServerTime cell has timestamp %v, not the server's time", it.Timestamp.Time())
		}
	}
	m = bigtable.NewMutation()
	m.DeleteCellsInFamily("fb")
	if err := tbl.Apply(ctx, "r3", m); err != nil {
		t.Fatal(err)
	}
	m = bigtable.NewMutation()
	m.DeleteRow()
	if err := tbl.Apply(ctx, "r4", m); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(ctx, t, tbl, bigtable.NewRange("r3", "r5")); err != nil || strings.Join(got, "|") != "r3 fa:x@2000=ax3new" {
		t.Errorf("after DeleteCellsInFamily r3 and DeleteRow r4: %q, %v", got, err)
	}

	// SampleRowKeys: the tablet boundary is among the keys.
	keys, err := tbl.SampleRowKeys(ctx)
	if err != nil || !slices.Contains(keys, "r3") {
		t.Errorf("SampleRowKeys = %q, %v; want r3 among them", keys, err)
	}
}

// TestDataLargeRow: a row of more than 4 MiB of cells, between small rows,
// reads back whole through the official client dialed with the receive
// limit it sets for Cloud Bigtable, also in a reverse scan, from a server
// whose whole-row bound keeps every row whole (its reader refuses a row
// cut across responses; see TestReadRowsCutsLargeRows for the default).
func TestDataLargeRow(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	_, bt := serveAPIWhole(t, c.Client(), limits.MaxRequestBytes)
	tbl := bt.Open("t")
	val := func(i, n int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, n) }
	sizes := []int{1 << 20, 1<<20 + 7, 3<<20 + 5, 512 << 10, 10, 0}
	for i, n := range sizes {
		m := bigtable.NewMutation()
		m.Set("f", fmt.Sprintf("q%d", i), 1000, val(i, n))
		if err := tbl.Apply(ctx, "big", m); err != nil {
			t.Fatalf("Apply cell %d (%d bytes): %v", i, n, err)
		}
	}
	for _, k := range []string{"a", "z"} {
		m := bigtable.NewMutation()
		m.Set("f", "q", 1000, []byte(k))
		if err := tbl.Apply(ctx, k, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, opts := range [][]bigtable.ReadOption{nil, {bigtable.ReverseScan()}} {
		var got []bigtable.Row
		if err := tbl.ReadRows(ctx, bigtable.RowRange{}, func(r bigtable.Row) bool { got = append(got, r); return true }, opts...); err != nil {
			t.Fatalf("ReadRows %v: %v", opts, err)
		}
		if len(got) != 3 {
			t.Fatalf("ReadRows %v: %d rows, want 3", opts, len(got))
		}
		big := got[1]
		if big.Key() != "big" || len(big["f"]) != len(sizes) {
			t.Fatalf("ReadRows %v: row %q with %d cells", opts, big.Key(), len(big["f"]))
		}
		for i, it := range big["f"] {
			if it.Column != fmt.Sprintf("f:q%d", i) || !bytes.Equal(it.Value, val(i, sizes[i])) {
				t.Errorf("ReadRows %v: cell %d is %s with %d bytes, want f:q%d with %d", opts, i, it.Column, len(it.Value), i, sizes[i])
			}
		}
	}
}

// TestDataErrors: the codes Bigtable clients act on.
func TestDataErrors(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}})
	ctx := ctxT(t)

	missing := a.bt.Open("nosuch")
	if _, err := missing.ReadRow(ctx, "r"); status.Code(err) != codes.NotFound {
		t.Errorf("ReadRow of an unknown table = %v; want NotFound", err)
	}
	m := bigtable.NewMutation()
	m.Set("f", "q", 1000, []byte("v"))
	if err := missing.Apply(ctx, "r", m); status.Code(err) != codes.NotFound {
		t.Errorf("Apply to an unknown table = %v; want NotFound", err)
	}

	raw := btpb.NewBigtableClient(a.conn)
	for _, name := range []string{"t", "projects/p/instances/i/t", "projects//instances/i/tables/t", "projects/p/instances/i/tables/"} {
		_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_DeleteFromRow_{DeleteFromRow: &btpb.Mutation_DeleteFromRow{}}}}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed table name") {
			t.Errorf("MutateRow on %q = %v; want InvalidArgument naming the malformed name", name, err)
		}
	}
	const tn = "projects/p/instances/i/tables/t"
	_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{}}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "AddToCell") || !strings.Contains(err.Error(), "raw_value") {
		t.Errorf("AddToCell without a qualifier = %v; want InvalidArgument naming it and the raw_value it needs", err)
	}
	_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("an empty Mutation = %v; want InvalidArgument", err)
	}
	_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{AuthorizedViewName: tn + "/authorizedViews/v", RowKey: []byte("r")})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "authorized views") {
		t.Errorf("MutateRow on an authorized view = %v; want Unimplemented", err)
	}
	_, err = raw.CheckAndMutateRow(ctx, &btpb.CheckAndMutateRowRequest{TableName: tn, RowKey: []byte("r")})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("CheckAndMutateRow with no mutations = %v; want InvalidArgument", err)
	}
	st, err := raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: tn, RowsLimit: -1})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("ReadRows with a negative limit = %v; want InvalidArgument", err)
	}

	if _, err := raw.PingAndWarm(ctx, &btpb.PingAndWarmRequest{Name: "projects/p/instances/i"}); err != nil {
		t.Errorf("PingAndWarm = %v", err)
	}
	if _, err := raw.PingAndWarm(ctx, &btpb.PingAndWarmRequest{Name: "projects/p"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PingAndWarm of a malformed name = %v; want InvalidArgument", err)
	}

	// The newer methods answer Unimplemented, naming the method.
	_, err = raw.PrepareQuery(ctx, &btpb.PrepareQueryRequest{InstanceName: "projects/p/instances/i"})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "PrepareQuery") {
		t.Errorf("PrepareQuery = %v; want Unimplemented naming it", err)
	}
	for name, open := range map[string]func() (interface{ RecvMsg(any) error }, error){
		"ExecuteQuery": func() (interface{ RecvMsg(any) error }, error) {
			return raw.ExecuteQuery(ctx, &btpb.ExecuteQueryRequest{InstanceName: "projects/p/instances/i"})
		},
		"ReadChangeStream": func() (interface{ RecvMsg(any) error }, error) {
			return raw.ReadChangeStream(ctx, &btpb.ReadChangeStreamRequest{TableName: tn})
		},
		"GenerateInitialChangeStreamPartitions": func() (interface{ RecvMsg(any) error }, error) {
			return raw.GenerateInitialChangeStreamPartitions(ctx, &btpb.GenerateInitialChangeStreamPartitionsRequest{TableName: tn})
		},
	} {
		s, err := open()
		if err == nil {
			err = s.RecvMsg(new(btpb.ReadRowsResponse))
		}
		if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), name) {
			t.Errorf("%s = %v; want Unimplemented naming it", name, err)
		}
	}
}
