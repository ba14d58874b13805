package frontend

import (
	"context"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/clustertest"
)

// adminFixture is a real in-process cluster, a frontend over it on
// loopback, and the official Go admin client and a raw admin stub talking
// to the frontend.
type adminFixture struct {
	cl   *clustertest.Cluster
	c    *client.Client
	adm  *bigtable.AdminClient
	raw  adminpb.BigtableTableAdminClient
	addr string
}

func startAdmin(t *testing.T) *adminFixture {
	t.Helper()
	cl := clustertest.Start(t, clustertest.Options{TServers: 2})
	c := cl.Client(client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	l, err := Listen("127.0.0.1:0", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(context.Background()) })
	conn, err := grpc.NewClient(l.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	adm, err := bigtable.NewAdminClient(context.Background(), "proj", "inst", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	return &adminFixture{cl: cl, c: c, adm: adm, raw: adminpb.NewBigtableTableAdminClient(conn), addr: l.Addr()}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// familyPolicies is TableInfo's families with their GC policies as the
// official client prints them.
func familyPolicies(t *testing.T, ctx context.Context, adm *bigtable.AdminClient, table string) map[string]string {
	t.Helper()
	info, err := adm.TableInfo(ctx, table)
	if err != nil {
		t.Fatalf("TableInfo(%q): %v", table, err)
	}
	out := map[string]string{}
	for _, f := range info.FamilyInfos {
		out[f.Name] = f.GCPolicy
	}
	return out
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want code %v", what, err, code)
	}
}

// TestAdminOfficialClient drives every served admin method through the
// official Go admin client and checks each result against the cluster's
// own client.
func TestAdminOfficialClient(t *testing.T) {
	f := startAdmin(t)
	ctx := testCtx(t)

	nested := bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(5),
		bigtable.IntersectionPolicy(bigtable.MaxAgePolicy(48*time.Hour), bigtable.MaxVersionsPolicy(2)))
	err := f.adm.CreateTableFromConf(ctx, &bigtable.TableConf{
		TableID:   "t1",
		SplitKeys: []string{"m", "f", "t"},
		Families:  map[string]bigtable.GCPolicy{"cf1": bigtable.MaxVersionsPolicy(3), "cf2": nested, "cf3": bigtable.NoGcPolicy()},
	})
	if err != nil {
		t.Fatalf("CreateTableFromConf: %v", err)
	}
	tablets, err := f.c.Tablets(ctx, "t1")
	if err != nil || len(tablets) != 4 {
		t.Fatalf("t1 has %d tablets (%v), want 4 from 3 split keys", len(tablets), err)
	}
	want := map[string]string{"cf1": "versions() > 3", "cf2": nested.String(), "cf3": ""}
	if got := familyPolicies(t, ctx, f.adm, "t1"); !mapsEqual(got, want) {
		t.Errorf("TableInfo families = %q, want %q", got, want)
	}

	if err := f.adm.CreateTable(ctx, "t0"); err == nil {
		t.Error("CreateTable without families succeeded; a Bighive table needs one")
	} else {
		wantCode(t, "CreateTable without families", err, codes.InvalidArgument)
	}
	wantCode(t, "CreateTable of an existing table",
		f.adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t1", Families: map[string]bigtable.GCPolicy{"x": bigtable.NoGcPolicy()}}),
		codes.AlreadyExists)
	if err := f.adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t2", Families: map[string]bigtable.GCPolicy{"cf": bigtable.NoGcPolicy()}}); err != nil {
		t.Fatal(err)
	}
	tables, err := f.adm.Tables(ctx)
	if err != nil || !slices.Equal(tables, []string{"t1", "t2"}) {
		t.Errorf("Tables = %q, %v; want [t1 t2]", tables, err)
	}

	// Column families: create, nested GC policy, delete.
	if err := f.adm.CreateColumnFamily(ctx, "t1", "cf4"); err != nil {
		t.Fatalf("CreateColumnFamily: %v", err)
	}
	wantCode(t, "CreateColumnFamily of an existing family", f.adm.CreateColumnFamily(ctx, "t1", "cf4"), codes.AlreadyExists)
	deep := bigtable.IntersectionPolicy(bigtable.MaxAgePolicy(time.Hour),
		bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(1), bigtable.MaxAgePolicy(30*time.Minute)))
	if err := f.adm.SetGCPolicy(ctx, "t1", "cf4", deep); err != nil {
		t.Fatalf("SetGCPolicy: %v", err)
	}
	if err := f.adm.SetGCPolicy(ctx, "t1", "cf1", bigtable.NoGcPolicy()); err != nil {
		t.Fatalf("SetGCPolicy(NoGcPolicy): %v", err)
	}
	if err := f.adm.CreateColumnFamilyWithConfig(ctx, "t1", "cf5", bigtable.Family{GCPolicy: bigtable.MaxAgePolicy(time.Hour)}); err != nil {
		t.Fatalf("CreateColumnFamilyWithConfig: %v", err)
	}
	if err := f.adm.DeleteColumnFamily(ctx, "t1", "cf3"); err != nil {
		t.Fatalf("DeleteColumnFamily: %v", err)
	}
	want = map[string]string{"cf1": "", "cf2": nested.String(), "cf4": deep.String(), "cf5": "age() > 1h"}
	if got := familyPolicies(t, ctx, f.adm, "t1"); !mapsEqual(got, want) {
		t.Errorf("after the family changes, TableInfo families = %q, want %q", got, want)
	}
	wantCode(t, "SetGCPolicy of a missing family", f.adm.SetGCPolicy(ctx, "t1", "nope", bigtable.MaxVersionsPolicy(1)), codes.NotFound)
	wantCode(t, "DeleteColumnFamily of a missing family", f.adm.DeleteColumnFamily(ctx, "t1", "nope"), codes.NotFound)
	wantCode(t, "SetGCPolicy with zero versions", f.adm.SetGCPolicy(ctx, "t1", "cf1", bigtable.MaxVersionsPolicy(0)), codes.InvalidArgument)

	// Dropping rows: a prefix, then everything.
	tbl, err := f.c.Open(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"a1", "a2", "b1", "m1", "z1"} {
		if err := tbl.Put(ctx, row, "cf2", "c", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	rowsOf := func() []string {
		t.Helper()
		var keys []string
		err := tbl.ReadRows(ctx, client.InfiniteRange(""), func(r client.Row) bool {
			keys = append(keys, r.Key)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	if err := f.adm.DropRowRange(ctx, "t1", "a"); err != nil {
		t.Fatalf("DropRowRange: %v", err)
	}
	if got := rowsOf(); !slices.Equal(got, []string{"b1", "m1", "z1"}) {
		t.Errorf("after DropRowRange(a), rows = %q, want [b1 m1 z1]", got)
	}
	if err := f.adm.DropAllRows(ctx, "t1"); err != nil {
		t.Fatalf("DropAllRows: %v", err)
	}
	if got := rowsOf(); len(got) != 0 {
		t.Errorf("after DropAllRows, rows = %q, want none", got)
	}

	// Consistency: at once.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second) // WaitForReplication polls every 10 s
	err = f.adm.WaitForReplication(wctx, "t1")
	cancel()
	if err != nil {
		t.Errorf("WaitForReplication: %v, want nil at once", err)
	}
	wantCode(t, "WaitForReplication of a missing table", f.adm.WaitForReplication(ctx, "nope"), codes.NotFound)

	// Deleting.
	if err := f.adm.DeleteTable(ctx, "t2"); err != nil {
		t.Fatalf("DeleteTable: %v", err)
	}
	wantCode(t, "DeleteTable of a deleted table", f.adm.DeleteTable(ctx, "t2"), codes.NotFound)
	_, err = f.adm.TableInfo(ctx, "t2")
	wantCode(t, "TableInfo of a deleted table", err, codes.NotFound)
	if tables, err := f.adm.Tables(ctx); err != nil || !slices.Equal(tables, []string{"t1"}) {
		t.Errorf("after DeleteTable, Tables = %q, %v; want [t1]", tables, err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
