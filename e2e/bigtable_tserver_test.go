package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"bighive/testkit/cluster"
)

// TestBigtableAPIOnTServer: tservers started with --bigtable serve the
// Cloud Bigtable API on their own gRPC port. Google's official Go client
// pointed at one tserver (BIGTABLE_EMULATOR_HOST) creates a table of two
// tablets, one on each of two tservers, and writes and reads rows of both:
// the rows of the tserver it talks to are applied in-process, the others
// forwarded over gRPC. Every row reads back through the other tserver's
// endpoint and through the native client, and the admin calls work.
func TestBigtableAPIOnTServer(t *testing.T) {
	skipShort(t, "Bigtable API served by the tservers")
	c, cl := startCluster(t, cluster.Options{TServers: 2, Flags: []string{"--bigtable"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(i int) (*bigtable.AdminClient, *bigtable.Client) {
		return officialClients(t, ctx, c.TServerAddr(i), "p", "i")
	}
	adm, bt := dial(0)
	_, other := dial(1)
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "api", SplitKeys: []string{"m"},
		Families: map[string]bigtable.GCPolicy{"cf": bigtable.MaxVersionsPolicy(1)}}); err != nil {
		t.Fatalf("CreateTableFromConf through a tserver: %v", err)
	}
	if err := c.WaitServing(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	tables, err := adm.Tables(ctx)
	if err != nil || len(tables) != 1 || tables[0] != "api" {
		t.Fatalf("Tables: %v, %v", tables, err)
	}
	tbl := bt.Open("api")
	rows := []string{"a1", "b2", "n3", "z4"} // both tablets
	for _, r := range rows {
		m := bigtable.NewMutation()
		m.Set("cf", "v", bigtable.Timestamp(1000), []byte("v-"+r))
		if err := tbl.Apply(ctx, r, m); err != nil {
			t.Fatalf("Apply %s: %v", r, err)
		}
	}
	var bulkKeys []string
	var bulk []*bigtable.Mutation
	for i := range 20 {
		m := bigtable.NewMutation()
		m.Set("cf", "v", bigtable.Timestamp(1000), []byte(fmt.Sprint(i)))
		bulkKeys, bulk = append(bulkKeys, fmt.Sprintf("%c-bulk-%02d", "dq"[i%2], i)), append(bulk, m)
	}
	if errs, err := tbl.ApplyBulk(ctx, bulkKeys, bulk); err != nil || errs != nil {
		t.Fatalf("ApplyBulk: %v, %v", errs, err)
	}
	// A conditional mutation and an increment (RPCs other than one command).
	cond := bigtable.NewCondMutation(bigtable.ValueFilter("v-a1"), mutSet("cf", "c", "matched"), mutSet("cf", "c", "not"))
	if err := tbl.Apply(ctx, "a1", cond); err != nil {
		t.Fatalf("CheckAndMutate: %v", err)
	}
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("cf", "n", 5)
	if _, err := tbl.ApplyReadModifyWrite(ctx, "z4", rmw); err != nil {
		t.Fatalf("ReadModifyWrite: %v", err)
	}

	for _, r := range rows {
		for name, cl := range map[string]*bigtable.Client{"same tserver": bt, "other tserver": other} {
			got, err := cl.Open("api").ReadRow(ctx, r, bigtable.RowFilter(bigtable.ColumnFilter("v")))
			if err != nil || len(got["cf"]) != 1 || string(got["cf"][0].Value) != "v-"+r {
				t.Fatalf("ReadRow %s through the %s: %v, %v", r, name, got, err)
			}
		}
	}
	got, err := tbl.ReadRow(ctx, "a1", bigtable.RowFilter(bigtable.ColumnFilter("c")))
	if err != nil || len(got["cf"]) != 1 || string(got["cf"][0].Value) != "matched" {
		t.Fatalf("the conditional mutation's cell: %v, %v", got, err)
	}
	n := 0
	if err := tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { n++; return true }); err != nil || n != len(rows)+len(bulk) {
		t.Fatalf("ReadRows of the table: %d rows, %v; want %d", n, err, len(rows)+len(bulk))
	}
	ntbl, err := cl.Open(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(rows, bulkKeys...) {
		if row, err := ntbl.Get(ctx, r); err != nil || len(row.Cells) == 0 {
			t.Fatalf("native Get %s: %+v, %v", r, row, err)
		}
	}
}

func mutSet(family, column, value string) *bigtable.Mutation {
	m := bigtable.NewMutation()
	m.Set(family, column, bigtable.Timestamp(2000), []byte(value))
	return m
}
