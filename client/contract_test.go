package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/inproc"
	"bighive/testkit/race"
	"bighive/testkit/wait"
)

// The contract: what the client relies on from a cluster, run against both
// implementations the client's tests use — the real servers (an
// in-process master and tservers, testkit/inproc) and the in-memory
// fake (client/clienttest), so that the fake, which the fault-injection
// tests need, cannot drift from the real thing. Every semantic test of the
// client lives here; the tests in client_test.go use the fake only for
// faults the real servers cannot be made to produce on cue.

// env is one cluster the contract runs against, shared by its subtests
// (each uses its own tables).
type env interface {
	masters() []string
	tserverAddrs() []string
	// waitServing waits until every tablet of table is served.
	waitServing(ctx context.Context, table string) error
	// restartAll restarts every tserver on its address; the data stays.
	restartAll(ctx context.Context) error
}

func TestContract(t *testing.T) {
	t.Parallel()
	targets := []struct {
		name  string
		start func(t *testing.T) env
	}{
		{"fake", startFake},
		{"real", startReal},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { contract(t, tg.start(t)) })
	}
}

type realEnv struct{ c *inproc.Cluster }

func startReal(t *testing.T) env {
	return realEnv{inproc.Start(t, inproc.Options{TServers: 3})}
}

func (e realEnv) masters() []string { return e.c.MasterAddrs() }
func (e realEnv) tserverAddrs() []string {
	var out []string
	for i := range e.c.TServers() {
		out = append(out, e.c.TServerAddr(i))
	}
	return out
}
func (e realEnv) waitServing(ctx context.Context, table string) error {
	return e.c.WaitServing(ctx, table)
}
func (e realEnv) restartAll(ctx context.Context) error {
	for i := range e.c.TServers() {
		if err := e.c.RestartTServer(i); err != nil {
			return err
		}
	}
	return nil
}

type fakeEnv struct{ c *clienttest.Cluster }

func startFake(t *testing.T) env {
	return fakeEnv{clienttest.Start(t, clienttest.Options{TServers: 3})}
}

func (e fakeEnv) masters() []string { return e.c.MasterAddrs() }
func (e fakeEnv) tserverAddrs() []string {
	var out []string
	for i := range 3 {
		out = append(out, e.c.TServerAddr(i))
	}
	return out
}
func (e fakeEnv) waitServing(context.Context, string) error { return nil }
func (e fakeEnv) restartAll(context.Context) error {
	for i := range 3 {
		e.c.StopTServer(i)
		if err := e.c.RestartTServer(i); err != nil {
			return err
		}
	}
	return nil
}

// contract runs every case against e.
func contract(t *testing.T, e env) {
	c, err := client.Dial(context.Background(), e.masters(),
		client.WithBackoff(time.Millisecond, 50*time.Millisecond), client.WithAttemptTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cases := []struct {
		name string
		run  func(t *testing.T, e env, c *client.Client)
	}{
		{"put get scan across tablets", contractPutGetScan},
		{"versions and read filters", contractReadFilters},
		{"deletes hide only earlier writes", contractDeletes},
		{"server timestamps", contractServerTime},
		{"timestamp granularity", contractGranularity},
		{"scan filters and limits", contractScanFilters},
		{"row sets and reverse scans", contractRowSets},
		{"bulk writes", contractBulk},
		{"bad input refused by the client", contractClientBadInput},
		{"bad input refused by the servers", contractServerBadInput},
		{"errors of the servers", contractServerErrors},
		{"DDL and admin", contractDDL},
		{"closed client", contractClosedClient},
		{"conditional mutations", contractCondMutation},
		{"sample row keys", contractSampleRowKeys},
		{"ping", contractPing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e, c) })
	}
}

// createTable creates table name (families cf and meta, meta keeping 2
// versions) split at splits, waits until it serves and opens it.
func createTable(t *testing.T, e env, c *client.Client, name string, splits ...string) *client.Table {
	t.Helper()
	ctx := ctxT(t)
	spec := client.TableSpec{Name: name, Families: []client.FamilySpec{{Name: "cf"}, {Name: "meta", MaxVersions: 2}}, SplitKeys: splits}
	if err := c.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.waitServing(ctx, name); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// cellString prints a row's cells as "family:qualifier@ts=value ...".
func cellString(r client.Row) string {
	var parts []string
	for _, c := range r.Cells {
		parts = append(parts, fmt.Sprintf("%s:%s@%d=%s", c.Family, c.Qualifier, c.Timestamp, c.Value))
	}
	return strings.Join(parts, " ")
}

func contractPutGetScan(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "scan", "row010", "row020", "row030")
	ctx := ctxT(t)
	for i := 0; i < 40; i++ {
		if err := tbl.Put(ctx, rowKey(i), "cf", "q", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	r, err := tbl.Get(ctx, rowKey(25))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Value("cf", "q"); !ok || string(v) != "25" || r.Key != rowKey(25) {
		t.Fatalf("get: %+v", r)
	}
	missing, err := tbl.Get(ctx, "nope")
	if err != nil || len(missing.Cells) != 0 || missing.Key != "nope" {
		t.Fatalf("missing row: %+v, %v", missing, err)
	}
	tests := []struct {
		name       string
		start, end string
		opts       []client.ReadOption
		want       int
		first      string
		last       string
	}{
		{"full", "", "", nil, 40, rowKey(0), rowKey(39)},
		{"range over three tablets", "row005", "row031", nil, 26, "row005", "row030"},
		{"limit", "row015", "", []client.ReadOption{client.LimitRows(12)}, 12, "row015", "row026"},
		{"limit over the end", "row035", "", []client.ReadOption{client.LimitRows(12)}, 5, "row035", "row039"},
		{"end at a tablet boundary", "", "row020", nil, 20, rowKey(0), "row019"},
		{"start between rows", "row0095", "row011", nil, 1, "row010", "row010"},
		{"empty range", "row9", "row1", nil, 0, "", ""},
	}
	for _, tc := range tests {
		keys := scanAll(t, tbl, tc.start, tc.end, tc.opts...)
		if len(keys) != tc.want || tc.want > 0 && (keys[0] != tc.first || keys[len(keys)-1] != tc.last) {
			t.Errorf("%s scan [%q, %q): %d rows %v, want %d from %s to %s", tc.name, tc.start, tc.end, len(keys), keys, tc.want, tc.first, tc.last)
		}
	}
	// fn returning false stops the scan.
	n := 0
	if err := tbl.Scan(ctx, "", "", func(client.Row) bool { n++; return n < 15 }); err != nil || n != 15 {
		t.Fatalf("stopped scan: %d rows, %v", n, err)
	}
}

func contractReadFilters(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "filters")
	ctx := ctxT(t)
	m := client.NewMutation()
	for ts := int64(1); ts <= 4; ts++ {
		m.Set("cf", "a", ts*10, []byte(fmt.Sprint("a", ts)))
		m.Set("meta", "x", ts*10, []byte(fmt.Sprint("x", ts)))
	}
	m.Set("cf", "b", 5, []byte("b"))
	if err := tbl.Apply(ctx, "r", m); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts []client.ReadOption
		want string
	}{
		{"all (meta keeps 2 versions)", nil, "cf:a@40=a4 cf:a@30=a3 cf:a@20=a2 cf:a@10=a1 cf:b@5=b meta:x@40=x4 meta:x@30=x3"},
		{"family", []client.ReadOption{client.Families("meta")}, "meta:x@40=x4 meta:x@30=x3"},
		{"two families", []client.ReadOption{client.Families("meta", "cf"), client.LatestN(1)}, "cf:a@40=a4 cf:b@5=b meta:x@40=x4"},
		{"column", []client.ReadOption{client.Column("cf", "b")}, "cf:b@5=b"},
		{"column and family add up", []client.ReadOption{client.Column("cf", "b"), client.Families("meta")}, "cf:b@5=b meta:x@40=x4 meta:x@30=x3"},
		{"latest 1", []client.ReadOption{client.Families("cf"), client.LatestN(1)}, "cf:a@40=a4 cf:b@5=b"},
		{"latest 3", []client.ReadOption{client.Column("cf", "a"), client.LatestN(3)}, "cf:a@40=a4 cf:a@30=a3 cf:a@20=a2"},
		{"latest 3 of a family keeping 2", []client.ReadOption{client.Families("meta"), client.LatestN(3)}, "meta:x@40=x4 meta:x@30=x3"},
		{"time range", []client.ReadOption{client.Column("cf", "a"), client.TimeRange(15, 35)}, "cf:a@30=a3 cf:a@20=a2"},
		{"time range is half open", []client.ReadOption{client.Column("cf", "a"), client.TimeRange(10, 40)}, "cf:a@30=a3 cf:a@20=a2 cf:a@10=a1"},
		{"time range and latest", []client.ReadOption{client.Column("cf", "a"), client.TimeRange(0, 35), client.LatestN(1)}, "cf:a@30=a3"},
		{"time range matching nothing", []client.ReadOption{client.TimeRange(41, 50)}, ""},
		{"unknown column", []client.ReadOption{client.Column("cf", "zz")}, ""},
	}
	for _, tc := range tests {
		r, err := tbl.Get(ctx, "r", tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := cellString(r); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	steps := []struct {
		name string
		mut  func(m *client.Mutation)
		want string
	}{
		{"time range and family delete", func(m *client.Mutation) {
			m.DeleteTimestampRange("cf", "a", 0, 25)
			m.DeleteCellsInFamily("meta")
		}, "cf:a@40=a4 cf:a@30=a3 cf:b@5=b"},
		{"column delete", func(m *client.Mutation) { m.DeleteCellsInColumn("cf", "a") }, "cf:b@5=b"},
		{"row delete", func(m *client.Mutation) { m.DeleteRow() }, ""},
	}
	for _, s := range steps {
		m := client.NewMutation()
		s.mut(m)
		if err := tbl.Apply(ctx, "r", m); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		r, err := tbl.Get(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if got := cellString(r); got != s.want {
			t.Errorf("after %s: %s, want %s", s.name, got, s.want)
		}
	}
}

// contractDeletes: a delete removes the cells written before it, whatever
// their timestamps; a later write is never hidden by it, even at an older
// or equal timestamp (Bigtable's semantics, not HBase's). The outcome must
// hold as written, after a checkpoint (cells and deletes in TSFiles), after
// minor and major compactions, and after every tserver restarted.
func contractDeletes(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "deletes", "m")
	ctx := ctxT(t)
	set := func(fam, q string, ts int64, v string) func(*client.Mutation) {
		return func(m *client.Mutation) { m.Set(fam, q, ts, []byte(v)) }
	}
	delCol := func(fam, q string) func(*client.Mutation) {
		return func(m *client.Mutation) { m.DeleteCellsInColumn(fam, q) }
	}
	delRange := func(fam, q string, start, end int64) func(*client.Mutation) {
		return func(m *client.Mutation) { m.DeleteTimestampRange(fam, q, start, end) }
	}
	delFam := func(fam string) func(*client.Mutation) {
		return func(m *client.Mutation) { m.DeleteCellsInFamily(fam) }
	}
	delRow := func(m *client.Mutation) { m.DeleteRow() }
	both := func(ops ...func(*client.Mutation)) func(*client.Mutation) {
		return func(m *client.Mutation) {
			for _, op := range ops {
				op(m)
			}
		}
	}
	// Each case writes its own row; every element of applies is one Apply.
	cases := []struct {
		row     string
		applies []func(*client.Mutation)
		want    string
	}{
		{"a-col-older", []func(*client.Mutation){set("cf", "a", 100, "v1"), delCol("cf", "a"), set("cf", "a", 50, "v2")}, "cf:a@50=v2"},
		{"a-col-equal", []func(*client.Mutation){set("cf", "a", 100, "v1"), delCol("cf", "a"), set("cf", "a", 100, "v2")}, "cf:a@100=v2"},
		{"a-col-newer", []func(*client.Mutation){set("cf", "a", 100, "v1"), delCol("cf", "a"), set("cf", "a", 200, "v2")}, "cf:a@200=v2"},
		{"a-col-of-nothing", []func(*client.Mutation){delCol("cf", "a"), set("cf", "a", 1, "v")}, "cf:a@1=v"},
		{"a-col-leaves-others", []func(*client.Mutation){set("cf", "a", 1, "a"), set("cf", "b", 1, "b"), delCol("cf", "a")}, "cf:b@1=b"},
		{"b-range-then-put-inside", []func(*client.Mutation){
			set("cf", "a", 100, "v1"), set("cf", "a", 300, "v3"), delRange("cf", "a", 50, 150), set("cf", "a", 120, "v2")},
			"cf:a@300=v3 cf:a@120=v2"},
		{"b-range-unbounded-end", []func(*client.Mutation){
			set("cf", "a", 10, "v1"), set("cf", "a", 300, "v3"), delRange("cf", "a", 20, 0), set("cf", "a", 400, "v4")},
			"cf:a@400=v4 cf:a@10=v1"},
		{"c-family-then-older", []func(*client.Mutation){
			set("cf", "a", 100, "v1"), set("cf", "b", 100, "v1"), set("meta", "x", 100, "m"), delFam("cf"), set("cf", "b", 10, "v2")},
			"cf:b@10=v2 meta:x@100=m"},
		{"d-row-then-older", []func(*client.Mutation){
			set("cf", "a", 100, "v1"), set("meta", "x", 100, "m1"), delRow, set("meta", "x", 5, "m2")},
			"meta:x@5=m2"},
		{"d-row-twice", []func(*client.Mutation){set("cf", "a", 1, "v1"), delRow, set("cf", "a", 1, "v2"), delRow}, ""},
		{"e-overwrite", []func(*client.Mutation){set("cf", "a", 100, "v1"), set("cf", "a", 100, "v2")}, "cf:a@100=v2"},
		// Within one mutation the operations apply in order.
		{"f-delete-then-set-in-one", []func(*client.Mutation){
			set("cf", "a", 100, "v1"), both(delCol("cf", "a"), set("cf", "a", 50, "v2"))}, "cf:a@50=v2"},
		{"f-set-then-delete-in-one", []func(*client.Mutation){both(set("cf", "a", 100, "v1"), delCol("cf", "a"))}, ""},
		{"f-row-delete-then-set-in-one", []func(*client.Mutation){
			set("cf", "a", 100, "v1"), both(delRow, set("cf", "b", 1, "v2"))}, "cf:b@1=v2"},
		// Max versions: the newest 2 of meta, also when older ones were
		// written after newer ones.
		{"g-max-versions", []func(*client.Mutation){
			set("meta", "x", 30, "c"), set("meta", "x", 10, "a"), set("meta", "x", 20, "b"), set("meta", "x", 40, "d")},
			"meta:x@40=d meta:x@30=c"},
		{"g-max-versions-after-delete", []func(*client.Mutation){
			set("meta", "x", 30, "c"), set("meta", "x", 40, "d"), delCol("meta", "x"), set("meta", "x", 10, "a"), set("meta", "x", 20, "b")},
			"meta:x@20=b meta:x@10=a"},
		// The same rows past the split point, so two tablets hold cases.
		{"x-col-older", []func(*client.Mutation){set("cf", "a", 100, "v1"), delCol("cf", "a"), set("cf", "a", 50, "v2")}, "cf:a@50=v2"},
		{"x-row-then-older", []func(*client.Mutation){set("cf", "a", 100, "v1"), delRow, set("cf", "a", 5, "v2")}, "cf:a@5=v2"},
	}
	for _, tc := range cases {
		for i, op := range tc.applies {
			m := client.NewMutation()
			op(m)
			if err := tbl.Apply(ctx, tc.row, m); err != nil {
				t.Fatalf("%s: apply %d: %v", tc.row, i, err)
			}
		}
	}
	check := func(stage string) {
		t.Helper()
		defer func() {
			if t.Failed() {
				t.FailNow() // the later stages would repeat the same differences
			}
		}()
		for _, tc := range cases {
			r, err := tbl.Get(ctx, tc.row)
			if err != nil {
				t.Fatalf("%s: get %s: %v", stage, tc.row, err)
			}
			if got := cellString(r); got != tc.want {
				t.Errorf("%s: row %s:\n got %s\nwant %s", stage, tc.row, got, tc.want)
			}
		}
		got := map[string]string{}
		if err := tbl.Scan(ctx, "", "", func(r client.Row) bool { got[r.Key] = cellString(r); return true }); err != nil {
			t.Fatalf("%s: scan: %v", stage, err)
		}
		for _, tc := range cases {
			if got[tc.row] != tc.want {
				t.Errorf("%s: scan: row %s:\n got %s\nwant %s", stage, tc.row, got[tc.row], tc.want)
			}
		}
	}
	check("as written")
	if _, err := c.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	compact(t, e, false)
	check("after a minor compaction")
	compact(t, e, true)
	check("after a major compaction")
	if err := e.restartAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.waitServing(ctx, "deletes"); err != nil {
		t.Fatal(err)
	}
	check("after a restart")
}

// compact compacts every tablet of every tserver of e.
func compact(t *testing.T, e env, major bool) {
	t.Helper()
	for _, addr := range e.tserverAddrs() {
		if _, err := rawTServer(t, addr).Compact(ctxT(t), &pb.CompactRequest{Major: major}); err != nil {
			t.Fatalf("compact %s (major %v): %v", addr, major, err)
		}
	}
}

// rawTServer is a bare gRPC client of the tserver at addr, for requests
// the client library would refuse to send.
func rawTServer(t *testing.T, addr string) pb.TServerClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), limits.GRPCCallOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewTServerClient(cc)
}

func contractServerTime(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "servertime")
	ctx := ctxT(t)
	before := time.Now().UnixMicro()
	for _, v := range []string{"first", "second", "third"} {
		m := client.NewMutation()
		m.Set("cf", "q", client.ServerTime, []byte(v))
		if err := tbl.Apply(ctx, "r", m); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now().UnixMicro()
	r, err := tbl.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cells) != 3 || string(r.Cells[0].Value) != "third" || string(r.Cells[2].Value) != "first" {
		t.Fatalf("cells: %s", cellString(r))
	}
	for i, cell := range r.Cells {
		if i > 0 && cell.Timestamp >= r.Cells[i-1].Timestamp {
			t.Errorf("timestamps not strictly decreasing: %s", cellString(r))
		}
		// The server's clock, near the test's (a minute of slack).
		if cell.Timestamp < before-60e6 || cell.Timestamp > after+60e6 {
			t.Errorf("cell %d: timestamp %d not near [%d, %d]", i, cell.Timestamp, before, after)
		}
	}
	// Put uses the client's clock.
	if err := tbl.Put(ctx, "p", "cf", "q", []byte("v")); err != nil {
		t.Fatal(err)
	}
	r, _ = tbl.Get(ctx, "p")
	if len(r.Cells) != 1 || r.Cells[0].Timestamp < before || r.Cells[0].Timestamp > time.Now().UnixMicro() {
		t.Errorf("put: %s (not in [%d, now])", cellString(r), before)
	}
}

// contractGranularity: a table of millisecond granularity truncates server
// timestamps and Put's clock to whole milliseconds and refuses a client
// timestamp that is not one; a table created without a granularity is µs.
func contractGranularity(t *testing.T, e env, c *client.Client) {
	ctx := ctxT(t)
	for _, g := range []client.TimestampGranularity{client.GranularityMicros, client.GranularityMillis} {
		name := "granularity-" + g.String()
		spec := client.TableSpec{Name: name, Families: []client.FamilySpec{{Name: "cf"}}, Granularity: g}
		if err := c.CreateTable(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := e.waitServing(ctx, name); err != nil {
			t.Fatal(err)
		}
		infos, err := c.DescribeTables(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			if info.Name == name && info.Granularity != g {
				t.Errorf("%s: DescribeTables says %v", name, info.Granularity)
			}
		}
		tbl, err := c.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			m := client.NewMutation()
			m.Set("cf", "q", client.ServerTime, []byte{byte(i)})
			if err := tbl.Apply(ctx, "r", m); err != nil {
				t.Fatal(err)
			}
		}
		// One mutation's server timestamps are one millisecond's.
		m := client.NewMutation()
		for i := 0; i < 20; i++ {
			m.Set("cf", "q", client.ServerTime, []byte{byte(i)})
		}
		if err := tbl.Apply(ctx, "one", m); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Put(ctx, "p", "cf", "q", []byte("v")); err != nil {
			t.Fatal(err)
		}
		m = client.NewMutation()
		m.Set("cf", "q", 1500, []byte("µs"))
		err = tbl.Apply(ctx, "c", m)
		r, _ := tbl.Get(ctx, "r")
		p, _ := tbl.Get(ctx, "p")
		one, _ := tbl.Get(ctx, "one")
		switch g {
		case client.GranularityMillis:
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "1500") || !strings.Contains(err.Error(), "millisecond granularity") {
				t.Errorf("%s: timestamp 1500: %v, want InvalidArgument naming it and the granularity", name, err)
			}
			// As many versions as distinct milliseconds (each write
			// syncs the log, so there may be 20 on a slow disk).
			if len(r.Cells) == 0 || r.Cells[0].Value[0] != 19 {
				t.Errorf("%s: 20 writes left %s", name, cellString(r))
			}
			if len(one.Cells) != 1 || one.Cells[0].Value[0] != 19 {
				t.Errorf("%s: 20 sets of one mutation left %s, want the last one", name, cellString(one))
			}
			for _, cell := range append(r.Cells, p.Cells...) {
				if cell.Timestamp%1000 != 0 {
					t.Errorf("%s: timestamp %d is not a whole millisecond", name, cell.Timestamp)
				}
			}
		default:
			if err != nil {
				t.Errorf("%s: timestamp 1500: %v", name, err)
			}
			if len(r.Cells) != 20 || len(one.Cells) != 20 {
				t.Errorf("%s: 20 writes left %d versions, 20 sets of one mutation %d", name, len(r.Cells), len(one.Cells))
			}
		}
	}
	err := c.CreateTable(ctx, client.TableSpec{Name: "granularity-bad", Granularity: 7})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("granularity 7: %v, want InvalidArgument", err)
	}
}

func contractScanFilters(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "scanfilters", "row010")
	ctx := ctxT(t)
	// Even rows have a cf cell at 10; every row has meta cells at 10 and 20.
	var rows []string
	var ms []*client.Mutation
	for i := 0; i < 20; i++ {
		m := client.NewMutation()
		if i%2 == 0 {
			m.Set("cf", "a", 10, []byte("a"))
		}
		m.Set("meta", "x", 10, []byte("old"))
		m.Set("meta", "x", 20, []byte("new"))
		rows, ms = append(rows, rowKey(i)), append(ms, m)
	}
	if errs, err := tbl.ApplyBulk(ctx, rows, ms); errs != nil || err != nil {
		t.Fatal(errs, err)
	}
	tests := []struct {
		name  string
		opts  []client.ReadOption
		rows  int
		first string
		cells string // of the first row
	}{
		{"family skips rows without it", []client.ReadOption{client.Families("cf")}, 10, rowKey(0), "cf:a@10=a"},
		{"family and limit count emitted rows", []client.ReadOption{client.Families("cf"), client.LimitRows(7)}, 7, rowKey(0), "cf:a@10=a"},
		{"latest 1", []client.ReadOption{client.Families("meta"), client.LatestN(1)}, 20, rowKey(0), "meta:x@20=new"},
		{"time range", []client.ReadOption{client.TimeRange(0, 15)}, 20, rowKey(0), "cf:a@10=a meta:x@10=old"},
		{"time range without matches", []client.ReadOption{client.TimeRange(30, 40)}, 0, "", ""},
		{"column", []client.ReadOption{client.Column("cf", "a"), client.LimitRows(100)}, 10, rowKey(0), "cf:a@10=a"},
	}
	for _, tc := range tests {
		var got []client.Row
		if err := tbl.Scan(ctx, "", "", func(r client.Row) bool { got = append(got, r); return true }, tc.opts...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != tc.rows || tc.rows > 0 && (got[0].Key != tc.first || cellString(got[0]) != tc.cells) {
			first := client.Row{}
			if len(got) > 0 {
				first = got[0]
			}
			t.Errorf("%s: %d rows, first %s %s; want %d, %s %s", tc.name, len(got), first.Key, cellString(first), tc.rows, tc.first, tc.cells)
		}
	}
}

func contractBulk(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "bulk", "row010", "row020")
	ctx := ctxT(t)
	var rows []string
	var ms []*client.Mutation
	for i := 0; i < 30; i++ {
		// Every row has a meta cell; the bulk write deletes it from every
		// third row.
		m := client.NewMutation()
		m.Set("meta", "x", 1, []byte("m"))
		if err := tbl.Apply(ctx, rowKey(i), m); err != nil {
			t.Fatal(err)
		}
		m = client.NewMutation()
		m.Set("cf", "q", 7, []byte(fmt.Sprint(i)))
		if i%3 == 0 {
			m.DeleteCellsInFamily("meta")
		}
		rows, ms = append(rows, rowKey(i)), append(ms, m)
	}
	bad := client.NewMutation()
	bad.Set("nofamily", "q", 7, nil)
	rows, ms = append(rows, "row999", ""), append(ms, bad, ms[0])
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
	if status.Code(errs[30]) != codes.InvalidArgument || !strings.Contains(errs[30].Error(), `"nofamily"`) || status.Code(errs[31]) != codes.InvalidArgument {
		t.Errorf("bad rows: %v / %v", errs[30], errs[31])
	}
	n := 0
	err = tbl.Scan(ctx, "", "", func(r client.Row) bool {
		i := n
		want := fmt.Sprintf("cf:q@7=%d", i)
		if i%3 != 0 {
			want += " meta:x@1=m"
		}
		if r.Key != rowKey(i) || cellString(r) != want {
			t.Errorf("row %s: %s, want %s %s", r.Key, cellString(r), rowKey(i), want)
		}
		n++
		return true
	})
	if err != nil || n != 30 {
		t.Errorf("%d rows applied: %v", n, err)
	}
	if _, err := tbl.ApplyBulk(ctx, rows[:2], ms[:1]); status.Code(err) != codes.InvalidArgument {
		t.Errorf("length mismatch: %v", err)
	}
	if errs, err := tbl.ApplyBulk(ctx, rows[:5], ms[:5]); errs != nil || err != nil {
		t.Errorf("all good: %v %v", errs, err)
	}
	if errs, err := tbl.ApplyBulk(ctx, nil, nil); errs != nil || err != nil {
		t.Errorf("empty: %v %v", errs, err)
	}
}

// contractClientBadInput: bad input fails on the client with
// InvalidArgument and a clear message (TestBadInputStaysLocal checks,
// against the fake, that none of it is sent).
func contractClientBadInput(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "badinput")
	ctx := ctxT(t)
	for _, tc := range badInputCases(ctx, c, tbl) {
		err := tc.call()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument containing %q", tc.name, err, tc.want)
		}
	}
}

type badInputCase struct {
	name string
	call func() error
	want string
}

func badInputCases(ctx context.Context, c *client.Client, tbl *client.Table) []badInputCase {
	return []badInputCase{
		{"empty row", func() error { return tbl.Put(ctx, "", "cf", "q", nil) }, "row key is empty"},
		{"long row", func() error { return tbl.Put(ctx, strings.Repeat("k", 5000), "cf", "q", nil) }, "row key is 5000 bytes"},
		{"big value", func() error { return tbl.Put(ctx, "r", "cf", "q", make([]byte, limits.MaxValueBytes+1)) }, "value is"},
		{"big row", func() error {
			// Three values of one buffer: 300 MiB counted, 100 MiB held.
			v, m := make([]byte, limits.MaxValueBytes), client.NewMutation()
			for _, q := range []string{"a", "b", "c"} {
				m.Set("cf", q, 1, v)
			}
			return tbl.Apply(ctx, "r", m)
		}, `row mutation of row "r" is`},
		{"long qualifier", func() error { return tbl.Put(ctx, "r", "cf", strings.Repeat("q", 17<<10), nil) }, "qualifier is"},
		{"bad family", func() error { return tbl.Put(ctx, "r", "c f", "q", nil) }, "column family name"},
		{"empty mutation", func() error { return tbl.Apply(ctx, "r", client.NewMutation()) }, "no operations"},
		{"nil mutation", func() error { return tbl.Apply(ctx, "r", nil) }, "mutation is nil"},
		{"negative timestamp", func() error {
			m := client.NewMutation()
			m.Set("cf", "q", -5, nil)
			return tbl.Apply(ctx, "r", m)
		}, "negative"},
		{"empty delete range", func() error {
			m := client.NewMutation()
			m.DeleteTimestampRange("cf", "q", 5, 5)
			return tbl.Apply(ctx, "r", m)
		}, "timestamp range"},
		{"get empty row", func() error { _, err := tbl.Get(ctx, ""); return err }, "row key is empty"},
		{"bad latest", func() error { _, err := tbl.Get(ctx, "r", client.LatestN(0)); return err }, "LatestN"},
		{"bad time range", func() error { _, err := tbl.Get(ctx, "r", client.TimeRange(5, 2)); return err }, "timestamp range"},
		{"bad table", func() error { _, err := c.Open(ctx, "a/b"); return err }, "table name"},
		{"split empty row", func() error { return c.SplitTablet(ctx, "badinput", "") }, "row key is empty"},
		{"empty row list", func() error { return tbl.ReadRows(ctx, client.RowList{}, func(client.Row) bool { return true }) }, "empty row set"},
		{"empty range list", func() error { return tbl.ReadRows(ctx, client.RowRangeList{}, func(client.Row) bool { return true }) }, "empty row set"},
		{"inverted range beside others", func() error {
			return tbl.ReadRows(ctx, client.RowRangeList{client.NewRange("a", "b"), client.NewRange("d", "c")}, func(client.Row) bool { return true })
		}, "start is after end"},
		{"empty key in row list", func() error {
			return tbl.ReadRows(ctx, client.RowList{"a", ""}, func(client.Row) bool { return true })
		}, "row key is empty"},
	}
}

// contractServerBadInput sends what the client library refuses straight to
// a tserver: the servers check it too, with the same codes.
func contractServerBadInput(t *testing.T, e env, c *client.Client) {
	createTable(t, e, c, "rawinput", "m")
	ctx := ctxT(t)
	tablets, err := c.Tablets(ctx, "rawinput")
	if err != nil || len(tablets) != 2 {
		t.Fatal(tablets, err)
	}
	first := tablets[0] // ["", "m")
	ts := rawTServer(t, first.TServer)
	set := func(fam string, ts int64, v []byte) *pb.Mutation {
		return &pb.Mutation{Mutation: &pb.Mutation_SetCell_{SetCell: &pb.Mutation_SetCell{Family: fam, Qualifier: []byte("q"), TimestampMicros: ts, Value: v}}}
	}
	row := func(key string, ms ...*pb.Mutation) *pb.RowMutation {
		return &pb.RowMutation{RowKey: []byte(key), Mutations: ms}
	}
	mutate := func(rm *pb.RowMutation) func() error {
		return func() error {
			_, err := ts.MutateRow(ctx, &pb.MutateRowRequest{TabletId: first.ID, Epoch: first.Epoch, Row: rm})
			return err
		}
	}
	read := func(key string, f *pb.ReadFilter) func() error {
		return func() error {
			_, err := ts.ReadRow(ctx, &pb.ReadRowRequest{TabletId: first.ID, Epoch: first.Epoch, RowKey: []byte(key), Filter: f})
			return err
		}
	}
	scan := func(req *pb.ScanRowsRequest) func() error {
		return func() error {
			st, err := ts.ScanRows(ctx, req)
			if err != nil {
				return err
			}
			for {
				if _, err := st.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		}
	}
	tests := []struct {
		name   string
		call   func() error
		code   codes.Code
		reason pb.TabletError_Reason // of the TabletError detail, if any
		want   string
	}{
		{"empty row key", mutate(row("", set("cf", 1, nil))), codes.InvalidArgument, 0, "row key is empty"},
		{"no operations", mutate(row("a")), codes.InvalidArgument, 0, "no operations"},
		{"unknown family", mutate(row("a", set("nofam", 1, nil))), codes.InvalidArgument, 0, `"nofam"`},
		{"negative timestamp", mutate(row("a", set("cf", -7, nil))), codes.InvalidArgument, 0, "negative"},
		{"value too big", mutate(row("a", set("cf", 1, make([]byte, limits.MaxValueBytes+1)))), codes.InvalidArgument, 0, "value is"},
		{"row outside the tablet", mutate(row("z", set("cf", 1, nil))), codes.FailedPrecondition, pb.TabletError_WRONG_TABLET, `"z"`},
		{"unknown tablet", func() error {
			_, err := ts.MutateRow(ctx, &pb.MutateRowRequest{TabletId: "no-such-tablet", Epoch: 1, Row: row("a", set("cf", 1, nil))})
			return err
		}, codes.Unavailable, pb.TabletError_NOT_SERVING, "no-such-tablet"},
		{"wrong epoch", func() error {
			_, err := ts.MutateRow(ctx, &pb.MutateRowRequest{TabletId: first.ID, Epoch: first.Epoch + 100, Row: row("a", set("cf", 1, nil))})
			return err
		}, codes.Unavailable, pb.TabletError_NOT_SERVING, "epoch"},
		{"read empty row key", read("", nil), codes.InvalidArgument, 0, "row key is empty"},
		{"read outside the tablet", read("z", nil), codes.FailedPrecondition, pb.TabletError_WRONG_TABLET, `"z"`},
		{"read unknown family", read("a", &pb.ReadFilter{Families: []string{"nofam"}}), codes.InvalidArgument, 0, `"nofam"`},
		{"read unknown column family", read("a", &pb.ReadFilter{Columns: []*pb.Column{{Family: "nofam", Qualifier: []byte("q")}}}), codes.InvalidArgument, 0, `"nofam"`},
		{"read empty time range", read("a", &pb.ReadFilter{TimeRange: &pb.TimestampRange{StartMicros: 5, EndMicros: 5}}), codes.InvalidArgument, 0, "range"},
		{"read negative time range", read("a", &pb.ReadFilter{TimeRange: &pb.TimestampRange{StartMicros: -5}}), codes.InvalidArgument, 0, "range"},
		{"scan negative limit", scan(&pb.ScanRowsRequest{TabletId: first.ID, Epoch: first.Epoch, Limit: -1}), codes.InvalidArgument, 0, "limit"},
		{"scan unknown family", scan(&pb.ScanRowsRequest{TabletId: first.ID, Epoch: first.Epoch, Filter: &pb.ReadFilter{Families: []string{"nofam"}}}), codes.InvalidArgument, 0, `"nofam"`},
		{"scan overlapping ranges", scan(&pb.ScanRowsRequest{TabletId: first.ID, Epoch: first.Epoch, Ranges: []*pb.RowRange{{StartRow: []byte("a"), EndRow: []byte("c")}, {StartRow: []byte("b"), EndRow: []byte("d")}}}), codes.InvalidArgument, 0, "sorted and disjoint"},
		{"scan ranges out of order", scan(&pb.ScanRowsRequest{TabletId: first.ID, Epoch: first.Epoch, Ranges: []*pb.RowRange{{StartRow: []byte("c"), EndRow: []byte("d")}, {StartRow: []byte("a"), EndRow: []byte("b")}}}), codes.InvalidArgument, 0, "sorted and disjoint"},
		{"scan wrong epoch", scan(&pb.ScanRowsRequest{TabletId: first.ID, Epoch: first.Epoch + 100}), codes.Unavailable, pb.TabletError_NOT_SERVING, "epoch"},
	}
	for _, tc := range tests {
		if race.Enabled && tc.name == "value too big" {
			// A 100 MiB message costs 1.6 GB under the race detector;
			// the run without it checks the servers' value limit.
			continue
		}
		err := tc.call()
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v containing %s", tc.name, err, tc.code, tc.want)
			continue
		}
		te, ok := apierr.TabletReason(err)
		if tc.reason != 0 && (!ok || te.Reason != tc.reason) {
			t.Errorf("%s: tablet error detail %v, want %v", tc.name, te, tc.reason)
		}
		if tc.reason == 0 && ok {
			t.Errorf("%s: unexpected tablet error detail %v", tc.name, te)
		}
	}
	// MutateRows answers per row: the good rows are applied.
	resp, err := ts.MutateRows(ctx, &pb.MutateRowsRequest{TabletId: first.ID, Epoch: first.Epoch, Rows: []*pb.RowMutation{
		row("good1", set("cf", 1, []byte("1"))), row("bad", set("nofam", 1, nil)), row("z", set("cf", 1, nil)), row("", set("cf", 1, nil)), row("good2", set("cf", 1, []byte("2"))),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var codesGot []codes.Code
	for _, st := range resp.Statuses {
		codesGot = append(codesGot, codes.Code(st.Code))
	}
	if want := []codes.Code{codes.OK, codes.InvalidArgument, codes.FailedPrecondition, codes.InvalidArgument, codes.OK}; fmt.Sprint(codesGot) != fmt.Sprint(want) {
		t.Errorf("MutateRows statuses %v, want %v", codesGot, want)
	}
	for _, k := range []string{"good1", "good2"} {
		r, err := ts.ReadRow(ctx, &pb.ReadRowRequest{TabletId: first.ID, Epoch: first.Epoch, RowKey: []byte(k)})
		if err != nil || len(r.Row.GetCells()) != 1 {
			t.Errorf("row %s after MutateRows: %v %v", k, r, err)
		}
	}
}

func contractServerErrors(t *testing.T, e env, c *client.Client) {
	tbl := createTable(t, e, c, "errors")
	ctx := ctxT(t)
	if _, err := c.Open(ctx, "missing"); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("open missing: %v", err)
	}
	err := tbl.Put(ctx, "r", "nofam", "q", nil)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `table "errors": put row "r"`) || !strings.Contains(err.Error(), `"nofam"`) {
		t.Errorf("unknown family: %v", err)
	}
	if _, err := tbl.Get(ctx, "r", client.Families("nofam")); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"nofam"`) {
		t.Errorf("get unknown family: %v", err)
	}
	if err := tbl.Scan(ctx, "", "", func(client.Row) bool { return true }, client.Column("nofam", "q")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("scan unknown family: %v", err)
	}
	spec := client.TableSpec{Name: "errors", Families: []client.FamilySpec{{Name: "cf"}}}
	if err := c.CreateTable(ctx, spec); status.Code(err) != codes.AlreadyExists {
		t.Errorf("create twice: %v", err)
	}
	if err := c.DeleteTable(ctx, "nope"); status.Code(err) != codes.NotFound {
		t.Errorf("delete missing: %v", err)
	}
	if _, err := c.Tablets(ctx, "nope"); status.Code(err) != codes.NotFound {
		t.Errorf("tablets of a missing table: %v", err)
	}
	if err := c.SplitTablet(ctx, "nope", "m"); status.Code(err) != codes.NotFound {
		t.Errorf("split a missing table: %v", err)
	}
}

func contractDDL(t *testing.T, e env, c *client.Client) {
	ctx := ctxT(t)
	spec := client.TableSpec{Name: "users", Families: []client.FamilySpec{{Name: "cf", MaxVersions: 3, MaxAge: time.Hour}}, SplitKeys: []string{"m", "f"}}
	if err := c.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.waitServing(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Open(ctx, "users", client.WithCachePriority(client.High))
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(ctx, "alice", "cf", "name", []byte("Alice")); err != nil {
		t.Fatal(err)
	}
	infos, err := c.DescribeTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var info *client.TableInfo
	for i := range infos {
		if infos[i].Name == "users" {
			info = &infos[i]
		}
	}
	if info == nil || info.TabletCount != 3 || info.CachePriority != client.High || len(info.Families) != 1 ||
		info.Families[0].MaxAge != time.Hour || info.Families[0].MaxVersions != 3 {
		t.Errorf("info %+v", info)
	}
	tablets, err := c.Tablets(ctx, "users")
	if err != nil || len(tablets) != 3 {
		t.Fatal(tablets, err)
	}
	if tablets[0].EndRow != "f" || tablets[1].StartRow != "f" || tablets[1].EndRow != "m" || tablets[2].EndRow != "" {
		t.Errorf("tablet ranges %+v", tablets)
	}
	for _, tb := range tablets {
		if tb.ID == "" || tb.State != "serving" || tb.TServer == "" || tb.TServerUUID == "" || tb.Epoch <= 0 || tb.SizeBytes < -1 {
			t.Errorf("tablet %+v", tb)
		}
	}
	servers, err := c.TServers(ctx)
	if err != nil || len(servers) != len(e.tserverAddrs()) {
		t.Fatal(servers, err)
	}
	for _, s := range servers {
		if !s.Live || s.Address == "" || s.UUID == "" {
			t.Errorf("tserver %+v", s)
		}
	}
	if err := c.SplitTablet(ctx, "users", "m"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `"m"`) {
		t.Errorf("split at a tablet's first row: %v", err)
	}
	if err := c.SplitTablet(ctx, "users", "p"); err != nil {
		t.Fatal(err)
	}
	// A split runs on the tserver; the master shows its result once done.
	wait.ForCtx(t, ctx, "the split at p shown", func() (err error) {
		tablets, err = c.Tablets(ctx, "users")
		if err == nil && (len(tablets) != 4 || tablets[2].StartRow != "m" || tablets[2].EndRow != "p") {
			err = fmt.Errorf("tablets %+v", tablets)
		}
		return err
	})
	if err := e.waitServing(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	if r, err := tbl.Get(ctx, "alice"); err != nil || cellString(r) == "" {
		t.Errorf("after the split: %+v %v", r, err)
	}
	res, err := c.CheckpointAll(ctx)
	if err != nil || len(res) != len(e.tserverAddrs()) {
		t.Fatal(res, err)
	}
	if err := c.DeleteTable(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	names, err := c.ListTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "users" {
			t.Errorf("after delete: %v", names)
		}
	}
	if _, err := c.Open(ctx, "users"); status.Code(err) != codes.NotFound {
		t.Errorf("open a deleted table: %v", err)
	}
	// The tservers let go of a deleted table's tablets: writes through a
	// stale location fail with NotFound once the location is refreshed.
	wait.ForCtx(t, ctx, "NotFound for a put to a deleted table", func() error {
		if err := tbl.Put(ctx, "alice", "cf", "name", nil); status.Code(err) != codes.NotFound {
			return fmt.Errorf("put: %v", err)
		}
		return nil
	})
	// The name can be used again, and the new table is empty.
	tbl = createTable(t, e, c, "users")
	if r, err := tbl.Get(ctx, "alice"); err != nil || len(r.Cells) != 0 {
		t.Errorf("recreated table: %s %v", cellString(r), err)
	}
}

func contractClosedClient(t *testing.T, e env, _ *client.Client) {
	c, err := client.Dial(context.Background(), e.masters())
	if err != nil {
		t.Fatal(err)
	}
	tbl := createTable(t, e, c, "closed")
	c.Close()
	start := time.Now()
	if err := tbl.Put(context.Background(), "r", "cf", "q", nil); status.Code(err) != codes.FailedPrecondition || time.Since(start) > time.Second {
		t.Errorf("put on a closed client: %v after %v", err, time.Since(start))
	}
	if _, err := tbl.Get(context.Background(), "r"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("get on a closed client: %v", err)
	}
	if _, err := c.ListTables(context.Background()); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("list on a closed client: %v", err)
	}
}
