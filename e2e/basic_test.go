package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/testkit/cluster"
)

// skipShort skips a test under -short: every test here starts a cluster
// of real processes, which the fast loop leaves to the full run. what
// says what the test covers.
func skipShort(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process " + what + ": runs without -short")
	}
}

// startCluster starts a cluster for one test (in a fresh temporary
// directory) and dials a client to it.
func startCluster(t *testing.T, opts cluster.Options) (*cluster.Cluster, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts.Dir = t.TempDir()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs(t)
		}
		c.Close()
	})
	cl, err := client.Dial(ctx, c.MasterAddrs())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl
}

// splitKeys returns n-1 keys that cut "row-0000".."row-9999" into n tablets.
func splitKeys(n int) []string {
	var keys []string
	for i := 1; i < n; i++ {
		keys = append(keys, fmt.Sprintf("row-%04d", i*10000/n))
	}
	return keys
}

func rowKey(i int) string { return fmt.Sprintf("row-%04d", i) }

func createTable(t *testing.T, ctx context.Context, c *cluster.Cluster, cl *client.Client, name string, tablets int) *client.Table {
	t.Helper()
	return createSpec(t, ctx, c, cl, client.TableSpec{Name: name,
		Families: []client.FamilySpec{{Name: "cf"}, {Name: "meta", MaxVersions: 1}}, SplitKeys: splitKeys(tablets)})
}

// createSpec creates the table spec describes, waits until every tablet
// serves and opens it.
func createSpec(t *testing.T, ctx context.Context, c *cluster.Cluster, cl *client.Client, spec client.TableSpec) *client.Table {
	t.Helper()
	if err := cl.CreateTable(ctx, spec); err != nil {
		t.Fatalf("create table %s: %v", spec.Name, err)
	}
	if err := c.WaitServing(ctx, spec.Name); err != nil {
		t.Fatalf("wait serving %s: %v", spec.Name, err)
	}
	tbl, err := cl.Open(ctx, spec.Name)
	if err != nil {
		t.Fatalf("open %s: %v", spec.Name, err)
	}
	return tbl
}

func value(i int) []byte { return []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%50))) }

func TestPutGetScanAcrossTablets(t *testing.T) {
	skipShort(t, "put, get and scan across tablets")
	c, cl := startCluster(t, cluster.Options{Masters: 1, TServers: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "users", 8)

	const n = 400
	var rows []int
	for i := 0; i < n; i++ {
		rows = append(rows, i*25) // spread over all 8 tablets
	}
	for _, i := range rows {
		if err := tbl.Put(ctx, rowKey(i), "cf", "v", value(i)); err != nil {
			t.Fatalf("put %s: %v", rowKey(i), err)
		}
	}
	for _, i := range rows {
		r, err := tbl.Get(ctx, rowKey(i))
		if err != nil {
			t.Fatalf("get %s: %v", rowKey(i), err)
		}
		if len(r.Cells) != 1 || string(r.Cells[0].Value) != string(value(i)) {
			t.Fatalf("get %s: %+v", rowKey(i), r)
		}
	}
	if r, err := tbl.Get(ctx, "row-missing"); err != nil || len(r.Cells) != 0 {
		t.Fatalf("missing row: %+v, %v", r, err)
	}

	// A full scan crosses every tablet boundary and returns rows in order.
	var got []string
	if err := tbl.Scan(ctx, "", "", func(r client.Row) bool { got = append(got, r.Key); return true }); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if len(got) != n || !sort.StringsAreSorted(got) {
		t.Fatalf("scan returned %d rows (sorted %v), want %d sorted", len(got), sort.StringsAreSorted(got), n)
	}
	// A range scan crossing one boundary (row-1250 splits tablets 1 and 2).
	got = got[:0]
	if err := tbl.Scan(ctx, rowKey(1000), rowKey(1500), func(r client.Row) bool { got = append(got, r.Key); return true }); err != nil {
		t.Fatalf("range scan: %v", err)
	}
	if len(got) != 20 || got[0] != rowKey(1000) || got[19] != rowKey(1475) {
		t.Fatalf("range scan: %d rows %v", len(got), got)
	}
	// The callback stops a scan.
	count := 0
	if err := tbl.Scan(ctx, "", "", func(client.Row) bool { count++; return count < 7 }); err != nil || count != 7 {
		t.Fatalf("stopped scan: %d rows, %v", count, err)
	}
}

func TestApplyAndBulkAcrossTablets(t *testing.T) {
	skipShort(t, "Apply and ApplyBulk across tablets")
	c, cl := startCluster(t, cluster.Options{Masters: 1, TServers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "bulk", 8)

	var keys []string
	var ms []*client.Mutation
	for i := 0; i < 1000; i += 7 {
		m := client.NewMutation()
		m.Set("cf", "a", client.ServerTime, value(i))
		m.Set("meta", "b", client.ServerTime, []byte("m"))
		keys = append(keys, rowKey(i))
		ms = append(ms, m)
	}
	errs, err := tbl.ApplyBulk(ctx, keys, ms)
	if err != nil {
		t.Fatalf("apply bulk: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("row %s: %v", keys[i], e)
		}
	}
	for _, k := range keys {
		r, err := tbl.Get(ctx, k)
		if err != nil || len(r.Cells) != 2 {
			t.Fatalf("get %s: %+v %v", k, r, err)
		}
	}
	// An atomic row mutation: delete one family, set another, in one Apply.
	m := client.NewMutation()
	m.DeleteCellsInFamily("meta")
	m.Set("cf", "c", client.ServerTime, []byte("new"))
	if err := tbl.Apply(ctx, keys[0], m); err != nil {
		t.Fatalf("apply: %v", err)
	}
	r, err := tbl.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, cell := range r.Cells {
		cols = append(cols, cell.Family+":"+cell.Qualifier)
	}
	if strings.Join(cols, ",") != "cf:a,cf:c" {
		t.Fatalf("after apply: columns %v, want cf:a,cf:c", cols)
	}
	// A whole-row delete.
	m = client.NewMutation()
	m.DeleteRow()
	if err := tbl.Apply(ctx, keys[1], m); err != nil {
		t.Fatal(err)
	}
	if r, err := tbl.Get(ctx, keys[1]); err != nil || len(r.Cells) != 0 {
		t.Fatalf("deleted row: %+v %v", r, err)
	}
}

func TestTServerRestartKeepsAcknowledgedWrites(t *testing.T) {
	skipShort(t, "tserver restart keeping acknowledged writes")
	c, cl := startCluster(t, cluster.Options{Masters: 1, TServers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "durable", 4)

	acked := map[string]string{}
	for i := 0; i < 300; i++ {
		k, v := rowKey(i*33%10000), fmt.Sprintf("v1-%d", i)
		if err := tbl.Put(ctx, k, "cf", "v", []byte(v)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		acked[k] = v
	}
	if err := c.StopTServer(0); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.RestartTServer(0); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := c.WaitServing(ctx, "durable"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ { // writes after the restart land too
		k, v := rowKey(i*71%10000), fmt.Sprintf("v2-%d", i)
		if err := tbl.Put(ctx, k, "cf", "v", []byte(v)); err != nil {
			t.Fatalf("put after restart %s: %v", k, err)
		}
		acked[k] = v
	}
	for k, v := range acked {
		r, err := tbl.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if len(r.Cells) == 0 || string(r.Cells[0].Value) != v {
			t.Fatalf("get %s = %+v, want %q", k, r, v)
		}
	}
}

func TestBadInputStatusCodes(t *testing.T) {
	skipShort(t, "status codes of bad input")
	c, cl := startCluster(t, cluster.Options{Masters: 1, TServers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "strict", 2)

	if _, err := cl.Open(ctx, "no_such_table"); apierr.CodeOf(err) != codes.NotFound {
		t.Errorf("open unknown table: %v, want NotFound", err)
	}
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "strict", Families: []client.FamilySpec{{Name: "cf"}}}); apierr.CodeOf(err) != codes.AlreadyExists {
		t.Errorf("create existing table: %v, want AlreadyExists", err)
	}
	if err := cl.CreateTable(ctx, client.TableSpec{Name: "bad name", Families: []client.FamilySpec{{Name: "cf"}}}); apierr.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("create bad name: %v, want InvalidArgument", err)
	}
	tests := []struct {
		name            string
		row, fam, value string
	}{
		{"unknown family", "r1", "nofamily", "v"},
		{"empty row key", "", "cf", "v"},
		{"oversized row key", strings.Repeat("k", limits.MaxRowKeyBytes+1), "cf", "v"},
		{"oversized value", "r2", "cf", strings.Repeat("v", limits.MaxValueBytes+1)},
	}
	for _, tc := range tests {
		err := tbl.Put(ctx, tc.row, tc.fam, "q", []byte(tc.value))
		if apierr.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", tc.name, err)
		}
	}
	// Nothing was written by the refused requests; a good write still works.
	if err := tbl.Put(ctx, "r1", "cf", "q", []byte("ok")); err != nil {
		t.Fatalf("good put: %v", err)
	}
	r, err := tbl.Get(ctx, "r1")
	if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != "ok" {
		t.Fatalf("get r1: %+v %v", r, err)
	}
}
