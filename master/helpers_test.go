package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "bighive/proto/bighivepb"
	"bighive/testkit/ports"
	"bighive/testkit/wait"
)

func testLogger() *slog.Logger {
	if os.Getenv("MASTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func fastRaft() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 20
	c.SnapshotInterval = time.Hour
	return c
}

// testTiming: fast leases for tests.
func testConfig(id, dir string) Config {
	return Config{ID: id, Dir: dir, Raft: fastRaft(), Logger: testLogger(),
		Heartbeat: 50 * time.Millisecond, Lease: 500 * time.Millisecond, DeadMargin: 100 * time.Millisecond,
		ResendInterval: 150 * time.Millisecond, TickInterval: 25 * time.Millisecond}
}

var freeAddr = ports.AddrT

// cluster is n masters in this process on loopback TCP.
type cluster struct {
	t       *testing.T
	peers   []Peer
	dirs    []string
	masters []*Master // nil when stopped
	tweak   func(*Config)
}

func startCluster(t *testing.T, n int, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, tweak: tweak, masters: make([]*Master, n)}
	for i := 0; i < n; i++ {
		c.peers = append(c.peers, Peer{ID: fmt.Sprintf("m%d", i+1), RaftAddr: freeAddr(t), GRPCAddr: freeAddr(t)})
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprintf("m%d", i+1)))
	}
	for i := range c.peers {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.masters {
			c.stop(i)
		}
	})
	return c
}

func (c *cluster) start(i int) {
	c.t.Helper()
	cfg := testConfig(c.peers[i].ID, c.dirs[i])
	cfg.RaftAddr = c.peers[i].RaftAddr
	if len(c.peers) > 1 {
		cfg.Peers = c.peers
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	var lis net.Listener
	// The port may linger briefly after a stop.
	wait.For(c.t, time.Second, "a listener on "+c.peers[i].GRPCAddr, func() (err error) {
		lis, err = net.Listen("tcp", c.peers[i].GRPCAddr)
		return err
	})
	m, err := Start(cfg, lis)
	if err != nil {
		c.t.Fatal(err)
	}
	c.masters[i] = m
}

func (c *cluster) stop(i int) {
	if c.masters[i] != nil {
		if err := c.masters[i].Close(); err != nil {
			c.t.Logf("close %s: %v", c.peers[i].ID, err)
		}
		c.masters[i] = nil
	}
}

// leader waits until one running master is the ready leader.
func (c *cluster) leader(timeout time.Duration) int {
	c.t.Helper()
	leader := -1
	wait.For(c.t, timeout, "a leader", func() error {
		for i, m := range c.masters {
			if m != nil && m.IsLeader() {
				leader = i
				return nil
			}
		}
		return errors.New("no running master is the ready leader")
	})
	return leader
}

func (c *cluster) addrs() []string {
	var out []string
	for _, p := range c.peers {
		out = append(out, p.GRPCAddr)
	}
	return out
}

// client talks to a set of masters, moving on when one is unavailable.
type client struct {
	mu    sync.Mutex
	conns []*grpc.ClientConn
	next  int
}

func newClient(t *testing.T, addrs ...string) *client {
	t.Helper()
	c := &client{}
	for _, a := range addrs {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		c.conns = append(c.conns, conn)
	}
	t.Cleanup(func() {
		for _, cc := range c.conns {
			_ = cc.Close()
		}
	})
	return c
}

// single returns a client bound to conns[i] only.
func (c *client) at(i int) pb.MasterClient { return pb.NewMasterClient(c.conns[i]) }

// do runs f against the masters, retrying Unavailable ones until ctx ends.
func (c *client) do(ctx context.Context, f func(pb.MasterClient) error) error {
	for {
		c.mu.Lock()
		i := c.next
		c.mu.Unlock()
		err := f(pb.NewMasterClient(c.conns[i]))
		if status.Code(err) != codes.Unavailable {
			return err
		}
		c.mu.Lock()
		c.next = (i + 1) % len(c.conns)
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func schema(name string, fams ...string) *pb.TableSchema {
	s := &pb.TableSchema{Name: name}
	for _, f := range fams {
		s.Families = append(s.Families, &pb.FamilySpec{Name: f, MaxVersions: 1})
	}
	return s
}

func splitKeys(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("row%06d", i+1))
	}
	return out
}

// servingN is nil when f serves n tablets.
func servingN(f *fakeTS, n int) error {
	if got := len(f.serving()); got != n {
		return fmt.Errorf("tserver %s serves %d tablets, want %d", f.uuid, got, n)
	}
	return nil
}
