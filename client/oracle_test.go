package client_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/client"
	"bighive/testkit/inproc"
)

// The differential tests compare Bighive with Google's emulator bttest,
// the reference implementation of Bigtable's semantics, reached through
// the official Cloud Bigtable Go client. Each side holds table "t" with
// the families diffFamilies.

// bighiveTable creates table "t" on c, pre-split at splits.
func bighiveTable(t *testing.T, ctx context.Context, c *inproc.Cluster, splits ...string) *client.Table {
	t.Helper()
	spec := client.TableSpec{Name: "t", SplitKeys: splits}
	for _, f := range diffFamilies {
		spec.Families = append(spec.Families, client.FamilySpec{Name: f})
	}
	if err := c.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Client().Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// bttestTable starts an emulator for the test and returns its table "t".
func bttestTable(t *testing.T, ctx context.Context) *bigtable.Table {
	t.Helper()
	srv, err := bttest.NewServer("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	adm, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for _, f := range diffFamilies {
		if err := adm.CreateColumnFamily(ctx, "t", f); err != nil {
			t.Fatal(err)
		}
	}
	btc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { btc.Close() })
	return btc.Open("t")
}
