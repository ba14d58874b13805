package auth

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "bighive/proto/bighivepb"
)

// TestEveryMethodListed fails when a method of the Master or TServer
// service has no line in Methods (it would need admin on every table).
func TestEveryMethodListed(t *testing.T) {
	for _, sd := range []protoreflect.ServiceDescriptor{
		pb.File_bighivepb_master_proto.Services().ByName("Master"),
		pb.File_bighivepb_tserver_proto.Services().ByName("TServer"),
	} {
		for i := 0; i < sd.Methods().Len(); i++ {
			m := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(i).Name())
			if _, ok := Methods[m]; !ok {
				t.Errorf("%s is not in Methods", m)
			}
		}
	}
}

func testChecker(t *testing.T, grants ...*pb.Grant) *Checker {
	t.Helper()
	tok, err := ParseTokens("t", strings.NewReader(
		"token-of-alice-0001 alice\ntoken-of-bob-00001 bob\ntoken-of-root-0001 root\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Tokens: tok, TabletTable: func(_ context.Context, id string) (string, error) {
		if table, ok := strings.CutPrefix(id, "tablet-of-"); ok {
			return table, nil
		}
		return "", status.Errorf(codes.NotFound, "tablet %s not served here", id)
	}})
	c.SetGrants(NewGrants(1, grants))
	return c
}

func withToken(tok string) context.Context {
	if tok == "" {
		return context.Background()
	}
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
}

// TestMethodRoles is the method → role table seen through the unary
// interceptor: each case is one call, its expected code, and whether the
// handler ran.
func TestMethodRoles(t *testing.T) {
	c := testChecker(t,
		&pb.Grant{Principal: "alice", Role: RoleWrite, Table: "orders"},
		&pb.Grant{Principal: "bob", Role: RoleRead, Table: "orders"},
		&pb.Grant{Principal: "root", Role: RoleAdmin},
	)
	const alice, bob, root = "token-of-alice-0001", "token-of-bob-00001", "token-of-root-0001"
	cases := []struct {
		name, token, method string
		req                 any
		want                codes.Code
		msg                 string
	}{
		{"no token", "", tserverSvc + "MutateRow", &pb.MutateRowRequest{TabletId: "tablet-of-orders"}, codes.Unauthenticated, "no credential"},
		{"unknown token", "token-of-nobody-01", tserverSvc + "ReadRow", &pb.ReadRowRequest{TabletId: "tablet-of-orders"}, codes.Unauthenticated, "unknown bearer token"},
		{"write writes", alice, tserverSvc + "MutateRow", &pb.MutateRowRequest{TabletId: "tablet-of-orders"}, codes.OK, ""},
		{"write reads", alice, tserverSvc + "ScanRows", &pb.ScanRowsRequest{TabletId: "tablet-of-orders"}, codes.OK, ""},
		{"write on another table", alice, tserverSvc + "MutateRows", &pb.MutateRowsRequest{TabletId: "tablet-of-users"}, codes.PermissionDenied, `principal "alice" lacks role write on table users`},
		{"read writes", bob, tserverSvc + "CheckAndMutateRow", &pb.CheckAndMutateRowRequest{TabletId: "tablet-of-orders"}, codes.PermissionDenied, `principal "bob" lacks role write on table orders`},
		{"read reads", bob, tserverSvc + "ReadRow", &pb.ReadRowRequest{TabletId: "tablet-of-orders"}, codes.OK, ""},
		{"read locations", bob, masterSvc + "GetTableLocations", &pb.GetTableLocationsRequest{Table: "orders"}, codes.OK, ""},
		{"write DDL", alice, masterSvc + "DeleteTable", &pb.DeleteTableRequest{Name: "orders"}, codes.PermissionDenied, `principal "alice" lacks role admin on table orders`},
		{"write creates", alice, masterSvc + "CreateTable", &pb.CreateTableRequest{Schema: &pb.TableSchema{Name: "orders"}}, codes.PermissionDenied, "lacks role admin on table orders"},
		{"admin creates", root, masterSvc + "CreateTable", &pb.CreateTableRequest{Schema: &pb.TableSchema{Name: "x"}}, codes.OK, ""},
		{"admin writes anywhere", root, tserverSvc + "MutateRow", &pb.MutateRowRequest{TabletId: "tablet-of-users"}, codes.OK, ""},
		{"grant needs admin on all", alice, masterSvc + "Grant", &pb.GrantRequest{}, codes.PermissionDenied, "lacks role admin on all tables"},
		{"admin grants", root, masterSvc + "ListGrants", &pb.ListGrantsRequest{}, codes.OK, ""},
		{"list tables authenticated", bob, masterSvc + "ListTables", &pb.ListTablesRequest{}, codes.OK, ""},
		{"list tables anonymous", "", masterSvc + "ListTables", &pb.ListTablesRequest{}, codes.Unauthenticated, ""},
		{"heartbeat internal", "", masterSvc + "Heartbeat", &pb.HeartbeatRequest{}, codes.OK, ""},
		{"unlisted method", bob, "/other.Service/Do", &pb.PingRequest{}, codes.PermissionDenied, "lacks role admin on all tables"},
		{"health public", "", "/grpc.health.v1.Health/Check", &pb.PingRequest{}, codes.OK, ""},
		{"tablet not served", alice, tserverSvc + "MutateRow", &pb.MutateRowRequest{TabletId: "t9"}, codes.NotFound, "not served"},
		{"compact every tablet", alice, tserverSvc + "Compact", &pb.CompactRequest{}, codes.PermissionDenied, "admin on all tables"},
	}
	ic := c.UnaryInterceptor()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			_, err := ic(withToken(tc.token), tc.req, &grpc.UnaryServerInfo{FullMethod: tc.method},
				func(ctx context.Context, _ any) (any, error) { ran = true; return nil, nil })
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.want)
			}
			if ran != (tc.want == codes.OK) {
				t.Fatalf("handler ran = %v with code %v", ran, tc.want)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.msg)
			}
		})
	}
}

func TestCheckPerCommand(t *testing.T) {
	c := testChecker(t, &pb.Grant{Principal: "bob", Role: RoleRead, Table: "orders"})
	ctx := withToken("token-of-bob-00001")
	if err := c.Check(ctx, BatchReadRow, RoleRead, "orders"); err != nil {
		t.Fatalf("read: %v", err)
	}
	err := c.Check(ctx, BatchMutateRow, RoleWrite, "orders")
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"bob" lacks role write on table orders`) {
		t.Fatalf("write: %v", err)
	}
	// Revoking is replacing the set.
	c.SetGrants(NewGrants(2, nil))
	if err := c.Check(ctx, BatchReadRow, RoleRead, "orders"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("read after revoke: %v", err)
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		got, err := ParseRole(RoleName(r))
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", RoleName(r), got, err)
		}
	}
	if _, err := ParseRole("owner"); err == nil || !strings.Contains(err.Error(), `"owner"`) {
		t.Errorf("ParseRole(owner) err = %v", err)
	}
}
