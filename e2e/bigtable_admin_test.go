package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/cluster"
)

// TestBigtableAdminAPI drives the table admin service of the cluster's
// frontend process with the official Go admin client, reached the way an
// application reaches the emulator (BIGTABLE_EMULATOR_HOST), and checks
// the results with the native client. The data service is not exercised
// here.
func TestBigtableAdminAPI(t *testing.T) {
	skipShort(t, "Bigtable admin API")
	c := cluster.New(t, cluster.Options{TServers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Setenv("BIGTABLE_EMULATOR_HOST", c.BigtableAddr())
	adm, err := bigtable.NewAdminClient(ctx, "any-project", "any-instance")
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	native, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()

	err = adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", SplitKeys: []string{"h", "p"},
		Families: map[string]bigtable.GCPolicy{"cf": bigtable.MaxVersionsPolicy(2)}})
	if err != nil {
		t.Fatalf("CreateTableFromConf: %v", err)
	}
	if tablets, err := native.Tablets(ctx, "users"); err != nil || len(tablets) != 3 {
		t.Fatalf("users has %d tablets (%v), want 3", len(tablets), err)
	}
	if err := adm.CreateColumnFamily(ctx, "users", "meta"); err != nil {
		t.Fatalf("CreateColumnFamily: %v", err)
	}
	policy := bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(1), bigtable.MaxAgePolicy(24*time.Hour))
	if err := adm.SetGCPolicy(ctx, "users", "meta", policy); err != nil {
		t.Fatalf("SetGCPolicy: %v", err)
	}
	info, err := adm.TableInfo(ctx, "users")
	if err != nil {
		t.Fatalf("TableInfo: %v", err)
	}
	got := map[string]string{}
	for _, f := range info.FamilyInfos {
		got[f.Name] = f.GCPolicy
	}
	if len(got) != 2 || got["cf"] != "versions() > 2" || got["meta"] != policy.String() {
		t.Errorf("TableInfo families = %q, want cf %q and meta %q", got, "versions() > 2", policy.String())
	}
	if tables, err := adm.Tables(ctx); err != nil || !slices.Equal(tables, []string{"users"}) {
		t.Errorf("Tables = %q, %v; want [users]", tables, err)
	}

	// Rows written natively, dropped through the API.
	if err := c.WaitServing(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	tbl, err := native.Open(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"alice", "bob", "hal", "zed"} {
		if err := tbl.Put(ctx, row, "cf", "name", []byte(row)); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.DropRowRange(ctx, "users", "b"); err != nil {
		t.Fatalf("DropRowRange: %v", err)
	}
	var keys []string
	if err := tbl.ReadRows(ctx, client.InfiniteRange(""), func(r client.Row) bool { keys = append(keys, r.Key); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"alice", "hal", "zed"}) {
		t.Errorf("after DropRowRange(b), rows = %q, want [alice hal zed]", keys)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	if err := adm.WaitForReplication(wctx, "users"); err != nil {
		t.Errorf("WaitForReplication: %v, want nil at once", err)
	}
	wcancel()

	if err := adm.DeleteTable(ctx, "users"); err != nil {
		t.Fatalf("DeleteTable: %v", err)
	}
	if _, err := adm.TableInfo(ctx, "users"); status.Code(err) != codes.NotFound {
		t.Errorf("TableInfo after DeleteTable: got %v, want NotFound", err)
	}
}
