package e2e_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// TestTLSWithTokens runs TLS and the permissions together, as a shared
// network would: every process serves TLS 1.3 and checks --auth-tokens.
// The right CA, client certificate and token succeed; an unknown token
// over TLS is Unauthenticated; a client certificate alone names its CN as
// the principal, which has no grant (PermissionDenied, nothing written)
// until an admin grants it one.
func TestTLSWithTokens(t *testing.T) {
	skipShort(t, "tokens over TLS")
	c, root := authClusterWith(t, cluster.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.CreateTable(ctx, client.TableSpec{Name: "secure", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatalf("admin over TLS with a token: create: %v", err)
	}
	if err := c.WaitServing(ctx, "secure"); err != nil {
		t.Fatal(err)
	}
	tbl, err := root.Open(ctx, "secure")
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(ctx, "r1", "cf", "q", []byte("v1")); err != nil {
		t.Fatalf("admin put over TLS: %v", err)
	}
	if row, err := tbl.Get(ctx, "r1"); err != nil || len(row.Cells) != 1 || string(row.Cells[0].Value) != "v1" {
		t.Fatalf("admin get over TLS = %+v, %v; want the one cell v1", row, err)
	}

	// An unknown token wins over the certificate: Unauthenticated.
	_, err = dialAs(t, c, "not-a-token-0123456789").ListTables(ctx)
	wantCode(t, "unknown token over TLS: list tables", err, codes.Unauthenticated, "")

	// The client certificate alone: principal e2e-client, no grant yet.
	byCert := dialAs(t, c, "")
	certTbl, err := byCert.Open(ctx, "secure")
	wantCode(t, "certificate without a grant: open", err, codes.PermissionDenied, cluster.ClientPrincipal)
	if err := root.GrantRole(ctx, client.Grant{Principal: cluster.ClientPrincipal, Role: "write", Table: "secure"}); err != nil {
		t.Fatalf("grant write to %s: %v", cluster.ClientPrincipal, err)
	}
	took := wait.For(t, 30*time.Second, "the certificate's grant reaches master and tserver", func() error {
		if certTbl == nil {
			if certTbl, err = byCert.Open(ctx, "secure"); err != nil {
				return err
			}
		}
		return certTbl.Put(ctx, "r2", "cf", "q", []byte("by certificate"))
	})
	t.Logf("a grant to the certificate's CN took effect after %v", took)
	row, err := tbl.Get(ctx, "r2")
	if err != nil || len(row.Cells) != 1 || string(row.Cells[0].Value) != "by certificate" {
		t.Fatalf("row written by the certificate's principal = %+v, %v", row, err)
	}
}
