package master

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"bighive/internal/auth"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// TestGrantsThroughRaft: --bootstrap-admin grants admin once, a grant made
// through a follower is forwarded with the caller's token and checked by
// both, and a heartbeat carries the grants only when the tserver's version
// is behind.
func TestGrantsThroughRaft(t *testing.T) {
	tokens, err := auth.ParseTokens("tokens", strings.NewReader("root-token-0123456789 root\nalice-token-0123456789 alice\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, func(cfg *Config) { cfg.AuthTokens, cfg.BootstrapAdmin = tokens, "root" })
	l := c.leader(20 * time.Second)
	f := (l + 1) % 3
	cl := newClient(t, c.addrs()...)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctxT(t, 20*time.Second), "authorization", "Bearer "+token)
	}
	var gl *pb.GrantList
	wait.For(t, 10*time.Second, "the bootstrap admin", func() error {
		resp, err := cl.at(l).ListGrants(as("root-token-0123456789"), &pb.ListGrantsRequest{})
		gl = resp.GetGrants()
		if err == nil && len(gl.Grants) != 1 {
			err = fmt.Errorf("grants %v", gl.Grants)
		}
		return err
	})
	if g := gl.Grants[0]; g.Principal != "root" || g.Role != auth.RoleAdmin || g.Table != "" {
		t.Fatalf("bootstrap grant = %v", g)
	}
	// alice is not admin: denied by the leader, through the follower.
	_, err = cl.at(f).Grant(as("alice-token-0123456789"), &pb.GrantRequest{Grant: &pb.Grant{Principal: "alice", Role: auth.RoleAdmin}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"alice" lacks role admin on all tables`) {
		t.Fatalf("alice grants herself admin: %v", err)
	}
	// root through the follower: forwarded with the token.
	g := &pb.Grant{Principal: "alice", Role: auth.RoleRead, Table: "orders"}
	if _, err := cl.at(f).Grant(as("root-token-0123456789"), &pb.GrantRequest{Grant: g}); err != nil {
		t.Fatalf("grant through a follower: %v", err)
	}
	if _, err := cl.at(l).Grant(context.Background(), &pb.GrantRequest{Grant: g}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("grant without a token: %v", err)
	}
	resp, err := cl.at(l).ListGrants(as("root-token-0123456789"), &pb.ListGrantsRequest{})
	if err != nil || len(resp.Grants.Grants) != 2 {
		t.Fatalf("grants after the grant: %v, %v", resp, err)
	}
	ver := resp.Grants.Version

	// Heartbeats: a registered tserver gets the list when behind, nothing
	// when current.
	mc := cl.at(l)
	ctx := ctxT(t, 10*time.Second)
	if _, err := mc.RegisterTServer(ctx, &pb.RegisterTServerRequest{Uuid: "ts1", Address: "127.0.0.1:1", Incarnation: 1, WalPrefix: "p1"}); err != nil {
		t.Fatal(err)
	}
	hb, err := mc.Heartbeat(ctx, &pb.HeartbeatRequest{Uuid: "ts1", Incarnation: 1})
	if err != nil || hb.Grants.GetVersion() != ver || len(hb.Grants.GetGrants()) != 2 {
		t.Fatalf("heartbeat at version 0: grants %v, %v; want version %d with 2", hb.GetGrants(), err, ver)
	}
	hb, err = mc.Heartbeat(ctx, &pb.HeartbeatRequest{Uuid: "ts1", Incarnation: 1, GrantsVersion: ver})
	if err != nil || hb.Grants != nil {
		t.Fatalf("heartbeat at the current version: grants %v, %v; want none", hb.GetGrants(), err)
	}
	if _, err := mc.Revoke(as("root-token-0123456789"), &pb.RevokeRequest{Grant: g}); err != nil {
		t.Fatal(err)
	}
	hb, err = mc.Heartbeat(ctx, &pb.HeartbeatRequest{Uuid: "ts1", Incarnation: 1, GrantsVersion: ver})
	if err != nil || hb.Grants.GetVersion() != ver+1 || len(hb.Grants.GetGrants()) != 1 {
		t.Fatalf("heartbeat after a revoke: grants %v, %v", hb.GetGrants(), err)
	}
}
