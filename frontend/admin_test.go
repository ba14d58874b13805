package frontend

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"bighive/client"
	"bighive/testkit/inproc"
)

// adminFixture is a real in-process cluster, a frontend over it on
// loopback, and the official Go admin client and a raw admin stub talking
// to the frontend.
type adminFixture struct {
	cl   *inproc.Cluster
	c    *client.Client
	adm  *bigtable.AdminClient
	raw  adminpb.BigtableTableAdminClient
	addr string
}

func startAdmin(t *testing.T) *adminFixture {
	t.Helper()
	cl := inproc.Start(t, inproc.Options{TServers: 2})
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
	t.Parallel()
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
	// NoGcPolicy is sent as an empty GcRule and comes back absent, as from
	// Cloud Bigtable: the client shows "<never>" (TestAdminFamilyWithoutRule).
	want := map[string]string{"cf1": "versions() > 3", "cf2": nested.String(), "cf3": "<never>"}
	if got := familyPolicies(t, ctx, f.adm, "t1"); !mapsEqual(got, want) {
		t.Errorf("TableInfo families = %q, want %q", got, want)
	}

	// The Go quick start: a table without families, then a family; its
	// last family can go again.
	if err := f.adm.CreateTable(ctx, "t0"); err != nil {
		t.Fatalf("CreateTable without families: %v", err)
	}
	if got := familyPolicies(t, ctx, f.adm, "t0"); len(got) != 0 {
		t.Errorf("a table created without families has %q", got)
	}
	if err := f.adm.CreateColumnFamily(ctx, "t0", "cf"); err != nil {
		t.Fatalf("CreateColumnFamily on a table without families: %v", err)
	}
	t0, err := f.c.Open(ctx, "t0")
	if err != nil {
		t.Fatal(err)
	}
	if err := t0.Put(ctx, "r", "cf", "q", []byte("v")); err != nil {
		t.Fatalf("write to the family created after the table: %v", err)
	}
	if err := f.adm.DeleteColumnFamily(ctx, "t0", "cf"); err != nil {
		t.Fatalf("DeleteColumnFamily of the last family: %v", err)
	}
	if err := t0.Put(ctx, "r", "cf", "q", []byte("v")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("write to a deleted family: %v, want InvalidArgument", err)
	}
	if err := f.adm.DeleteTable(ctx, "t0"); err != nil {
		t.Fatal(err)
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
	want = map[string]string{"cf1": "<never>", "cf2": nested.String(), "cf4": deep.String(), "cf5": "age() > 1h"}
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

// TestAdminRaw checks what the official client does not reach: views,
// paging, several modifications in one call, resource names and the error
// codes of bad requests.
func TestAdminRaw(t *testing.T) {
	t.Parallel()
	f := startAdmin(t)
	ctx := testCtx(t)
	const parent = "projects/p/instances/i"
	keep := &adminpb.ColumnFamily{GcRule: &adminpb.GcRule{}}
	for _, id := range []string{"a", "b", "c"} {
		_, err := f.raw.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent, TableId: id,
			Table: &adminpb.Table{ColumnFamilies: map[string]*adminpb.ColumnFamily{"cf": keep}}})
		if err != nil {
			t.Fatalf("CreateTable(%s): %v", id, err)
		}
	}

	// Views.
	got, err := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/a", View: adminpb.Table_NAME_ONLY})
	if err != nil || got.Name != parent+"/tables/a" || got.ColumnFamilies != nil {
		t.Errorf("GetTable NAME_ONLY = %v, %v; want the name alone", got, err)
	}
	for _, view := range []adminpb.Table_View{adminpb.Table_VIEW_UNSPECIFIED, adminpb.Table_SCHEMA_VIEW, adminpb.Table_FULL} {
		got, err := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/a", View: view})
		if err != nil || got.Name != parent+"/tables/a" || len(got.ColumnFamilies) != 1 || got.ColumnFamilies["cf"] == nil {
			t.Errorf("GetTable %v = %v, %v; want the name and family cf", view, got, err)
		}
	}
	list, err := f.raw.ListTables(ctx, &adminpb.ListTablesRequest{Parent: "projects/other/instances/x"})
	if err != nil || len(list.Tables) != 3 || list.Tables[0].Name != "projects/other/instances/x/tables/a" || list.Tables[0].ColumnFamilies != nil {
		t.Errorf("ListTables = %v, %v; want 3 names under the request's instance", list, err)
	}
	list, err = f.raw.ListTables(ctx, &adminpb.ListTablesRequest{Parent: parent, View: adminpb.Table_SCHEMA_VIEW})
	if err != nil || len(list.Tables) != 3 || len(list.Tables[2].ColumnFamilies) != 1 {
		t.Errorf("ListTables SCHEMA_VIEW = %v, %v; want 3 tables with families", list, err)
	}
	// Paging: two pages of 2 and 1.
	var names []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("ListTables paging does not end")
		}
		page, err := f.raw.ListTables(ctx, &adminpb.ListTablesRequest{Parent: parent, PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range page.Tables {
			names = append(names, tb.Name[len(parent)+len("/tables/"):])
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("ListTables pages = %q, want [a b c]", names)
	}

	// Several modifications in one call, applied in order: create x, set
	// its rule, create y, drop cf.
	ver2 := &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: 2}}
	tbl, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a",
		Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
			{Id: "x", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Create{Create: &adminpb.ColumnFamily{}}},
			{Id: "x", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{GcRule: ver2}}},
			{Id: "y", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Create{Create: &adminpb.ColumnFamily{GcRule: ver2}}},
			{Id: "cf", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Drop{Drop: true}},
		}})
	if err != nil {
		t.Fatalf("ModifyColumnFamilies: %v", err)
	}
	if len(tbl.ColumnFamilies) != 2 || tbl.ColumnFamilies["x"].GetGcRule().GetMaxNumVersions() != 2 ||
		tbl.ColumnFamilies["y"].GetGcRule().GetMaxNumVersions() != 2 {
		t.Errorf("after ModifyColumnFamilies, families = %v; want x and y keeping 2 versions", tbl.ColumnFamilies)
	}
	// A failing modification is found before any is applied.
	_, err = f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a",
		Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
			{Id: "z", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Create{Create: &adminpb.ColumnFamily{}}},
			{Id: "cf", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Drop{Drop: true}},
		}})
	wantCode(t, "ModifyColumnFamilies dropping a dropped family", err, codes.NotFound)
	if got, _ := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/a"}); got.GetColumnFamilies()["z"] != nil {
		t.Error("a ModifyColumnFamilies that failed its check created a family")
	}

	// Consistency tokens.
	tok, err := f.raw.GenerateConsistencyToken(ctx, &adminpb.GenerateConsistencyTokenRequest{Name: parent + "/tables/a"})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := f.raw.CheckConsistency(ctx, &adminpb.CheckConsistencyRequest{Name: parent + "/tables/a", ConsistencyToken: tok.ConsistencyToken})
	if err != nil || !cons.Consistent {
		t.Errorf("CheckConsistency = %v, %v; want consistent", cons, err)
	}

	// Errors.
	bad := []struct {
		what string
		call func() error
		code codes.Code
	}{
		{"GetTable with a malformed name", func() error {
			_, err := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: "projects/p/tables/a"})
			return err
		}, codes.InvalidArgument},
		{"GetTable with an empty table ID", func() error {
			_, err := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/"})
			return err
		}, codes.InvalidArgument},
		{"GetTable of a missing table", func() error {
			_, err := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/nope"})
			return err
		}, codes.NotFound},
		{"ListTables with a malformed parent", func() error {
			_, err := f.raw.ListTables(ctx, &adminpb.ListTablesRequest{Parent: "projects/p"})
			return err
		}, codes.InvalidArgument},
		{"CreateTable with a malformed parent", func() error {
			_, err := f.raw.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: "p/i", TableId: "d",
				Table: &adminpb.Table{ColumnFamilies: map[string]*adminpb.ColumnFamily{"cf": keep}}})
			return err
		}, codes.InvalidArgument},
		{"CreateTable with an empty table ID", func() error {
			_, err := f.raw.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent,
				Table: &adminpb.Table{ColumnFamilies: map[string]*adminpb.ColumnFamily{"cf": keep}}})
			return err
		}, codes.InvalidArgument},
		{"CreateTable with a duplicated split", func() error {
			_, err := f.raw.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent, TableId: "d",
				Table:         &adminpb.Table{ColumnFamilies: map[string]*adminpb.ColumnFamily{"cf": keep}},
				InitialSplits: []*adminpb.CreateTableRequest_Split{{Key: []byte("k")}, {Key: []byte("k")}}})
			return err
		}, codes.InvalidArgument},
		{"DeleteTable of a missing table", func() error {
			_, err := f.raw.DeleteTable(ctx, &adminpb.DeleteTableRequest{Name: parent + "/tables/nope"})
			return err
		}, codes.NotFound},
		{"ModifyColumnFamilies of a missing table", func() error {
			_, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/nope",
				Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
					{Id: "x", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Drop{Drop: true}}}})
			return err
		}, codes.NotFound},
		{"ModifyColumnFamilies without a modification", func() error {
			_, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a"})
			return err
		}, codes.InvalidArgument},
		{"ModifyColumnFamilies creating an existing family", func() error {
			_, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a",
				Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
					{Id: "x", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Create{Create: &adminpb.ColumnFamily{}}}}})
			return err
		}, codes.AlreadyExists},
		{"ModifyColumnFamilies with a bad GC rule", func() error {
			_, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a",
				Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
					{Id: "x", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{
						GcRule: &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: -1}}}}}}})
			return err
		}, codes.InvalidArgument},
		{"ModifyColumnFamilies updating the value type", func() error {
			_, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a",
				Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
					{Id: "x", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{}},
						UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"value_type"}}}}})
			return err
		}, codes.InvalidArgument},
		{"ModifyColumnFamilies updating the value type of a missing family", func() error {
			_, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/a",
				Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
					{Id: "nofam", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{}},
						UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"value_type"}}}}})
			if err != nil && !strings.Contains(status.Convert(err).Message(), `column family "nofam"`) {
				t.Errorf("updating the value type of a missing family: %v does not name the family", err)
			}
			return err
		}, codes.NotFound},
		{"DropRowRange without a target", func() error {
			_, err := f.raw.DropRowRange(ctx, &adminpb.DropRowRangeRequest{Name: parent + "/tables/a"})
			return err
		}, codes.InvalidArgument},
		{"DropRowRange with an empty prefix", func() error {
			_, err := f.raw.DropRowRange(ctx, &adminpb.DropRowRangeRequest{Name: parent + "/tables/a",
				Target: &adminpb.DropRowRangeRequest_RowKeyPrefix{}})
			return err
		}, codes.InvalidArgument},
		{"DropRowRange of a missing table", func() error {
			_, err := f.raw.DropRowRange(ctx, &adminpb.DropRowRangeRequest{Name: parent + "/tables/nope",
				Target: &adminpb.DropRowRangeRequest_DeleteAllDataFromTable{DeleteAllDataFromTable: true}})
			return err
		}, codes.NotFound},
		{"GenerateConsistencyToken of a missing table", func() error {
			_, err := f.raw.GenerateConsistencyToken(ctx, &adminpb.GenerateConsistencyTokenRequest{Name: parent + "/tables/nope"})
			return err
		}, codes.NotFound},
		{"CheckConsistency with a foreign token", func() error {
			_, err := f.raw.CheckConsistency(ctx, &adminpb.CheckConsistencyRequest{Name: parent + "/tables/a", ConsistencyToken: "x"})
			return err
		}, codes.InvalidArgument},
	}
	for _, b := range bad {
		wantCode(t, b.what, b.call(), b.code)
	}

	// Methods not served name themselves.
	_, err = f.raw.UndeleteTable(ctx, &adminpb.UndeleteTableRequest{Name: parent + "/tables/a"})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(status.Convert(err).Message(), "UndeleteTable") {
		t.Errorf("UndeleteTable: got %v, want Unimplemented naming the method", err)
	}
}

// TestAdminFamilyWithoutRule: a family without a GC rule, however it was
// made (no gc_rule, an empty GcRule, an update to an empty GcRule, the
// native client), comes back with gc_rule absent on the wire, as Cloud
// Bigtable sends it, from CreateTable, ModifyColumnFamilies, GetTable and
// ListTables; not as an empty GcRule message, which the clients show
// otherwise (Go's GCRuleToString "" for "<never>", Node.js {} for null).
func TestAdminFamilyWithoutRule(t *testing.T) {
	f := startAdmin(t)
	ctx := testCtx(t)
	const parent = "projects/p/instances/i"
	ver1 := &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: 1}}
	// none checks that every family of tbl but the ones ruled has no
	// gc_rule: the family's message is empty, so nothing of it is sent.
	none := func(what string, tbl *adminpb.Table, ruled ...string) {
		t.Helper()
		if len(tbl.GetColumnFamilies()) == 0 {
			t.Fatalf("%s: no families in %v", what, tbl)
		}
		for id, cf := range tbl.GetColumnFamilies() {
			if slices.Contains(ruled, id) {
				if cf.GetGcRule().GetRule() == nil {
					t.Errorf("%s: family %s has lost its rule: %v", what, id, cf)
				}
				continue
			}
			if cf.GcRule != nil || proto.Size(cf) != 0 {
				t.Errorf("%s: family %s without a rule is sent as %v (%d bytes); want gc_rule absent", what, id, cf, proto.Size(cf))
			}
		}
	}

	created, err := f.raw.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent, TableId: "t",
		Table: &adminpb.Table{ColumnFamilies: map[string]*adminpb.ColumnFamily{
			"absent": {}, "empty": {GcRule: &adminpb.GcRule{}}, "ver": {GcRule: ver1}}}})
	if err != nil {
		t.Fatal(err)
	}
	none("CreateTable", created, "ver")
	modified, err := f.raw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: parent + "/tables/t",
		Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
			{Id: "later", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Create{Create: &adminpb.ColumnFamily{}}},
			{Id: "ver", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{GcRule: &adminpb.GcRule{}}}},
			{Id: "ver2", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Create{Create: &adminpb.ColumnFamily{GcRule: ver1}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	none("ModifyColumnFamilies", modified, "ver2")
	if err := f.c.CreateTable(ctx, client.TableSpec{Name: "native", Families: []client.FamilySpec{{Name: "f"}, {Name: "g", MaxVersions: 2}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table string
		ruled []string
	}{{"t", []string{"ver2"}}, {"native", []string{"g"}}} {
		got, err := f.raw.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/" + c.table, View: adminpb.Table_SCHEMA_VIEW})
		if err != nil {
			t.Fatal(err)
		}
		none("GetTable "+c.table, got, c.ruled...)
	}
	list, err := f.raw.ListTables(ctx, &adminpb.ListTablesRequest{Parent: parent, View: adminpb.Table_SCHEMA_VIEW})
	if err != nil || len(list.Tables) != 2 {
		t.Fatalf("ListTables: %v, %v", list, err)
	}
	none("ListTables native", list.Tables[0], "g")
	none("ListTables t", list.Tables[1], "ver2")

	// The official Go client: "<never>" for no rule (it renders an empty
	// GcRule as "").
	info, err := f.adm.TableInfo(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, fi := range info.FamilyInfos {
		rules[fi.Name] = fi.GCPolicy
	}
	want := map[string]string{"absent": "<never>", "empty": "<never>", "later": "<never>", "ver": "<never>", "ver2": "versions() > 1"}
	if !maps.Equal(rules, want) {
		t.Errorf("TableInfo GC policies = %v, want %v", rules, want)
	}
}
