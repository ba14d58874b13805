package master

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	"bighive/internal/tlsconf/tlstest"
	pb "bighive/proto/bighivepb"
)

// testTLS is a CA and the loaded files of a server certificate and of
// a client one.
func testTLS(t *testing.T) (server, user *tlsconf.Source) {
	t.Helper()
	ca, err := tlstest.NewCA("master test CA")
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string, c *tlstest.Cert, err error) *tlsconf.Source {
		if err != nil {
			t.Fatal(err)
		}
		f, err := tlstest.Files(ca, c, t.TempDir(), name)
		if err != nil {
			t.Fatal(err)
		}
		src, err := tlsconf.Load(f, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	sc, err := ca.Server("master")
	server = load("master", sc, err)
	uc, err := ca.Client("alice")
	return server, load("alice", uc, err)
}

// TestThreeMastersOverTLS: three masters elect a leader and replicate
// over the mutual-TLS raft transport, a follower forwards a client's
// call to the leader over TLS, and after the leader stops the new leader
// has every change.
func TestThreeMastersOverTLS(t *testing.T) {
	t.Parallel()
	server, user := testTLS(t)
	c := startCluster(t, 3, func(cfg *Config) { cfg.TLS = server })
	li := c.leader(15 * time.Second)

	dial := func(i int, src *tlsconf.Source) pb.MasterClient {
		cc, err := grpc.NewClient(c.peers[i].GRPCAddr, limits.GRPCDialOptions(tlsconf.Credentials(src))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return pb.NewMasterClient(cc)
	}
	ctx := ctxT(t, 60*time.Second)
	fi := (li + 1) % 3
	for i := range 3 {
		name := fmt.Sprintf("tls%d", i)
		if _, err := dial(fi, user).CreateTable(ctx, &pb.CreateTableRequest{Schema: schema(name, "cf")}); err != nil {
			t.Fatalf("create %s through follower %s over TLS: %v", name, c.peers[fi].ID, err)
		}
	}
	// A plaintext caller is refused by the follower and by the leader.
	for _, i := range []int{fi, li} {
		_, err := dial(i, nil).ListTables(ctx, &pb.ListTablesRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("plaintext ListTables at %s: %v, want Unavailable", c.peers[i].ID, err)
		}
	}
	// A client certificate is refused an internal method at a follower,
	// before it is forwarded.
	_, err := dial(fi, user).Heartbeat(ctx, &pb.HeartbeatRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Heartbeat with a client certificate at a follower: %v, want PermissionDenied", err)
	}

	c.stop(li)
	nl := c.leader(15 * time.Second)
	got := tablesOf(t, c.masters[nl])
	for i := range 3 {
		if !got[fmt.Sprintf("tls%d", i)] {
			t.Fatalf("table tls%d lost in the failover to %s", i, c.peers[nl].ID)
		}
	}
	// The raft port speaks TLS 1.3 only, and serves a server certificate.
	cfg := user.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	conn, err := tls.Dial("tcp", c.peers[nl].RaftAddr, cfg)
	if err != nil {
		t.Fatalf("TLS dial of the raft port: %v", err)
	}
	if v := conn.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("raft port speaks TLS version %x, want 1.3", v)
	}
	conn.Close()
}
