package fleetsim

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"bighive/master"
	"bighive/meta"
)

// Masters is a raft group of real masters in this process.
type Masters struct {
	tb    testing.TB
	Peers []master.Peer
	Dirs  []string
	M     []*master.Master // nil while stopped
	tweak func(*master.Config)
}

// RaftConfig is raft's default configuration with twice its timeouts
// (the masters share 2 loaded cores with the fleet; raft's defaults made
// leaders flap there) and automatic snapshots off (scenarios take them).
func RaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 2 * time.Second
	c.ElectionTimeout = 2 * time.Second
	c.LeaderLeaseTimeout = time.Second
	c.SnapshotThreshold = 1 << 40
	c.SnapshotInterval = 24 * time.Hour
	return c
}

// StartMasters starts n masters in fresh directories under tb.TempDir().
// The masters keep the production heartbeat (1 s) and lease (5 s) unless
// tweak changes them; tweak may also change the raft configuration.
func StartMasters(tb testing.TB, n int, tweak func(*master.Config)) *Masters {
	tb.Helper()
	c := &Masters{tb: tb, tweak: tweak, M: make([]*master.Master, n)}
	root := tb.TempDir()
	for i := 0; i < n; i++ {
		c.Peers = append(c.Peers, master.Peer{ID: fmt.Sprintf("m%d", i+1), RaftAddr: freeAddr(tb), GRPCAddr: freeAddr(tb)})
		c.Dirs = append(c.Dirs, filepath.Join(root, fmt.Sprintf("m%d", i+1)))
	}
	for i := range c.Peers {
		c.Start(i)
	}
	tb.Cleanup(func() {
		for i := range c.M {
			c.Stop(i)
		}
	})
	return c
}

// logger discards, unless FLEETSIM_LOG is set: then Info and above go to
// stderr.
func logger(id string) *slog.Logger {
	if os.Getenv("FLEETSIM_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("master", id)
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	a := l.Addr().String()
	_ = l.Close()
	return a
}

// Start (re)starts master i on its directory and ports.
func (c *Masters) Start(i int) {
	c.tb.Helper()
	cfg := master.Config{ID: c.Peers[i].ID, Dir: c.Dirs[i], RaftAddr: c.Peers[i].RaftAddr,
		Raft: RaftConfig(), Logger: logger(c.Peers[i].ID)}
	if len(c.Peers) > 1 {
		cfg.Peers = c.Peers
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	var lis net.Listener
	var err error
	for try := 0; try < 100; try++ { // the port may linger briefly after a stop
		if lis, err = net.Listen("tcp", c.Peers[i].GRPCAddr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.tb.Fatal(err)
	}
	m, err := master.Start(cfg, lis)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.M[i] = m
}

// Stop shuts master i down; its directory stays for a later Start.
func (c *Masters) Stop(i int) {
	if c.M[i] != nil {
		if err := c.M[i].Close(); err != nil {
			c.tb.Logf("close %s: %v", c.Peers[i].ID, err)
		}
		c.M[i] = nil
	}
}

// Addrs are the masters' gRPC addresses.
func (c *Masters) Addrs() []string {
	var out []string
	for _, p := range c.Peers {
		out = append(out, p.GRPCAddr)
	}
	return out
}

// Leader waits until a running master is the ready leader and returns its
// index.
func (c *Masters) Leader(ctx context.Context) (int, error) {
	for {
		for i, m := range c.M {
			if m != nil && m.IsLeader() {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("fleetsim: no ready leader: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Dump is master i's metadata as meta.Reader.Dump writes it, with its
// applied raft index.
func (c *Masters) Dump(i int) (dump []byte, applied uint64, err error) {
	var buf bytes.Buffer
	err = c.M[i].View(func(r *meta.Reader) error {
		applied = r.AppliedIndex()
		return r.Dump(&buf)
	})
	return buf.Bytes(), applied, err
}

// WaitAgree waits until every running master has applied the same index
// and returns their dumps, which tests compare byte for byte.
func (c *Masters) WaitAgree(ctx context.Context) (map[int][]byte, error) {
	for {
		dumps := map[int][]byte{}
		idx := map[uint64]bool{}
		var err error
		for i, m := range c.M {
			if m == nil {
				continue
			}
			var a uint64
			if dumps[i], a, err = c.Dump(i); err != nil {
				return nil, err
			}
			idx[a] = true
		}
		if len(idx) == 1 {
			return dumps, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fleetsim: masters did not reach one applied index (%v): %w", idx, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
