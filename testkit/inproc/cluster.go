// Package inproc starts a real Bighive cluster inside one test
// process: one master (master.Start: hashicorp/raft on loopback, bbolt)
// and N tservers (tserver.Start: a real write-ahead log with fsync, a real
// block store, gRPC on loopback), all under the test's temporary
// directory. Nothing is faked: tests of the client, the model test and
// anything else that needs the real servers run against it, and the
// helpers restart a tserver, stop one for good (its tablets fail over once
// its lease expires), checkpoint, compact and wait until a table serves.
//
// Tests call Start, then the helpers, which return errors (so one cluster
// can serve several subtests); every server stops in t.Cleanup.
//
// Compared with testkit/cluster (separate OS processes, SIGKILL), this one
// is fast to start and shares the race detector with the test, but a
// "crash" is a clean Close: what it tests is that data survives restarts
// and moves, not that it survives losing unsynced bytes.
package inproc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/ports"
	"bighive/tserver"
)

// Options configure Start. The zero value is one tserver with a 2 s lease.
type Options struct {
	// TServers is the number of tservers (default 1).
	TServers int
	// Lease is the master's tserver lease (default 2 s). A stopped tserver's
	// tablets move after about Lease + 2 heartbeats.
	Lease time.Duration
	// Heartbeat is the heartbeat interval of master and tservers (default
	// 200 ms).
	Heartbeat time.Duration
	// MemLimit is each tserver's write-buffer limit that triggers a
	// checkpoint (default 1 MiB, so tests checkpoint without asking).
	MemLimit int64
	// TServer, if set, adjusts tserver i's options before its first start.
	TServer func(i int, o *tserver.Options)
	// Master, if set, adjusts the master's configuration before it starts.
	Master func(c *master.Config)
	// Logger receives every server's logs. By default they are kept in
	// memory and, if the test fails, written to a file under $TMPDIR whose
	// name the test log gives, with their last lines.
	Logger *slog.Logger
}

// Cluster is a running in-process cluster. Its methods return errors
// rather than failing a test, so that one cluster can serve several
// subtests; they are safe for concurrent use, except that tserver i must
// not be restarted or stopped by two goroutines at once.
type Cluster struct {
	t      testing.TB
	master *master.Master
	root   string
	admin  *client.Client

	mu      sync.Mutex
	servers []*tserver.Server // nil: stopped
	opts    []tserver.Options // what tserver i (re)starts with
	stopped []bool            // stopped for good
	conns   map[string]*grpc.ClientConn
}

// Start starts the cluster and returns once the master lists every tserver
// as live; t.Cleanup stops it.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.TServers <= 0 {
		opts.TServers = 1
	}
	if opts.Lease <= 0 {
		opts.Lease = 2 * time.Second
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 200 * time.Millisecond
	}
	if opts.MemLimit <= 0 {
		opts.MemLimit = 1 << 20
	}
	if opts.Logger == nil {
		logs := &logBuffer{}
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		t.Cleanup(func() { logs.dumpIfFailed(t) }) // runs last: the servers are closed
	}
	mc := master.Config{Lease: opts.Lease, Heartbeat: opts.Heartbeat, Logger: opts.Logger}
	if opts.Master != nil {
		opts.Master(&mc)
	}
	m := StartMaster(t, mc)
	c := &Cluster{t: t, master: m, root: filepath.Join(t.TempDir(), "root"), conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(c.close)
	for i := 0; i < opts.TServers; i++ {
		o := tserver.Options{Listen: freeAddr(t), Masters: []string{m.Addr()}, Root: c.root, MemLimit: opts.MemLimit,
			HeartbeatInterval: opts.Heartbeat, Logger: opts.Logger.With("i", i)}
		if opts.TServer != nil {
			opts.TServer(i, &o)
		}
		c.opts = append(c.opts, o)
		c.servers = append(c.servers, nil)
		c.stopped = append(c.stopped, false)
		if err := c.start(i); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	c.admin, err = client.Dial(context.Background(), c.MasterAddrs(), client.WithBackoff(5*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.waitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitRegistered polls until the master lists every tserver as live, so
// that the tablets of the tables a test creates next spread over all.
func (c *Cluster) waitRegistered(ctx context.Context) error {
	for {
		servers, err := c.admin.TServers(ctx)
		live := map[string]bool{}
		for _, s := range servers {
			live[s.Address] = s.Live
		}
		missing := 0
		for _, o := range c.opts {
			if !live[o.Listen] {
				missing++
			}
		}
		if err == nil && missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("inproc: %d of %d tservers not live at the master (%v): %w", missing, len(c.opts), err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) close() {
	if c.admin != nil {
		c.admin.Close()
	}
	c.mu.Lock()
	servers := c.servers
	c.servers = make([]*tserver.Server, len(servers))
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		if s != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.Close() }()
		}
	}
	wg.Wait()
	c.master.Close()
}

// logBuffer keeps the servers' logs of one cluster in memory, up to
// maxLogBytes.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
}

const maxLogBytes = 64 << 20

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > maxLogBytes {
		b.dropped += int64(len(p))
		return len(p), nil
	}
	return b.buf.Write(p)
}

// dumpIfFailed writes the logs to a file and their tail to the test log
// when the test failed.
func (b *logBuffer) dumpIfFailed(t testing.TB) {
	if !t.Failed() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := os.CreateTemp("", "inproc-*.log")
	if err != nil {
		t.Logf("inproc: cannot keep the server logs: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(b.buf.Bytes()); err != nil {
		t.Logf("inproc: write %s: %v", f.Name(), err)
	}
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	tail := lines[max(0, len(lines)-80):]
	t.Logf("inproc: the servers' logs are in %s (%d lines, %d bytes dropped over the limit); the last %d:\n%s",
		f.Name(), len(lines), b.dropped, len(tail), strings.Join(tail, "\n"))
}

// StartMaster starts a master alone in a fresh directory, closed when the
// test ends: Start's, and the master of tests that bring their own
// tservers (or fakes of them). It sets cfg's ID, Dir, RaftAddr and Raft:
// the master is raft's only voter, so raft's timeouts only decide how soon
// it elects itself, 1 to 2 s with raft's defaults, which every test would
// wait for; here at once.
func StartMaster(t testing.TB, cfg master.Config) *master.Master {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := raft.DefaultConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	cfg.ID, cfg.Dir, cfg.RaftAddr, cfg.Raft = "m1", filepath.Join(t.TempDir(), "master"), freeAddr(t), rc
	m, err := master.Start(cfg, lis)
	if err != nil {
		lis.Close()
		t.Fatalf("inproc: start master: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var freeAddr = ports.AddrT

// start starts tserver i with its options (again after a Close: same
// address, so same log prefix and identity, same root).
func (c *Cluster) start(i int) error {
	s, err := tserver.Start(context.Background(), c.opts[i])
	if err != nil {
		return fmt.Errorf("inproc: start tserver %d: %w", i, err)
	}
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
	return nil
}

// MasterAddrs returns the master's gRPC address, for client.Dial.
func (c *Cluster) MasterAddrs() []string { return []string{c.master.Addr()} }

// Master returns the master.
func (c *Cluster) Master() *master.Master { return c.master }

// Root is the shared root directory of the tservers.
func (c *Cluster) Root() string { return c.root }

// TServers is the number of tservers, stopped ones included.
func (c *Cluster) TServers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.servers)
}

// TServer returns tserver i, or nil while it is stopped.
func (c *Cluster) TServer(i int) *tserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// TServerAddr is tserver i's address (it keeps it across restarts).
func (c *Cluster) TServerAddr(i int) string { return c.opts[i].Listen }

// Running returns the indexes of the tservers that run.
func (c *Cluster) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, s := range c.servers {
		if s != nil {
			out = append(out, i)
		}
	}
	return out
}

// Client returns a new client of the cluster, closed when the cluster
// stops.
func (c *Cluster) Client(opts ...client.Option) *client.Client {
	cl, err := client.Dial(context.Background(), c.MasterAddrs(), opts...)
	if err != nil {
		panic(err) // Dial fails only without addresses
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// RestartTServer closes tserver i cleanly and starts it again on the same
// address and root: it reloads its tablets from their TSFiles and replays
// its log. It returns once the tserver listens; use WaitServing before
// relying on its tablets.
func (c *Cluster) RestartTServer(i int) error {
	c.mu.Lock()
	s, stopped := c.servers[i], c.stopped[i]
	if !stopped {
		c.servers[i] = nil
	}
	c.mu.Unlock()
	if stopped {
		return fmt.Errorf("inproc: tserver %d was stopped for good", i)
	}
	if s != nil {
		if err := s.Close(); err != nil {
			return fmt.Errorf("inproc: close tserver %d: %w", i, err)
		}
	}
	return c.start(i)
}

// StopTServer closes tserver i for good. The master declares it dead once
// its lease expires and moves its tablets, recovered from its log, to the
// others; WaitServing waits for that.
func (c *Cluster) StopTServer(i int) error {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.stopped[i] = true
	c.mu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			return fmt.Errorf("inproc: close tserver %d: %w", i, err)
		}
	}
	return nil
}

// TServerClient returns a gRPC client of tserver i's TServer service (for
// requests the client library would refuse to send), or an error while it
// is stopped.
func (c *Cluster) TServerClient(i int) (pb.TServerClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] == nil {
		return nil, fmt.Errorf("inproc: tserver %d is stopped", i)
	}
	addr := c.opts[i].Listen
	cc, ok := c.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, limits.GRPCDialOptions(tlsconf.Credentials(nil))...)
		if err != nil {
			return nil, fmt.Errorf("inproc: dial %s: %w", addr, err)
		}
		c.conns[addr] = cc
	}
	return pb.NewTServerClient(cc), nil
}

// Checkpoint checkpoints every running tserver: its write buffers become
// TSFiles and its log rolls.
func (c *Cluster) Checkpoint(ctx context.Context) error {
	return c.eachTServer(ctx, "checkpoint", func(ctx context.Context, ts pb.TServerClient) error {
		_, err := ts.Checkpoint(ctx, &pb.CheckpointRequest{})
		return err
	})
}

// Compact compacts every tablet of every running tserver: a minor
// compaction merges TSFiles; a major one also drops what deletes and the
// families' GC policies hide.
func (c *Cluster) Compact(ctx context.Context, major bool) error {
	return c.eachTServer(ctx, fmt.Sprintf("compact (major %v)", major), func(ctx context.Context, ts pb.TServerClient) error {
		_, err := ts.Compact(ctx, &pb.CompactRequest{Major: major})
		return err
	})
}

// eachTServer calls fn for every running tserver, again while it answers
// Unavailable (a tablet moving away meanwhile), until ctx ends.
func (c *Cluster) eachTServer(ctx context.Context, what string, fn func(ctx context.Context, ts pb.TServerClient) error) error {
	for _, i := range c.Running() {
		ts, err := c.TServerClient(i)
		if err != nil {
			return err
		}
		for {
			err = fn(ctx, ts)
			if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err != nil {
			return fmt.Errorf("inproc: %s tserver %d: %w", what, i, err)
		}
	}
	return nil
}

// CreateTable creates the table and waits until it serves.
func (c *Cluster) CreateTable(ctx context.Context, spec client.TableSpec) error {
	if err := c.admin.CreateTable(ctx, spec); err != nil {
		return fmt.Errorf("inproc: create table %s: %w", spec.Name, err)
	}
	return c.WaitServing(ctx, spec.Name)
}

// WaitServing polls until every tablet of table is served: the master
// names a running tserver for it, and that tserver reports it serving at
// the master's epoch (loaded and recovered). It fails when ctx ends first,
// saying what it waited for.
func (c *Cluster) WaitServing(ctx context.Context, table string) error {
	for {
		ok, why := c.serving(ctx, table)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("inproc: table %s not serving: %s: %w", table, why, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) serving(ctx context.Context, table string) (bool, string) {
	tablets, err := c.admin.Tablets(ctx, table)
	if err != nil {
		return false, err.Error()
	}
	if len(tablets) == 0 {
		return false, "no tablets"
	}
	byAddr := map[string]int{}
	for _, i := range c.Running() {
		byAddr[c.opts[i].Listen] = i
	}
	statuses := map[int]map[string]*pb.TabletStatus{}
	for _, tb := range tablets {
		i, ok := byAddr[tb.TServer]
		if tb.State != "serving" || !ok {
			return false, fmt.Sprintf("tablet %s is %s on %q", tb.ID, tb.State, tb.TServer)
		}
		if _, ok := statuses[i]; !ok {
			ts, err := c.TServerClient(i)
			if err != nil {
				return false, err.Error()
			}
			resp, err := ts.Status(ctx, &pb.StatusRequest{})
			if err != nil {
				return false, fmt.Sprintf("status of tserver %d: %v", i, err)
			}
			statuses[i] = map[string]*pb.TabletStatus{}
			for _, st := range resp.Tablets {
				statuses[i][st.TabletId] = st
			}
		}
		st := statuses[i][tb.ID]
		if st == nil || st.State != "serving" || st.Epoch != tb.Epoch {
			return false, fmt.Sprintf("tablet %s at epoch %d: tserver %d reports %v", tb.ID, tb.Epoch, i, st)
		}
	}
	return true, ""
}
