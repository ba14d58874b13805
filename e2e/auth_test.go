package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// The tokens of TestAuthMatrix: root is --bootstrap-admin; writer and
// reader get their grants through the CLI.
const (
	rootToken   = "root-token-0123456789"
	writerToken = "writer-token-0123456789"
	readerToken = "reader-token-0123456789"
)

const authHeartbeat = 300 * time.Millisecond

// authCluster starts one master and one tserver with --auth-tokens and
// --bootstrap-admin root, and returns the cluster and a root client.
func authCluster(t *testing.T) (*cluster.Cluster, *client.Client) {
	t.Helper()
	return authClusterWith(t, cluster.Options{})
}

// authClusterWith is authCluster on top of opts (TLS, say).
func authClusterWith(t *testing.T, opts cluster.Options) (*cluster.Cluster, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	file := fmt.Sprintf("# test principals\n%s root\n%s writer\n%s reader\n", rootToken, writerToken, readerToken)
	if err := os.WriteFile(tokens, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.Masters, opts.TServers, opts.Heartbeat, opts.Lease = 1, 1, authHeartbeat, 3*time.Second
	opts.AuthTokens, opts.BootstrapAdmin, opts.Token = tokens, "root", rootToken
	c, _ := startCluster(t, opts)
	return c, dialAs(t, c, rootToken)
}

func dialAs(t *testing.T, c *cluster.Cluster, token string, opts ...client.Option) *client.Client {
	t.Helper()
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	opts = append(opts, client.WithRetryTimeout(10*time.Second))
	cl, err := c.Client(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// bighive runs the CLI against c with extra environment and returns its
// stdout, stderr and error.
func bighive(t *testing.T, c *cluster.Cluster, env []string, args ...string) (string, string, error) {
	t.Helper()
	bin, err := cluster.Binary("bighive")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args, "--masters", strings.Join(c.MasterAddrs(), ","), "--timeout", "20s")...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func wantCode(t *testing.T, what string, err error, want codes.Code, msg string) {
	t.Helper()
	if got := apierr.CodeOf(err); got != want {
		t.Fatalf("%s: code %v (%v), want %v", what, got, err, want)
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: %v, want it to name %q", what, err, msg)
	}
}

// TestAuthMatrix runs the callers-and-permissions cases against real
// processes: credentials, roles per table, DDL, admin, a revoke, and the
// CLI's grant, revoke and grants.
func TestAuthMatrix(t *testing.T) {
	skipShort(t, "callers and permissions")
	c, root := authCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, name := range []string{"orders", "other"} {
		if err := root.CreateTable(ctx, client.TableSpec{Name: name, Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
			t.Fatalf("admin create %s: %v", name, err)
		}
		if err := c.WaitServing(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	// Grants through the CLI: --token and BIGHIVE_TOKEN.
	if out, errOut, err := bighive(t, c, nil, "grant", "writer", "write", "orders", "--token", rootToken); err != nil {
		t.Fatalf("bighive grant: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := bighive(t, c, []string{"BIGHIVE_TOKEN=" + rootToken}, "grant", "reader", "read", "orders"); err != nil {
		t.Fatalf("bighive grant (env token): %v\n%s%s", err, out, errOut)
	}
	out, errOut, err := bighive(t, c, []string{"BIGHIVE_TOKEN=" + rootToken}, "grants", "--json")
	if err != nil {
		t.Fatalf("bighive grants: %v\n%s", err, errOut)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var g struct{ Principal, Role, Table string }
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("bighive grants line %q: %v", line, err)
		}
		listed = append(listed, g.Principal+"/"+g.Role+"/"+g.Table)
	}
	if want := "reader/read/orders root/admin/ writer/write/orders"; strings.Join(listed, " ") != want {
		t.Fatalf("bighive grants = %v, want %s", listed, want)
	}
	// The grants commands are admin only.
	if _, errOut, err := bighive(t, c, nil, "grants", "--token", writerToken); err == nil || !strings.Contains(errOut, "PermissionDenied") {
		t.Fatalf("bighive grants as writer: %v, stderr %q; want PermissionDenied", err, errOut)
	}
	if _, errOut, err := bighive(t, c, nil, "grants"); err == nil || !strings.Contains(errOut, "Unauthenticated") {
		t.Fatalf("bighive grants without a token: %v, stderr %q; want Unauthenticated", err, errOut)
	}

	// No token, an unknown token: Unauthenticated, at the master and the tserver.
	for _, tc := range []struct{ name, token string }{{"no token", ""}, {"unknown token", "not-a-token-0123456789"}} {
		cl := dialAs(t, c, tc.token)
		_, err := cl.ListTables(ctx)
		wantCode(t, tc.name+": list tables", err, codes.Unauthenticated, "")
		_, err = cl.Open(ctx, "orders")
		wantCode(t, tc.name+": open", err, codes.Unauthenticated, "")
	}

	writer := dialAs(t, c, writerToken)
	wOrders, err := writer.Open(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	// The tserver learns the grants with a heartbeat.
	took := wait.For(t, 30*time.Second, "writer's grant reaches the tserver", func() error {
		return wOrders.Put(ctx, "w1", "cf", "q", []byte("by writer"))
	})
	t.Logf("a new grant reached the tserver after %v (heartbeat %v)", took, authHeartbeat)
	// The reader's grant was made after the writer's and may come with a
	// later heartbeat.
	rFirst, err := dialAs(t, c, readerToken).Open(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "reader's grant reaches the tserver", func() error {
		_, err := rFirst.Get(ctx, "w1")
		return err
	})

	// read writing: PermissionDenied, on the batch stream and on unary
	// calls, and the row is absent afterwards.
	for _, tc := range []struct {
		name string
		opts []client.Option
	}{{"batch stream", nil}, {"unary", []client.Option{client.WithBatchStream(false)}}} {
		reader := dialAs(t, c, readerToken, tc.opts...)
		rOrders, err := reader.Open(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		row := "r-" + strings.ReplaceAll(tc.name, " ", "-")
		wantCode(t, "read writes ("+tc.name+")", rOrders.Put(ctx, row, "cf", "q", []byte("x")), codes.PermissionDenied,
			`principal "reader" lacks role write on table orders`)
		got, err := rOrders.Get(ctx, "w1")
		if err != nil || len(got.Cells) != 1 {
			t.Fatalf("read reads (%s): %+v, %v", tc.name, got, err)
		}
		rootOrders, err := root.Open(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if r, err := rootOrders.Get(ctx, row); err != nil || len(r.Cells) != 0 {
			t.Fatalf("row %s after the denied write: %+v, %v; want absent", row, r, err)
		}
	}

	// write on another table: PermissionDenied (opening it is reading it).
	_, err = writer.Open(ctx, "other")
	wantCode(t, "write opens another table", err, codes.PermissionDenied, `principal "writer" lacks role read on table other`)
	rootOther, err := root.Open(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	// write doing DDL: PermissionDenied, and the table stays.
	wantCode(t, "write deletes a table", writer.DeleteTable(ctx, "orders"), codes.PermissionDenied, "lacks role admin on table orders")
	wantCode(t, "write creates a table", writer.CreateTable(ctx, client.TableSpec{Name: "mine", Families: []client.FamilySpec{{Name: "cf"}}}),
		codes.PermissionDenied, "lacks role admin on table mine")
	tables, err := root.ListTables(ctx)
	if err != nil || strings.Join(tables, ",") != "orders,other" {
		t.Fatalf("tables after denied DDL: %v, %v", tables, err)
	}
	// admin: everything.
	if err := rootOther.Put(ctx, "a1", "cf", "q", []byte("by root")); err != nil {
		t.Fatalf("admin put: %v", err)
	}
	if err := root.DeleteTable(ctx, "other"); err != nil {
		t.Fatalf("admin delete table: %v", err)
	}

	// A revoke: the writer's next writes are denied within a heartbeat
	// (polled with a deadline; the time is logged, not asserted).
	if out, errOut, err := bighive(t, c, nil, "revoke", "writer", "write", "orders", "--token", rootToken); err != nil {
		t.Fatalf("bighive revoke: %v\n%s%s", err, out, errOut)
	}
	revoked := time.Now()
	took = wait.For(t, 30*time.Second, "the revoke reaches the tserver", func() error {
		err := wOrders.Put(ctx, "w2", "cf", "q", []byte("after revoke"))
		if apierr.CodeOf(err) == codes.PermissionDenied {
			return nil
		}
		return fmt.Errorf("put after revoke: %v", err)
	})
	t.Logf("a revoke was denied at the tserver %v after the CLI returned (first denied attempt after %v; heartbeat %v)",
		time.Since(revoked), took, authHeartbeat)
	if _, _, err := bighive(t, c, nil, "revoke", "writer", "write", "orders", "--token", rootToken); err == nil {
		t.Fatal("revoking a grant twice succeeded")
	}
}

// TestAuthBigtableAPI: the Bigtable API endpoint applies the same rules,
// with the token in the standard authorization metadata.
func TestAuthBigtableAPI(t *testing.T) {
	skipShort(t, "callers and permissions of the Bigtable API")
	c, root := authCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.CreateTable(ctx, client.TableSpec{Name: "api", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	if err := root.GrantRole(ctx, client.Grant{Principal: "reader", Role: "read", Table: "api"}); err != nil {
		t.Fatal(err)
	}
	mutate := func(token, row string) error {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(client.TokenCredentials(token)))
		}
		cc, err := grpc.NewClient(c.BigtableAddr(), opts...)
		if err != nil {
			return err
		}
		defer cc.Close()
		_, err = btpb.NewBigtableClient(cc).MutateRow(ctx, &btpb.MutateRowRequest{
			TableName: "projects/p/instances/i/tables/api", RowKey: []byte(row),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "cf", ColumnQualifier: []byte("q"), TimestampMicros: 1000, Value: []byte("v")}}}}})
		return err
	}
	wantCode(t, "no token", mutate("", "x"), codes.Unauthenticated, "")
	wantCode(t, "unknown token", mutate("not-a-token-0123456789", "x"), codes.Unauthenticated, "")
	wait.For(t, 30*time.Second, "the reader's grant reaches the tserver", func() error {
		if err := mutate(readerToken, "r1"); apierr.CodeOf(err) != codes.PermissionDenied {
			return fmt.Errorf("reader: %v", err)
		}
		return nil
	})
	if err := mutate(rootToken, "a1"); err != nil {
		t.Fatalf("admin through the API: %v", err)
	}
	tbl, err := root.Open(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	for row, want := range map[string]int{"r1": 0, "a1": 1} {
		r, err := tbl.Get(ctx, row)
		if err != nil || len(r.Cells) != want {
			t.Fatalf("row %s: %+v, %v; want %d cells", row, r, err, want)
		}
	}
}
