package master

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

func tablesOf(t *testing.T, m *Master) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := m.view(func(r *meta.Reader) error {
		ts, err := r.Tables()
		for _, s := range ts {
			out[s.Name] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createTables(t *testing.T, cl *client, from, to int) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	for i := from; i < to; i++ {
		err := cl.do(ctx, func(mc pb.MasterClient) error {
			_, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema(fmt.Sprintf("t%03d", i), "cf"), SplitKeys: splitKeys(3)})
			if status.Code(err) == codes.AlreadyExists {
				return nil // a retry of a create that committed before the failover
			}
			return err
		})
		if err != nil {
			t.Fatalf("create t%03d: %v", i, err)
		}
	}
}

// TestThreeMasterFailover: three masters on loopback TCP. Followers
// forward; the leader is killed and a new one serves within seconds with
// every committed change; the old leader restarts and catches up from a
// snapshot (its missing log was compacted away); a restarted follower
// catches up from the log.
func TestThreeMasterFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.Raft.TrailingLogs = 4
		cfg.Raft.SnapshotThreshold = 16
		cfg.Lease, cfg.Heartbeat = 2*time.Second, 100*time.Millisecond
	})
	li := c.leader(15 * time.Second)
	cl := newClient(t, c.addrs()...)
	o := newOwners()
	fleet(t, cl, o, 2, 100*time.Millisecond)

	// A follower forwards writes and reads to the leader.
	fi := (li + 1) % 3
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.at(fi).CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("via_follower", "cf")}); err != nil {
		t.Fatalf("create through a follower: %v", err)
	}
	if _, err := cl.at(fi).DescribeTable(ctx, &pb.DescribeTableRequest{Name: "via_follower"}); err != nil {
		t.Fatalf("describe through a follower: %v", err)
	}
	// A call already forwarded once is refused, naming the leader.
	fctx := metadata.AppendToOutgoingContext(ctx, forwardedKey, "test")
	_, err := cl.at(fi).ListTables(fctx, &pb.ListTablesRequest{})
	if addr, ok := apierr.LeaderHint(err); status.Code(err) != codes.Unavailable || !ok || addr != c.peers[li].GRPCAddr {
		t.Fatalf("forwarded call at a follower: %v (leader hint %q, want %q)", err, addr, c.peers[li].GRPCAddr)
	}

	createTables(t, cl, 0, 10)
	servingCounts(t, cl.at(li), "t009", 4)

	// Kill the leader.
	killed := li
	began := time.Now()
	c.stop(killed)
	nl := c.leader(15 * time.Second)
	elected := time.Since(began)
	if _, err := cl.at(nl).CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("after_failover", "cf")}); err != nil {
		t.Fatal(err)
	}
	serving := time.Since(began)
	t.Logf("leader %s killed: %s leader and ready after %v, first write committed after %v", c.peers[killed].ID,
		c.peers[nl].ID, elected, serving)

	// No committed change lost.
	got := tablesOf(t, c.masters[nl])
	for i := 0; i < 10; i++ {
		if !got[fmt.Sprintf("t%03d", i)] {
			t.Fatalf("table t%03d lost in the failover", i)
		}
	}
	if !got["via_follower"] {
		t.Fatal("table via_follower lost")
	}
	// The tservers follow the new leader; tablets keep (or regain) owners.
	servingCounts(t, cl.at(nl), "t005", 4)

	// Enough writes to snapshot and compact the log past what the dead
	// master has, so it must be sent a snapshot.
	createTables(t, cl, 10, 40)
	for _, m := range c.masters {
		if m != nil {
			if err := m.Raft().Snapshot().Error(); err != nil {
				t.Logf("snapshot on %s: %v", m.cfg.ID, err)
			}
		}
	}
	c.start(killed)
	wait.For(t, 20*time.Second, "the restarted master catching up", func() error {
		if n := len(tablesOf(t, c.masters[killed])); n != 42 {
			return fmt.Errorf("%d tables, want 42", n)
		}
		return nil
	})
	// Its missing entries were compacted away on the others, so it caught
	// up by installing a snapshot, which its snapshot store keeps.
	if snaps, err := os.ReadDir(filepath.Join(c.dirs[killed], "raft", "snapshots")); err != nil || len(snaps) == 0 {
		t.Errorf("the restarted master caught up without a snapshot (%v, %v); stats %v", snaps, err, c.masters[killed].Raft().Stats())
	}

	// A follower restarted with its data catches up from the log.
	li = c.leader(10 * time.Second)
	fi = (li + 1) % 3
	c.stop(fi)
	createTables(t, cl, 40, 45)
	c.start(fi)
	wait.For(t, 20*time.Second, "the restarted follower catching up", func() error {
		if n := len(tablesOf(t, c.masters[fi])); n != 47 {
			return fmt.Errorf("%d tables, want 47", n)
		}
		return nil
	})
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6: %v", o.violations)
	}
}

var _ = context.Background
