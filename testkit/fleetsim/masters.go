package fleetsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"bighive/master"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/ports"
	"bighive/testkit/wait"
)

// Masters is a raft group of real masters: in this process
// (StartMasters), or each its own OS process of the cmd/master binary
// (StartMasterProcs).
type Masters struct {
	tb    testing.TB
	Peers []master.Peer
	Dirs  []string
	M     []*master.Master // in this process; nil while stopped, and always with processes
	tweak func(*master.Config)

	binary    string  // the cmd/master binary; "" for masters in this process
	procs     []*proc // with processes; nil while stopped
	HTTPAddrs []string
	connMu    sync.Mutex
	conns     []*grpc.ClientConn
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
	return startMasters(tb, n, tweak, "")
}

// StartMasterProcs is StartMasters with each master an OS process of
// binary (cmd/master), given the configuration as flags; each also
// serves /metrics on its own HTTP port (HTTPAddrs). A process's output
// goes to <id>.log beside its directory (to stderr with FLEETSIM_LOG).
func StartMasterProcs(tb testing.TB, binary string, n int, tweak func(*master.Config)) *Masters {
	tb.Helper()
	return startMasters(tb, n, tweak, binary)
}

func startMasters(tb testing.TB, n int, tweak func(*master.Config), binary string) *Masters {
	c := &Masters{tb: tb, tweak: tweak, M: make([]*master.Master, n), binary: binary,
		procs: make([]*proc, n), conns: make([]*grpc.ClientConn, n)}
	root := tb.TempDir()
	for i := 0; i < n; i++ {
		c.Dirs = append(c.Dirs, filepath.Join(root, fmt.Sprintf("m%d", i+1)))
	}
	// Ports are picked free and then given to the masters, so another
	// process can take one in between: a master process that finds its
	// port taken exits at start, and the masters start again, on new
	// ports (before any of them has data that names the old ones).
	for attempt := 1; ; attempt++ {
		c.Peers, c.HTTPAddrs = nil, nil
		for i := 0; i < n; i++ {
			c.Peers = append(c.Peers, master.Peer{ID: fmt.Sprintf("m%d", i+1), RaftAddr: freeAddr(tb), GRPCAddr: freeAddr(tb)})
			c.HTTPAddrs = append(c.HTTPAddrs, freeAddr(tb))
		}
		var err error
		for i := range c.Peers {
			if err = c.start(i); err != nil {
				break
			}
		}
		if err == nil {
			break
		}
		for i := range c.Peers {
			c.Stop(i)
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			tb.Fatal(err)
		}
		tb.Logf("masters start again on new ports: %v", err)
		for _, d := range c.Dirs {
			_ = os.RemoveAll(d)
		}
	}
	tb.Cleanup(func() {
		for i := range c.M {
			c.Stop(i)
		}
		for _, cc := range c.conns {
			if cc != nil {
				_ = cc.Close()
			}
		}
	})
	return c
}

// Procs reports whether the masters are OS processes.
func (c *Masters) Procs() bool { return c.binary != "" }

// logger discards, unless FLEETSIM_LOG is set: then Info and above go to
// stderr.
func logger(id string) *slog.Logger {
	if os.Getenv("FLEETSIM_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("master", id)
}

var freeAddr = ports.AddrT

// Start (re)starts master i on its directory and ports.
func (c *Masters) Start(i int) {
	c.tb.Helper()
	if err := c.start(i); err != nil {
		c.tb.Fatal(err)
	}
}

func (c *Masters) start(i int) error {
	cfg := master.Config{ID: c.Peers[i].ID, Dir: c.Dirs[i], RaftAddr: c.Peers[i].RaftAddr,
		Raft: RaftConfig(), Logger: logger(c.Peers[i].ID)}
	if len(c.Peers) > 1 {
		cfg.Peers = c.Peers
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	if c.binary != "" {
		return c.startProc(i, cfg)
	}
	var lis net.Listener
	// The port may linger briefly after a stop.
	wait.For(c.tb, 2*time.Second, "a listener on "+c.Peers[i].GRPCAddr, func() (err error) {
		lis, err = net.Listen("tcp", c.Peers[i].GRPCAddr)
		return err
	})
	m, err := master.Start(cfg, lis)
	if err != nil {
		return err
	}
	c.M[i] = m
	return nil
}

// Stop shuts master i down; its directory stays for a later Start. A
// process gets SIGTERM (a clean shutdown).
func (c *Masters) Stop(i int) {
	if c.binary != "" {
		c.stopProc(i, syscall.SIGTERM)
		return
	}
	if c.M[i] != nil {
		if err := c.M[i].Close(); err != nil {
			c.tb.Logf("close %s: %v", c.Peers[i].ID, err)
		}
		c.M[i] = nil
	}
}

// Kill ends master i at once: a process gets SIGKILL; in this process it
// is Stop (its gRPC server and raft stop without a handover).
func (c *Masters) Kill(i int) {
	if c.binary != "" {
		c.stopProc(i, syscall.SIGKILL)
		return
	}
	c.Stop(i)
}

// Running reports whether master i runs.
func (c *Masters) Running(i int) bool {
	if c.binary != "" {
		return c.procs[i] != nil
	}
	return c.M[i] != nil
}

// Metrics is master i's metrics: its registry, or a scrape of its
// process's /metrics.
func (c *Masters) Metrics(i int) prometheus.Gatherer {
	if c.binary != "" {
		return c.scrape(i)
	}
	return c.M[i].Registry()
}

// Usage is the CPU and memory of running master i's process: with masters
// in this process, the whole test process's (masters and fakes).
func (c *Masters) Usage(i int) (Usage, error) {
	if c.binary != "" {
		if c.procs[i] == nil {
			return Usage{}, fmt.Errorf("fleetsim: %s is not running", c.Peers[i].ID)
		}
		return ReadUsage(c.procs[i].cmd.Process.Pid)
	}
	return ReadUsage(os.Getpid())
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
		for i := range c.Peers {
			if c.isLeader(ctx, i) {
				return i, nil
			}
		}
		every := 5 * time.Millisecond
		if c.binary != "" {
			every = 25 * time.Millisecond // each try is an RPC per master
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("fleetsim: no ready leader: %w", ctx.Err())
		case <-time.After(every):
		}
	}
}

// isLeader reports whether running master i is the ready leader.
func (c *Masters) isLeader(ctx context.Context, i int) bool {
	if c.binary != "" {
		return c.procs[i] != nil && c.procIsLeader(ctx, i)
	}
	return c.M[i] != nil && c.M[i].IsLeader()
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

// StopAndDump waits until every running master has applied the same
// index, stops them all and returns each one's metadata as
// meta.Reader.Dump writes it, read from its meta.db once it stopped (for
// processes, the only way in). The fleet should be closed first, so that
// nothing is proposed meanwhile.
//
// raft counts an entry applied once it handed it to the FSM, which
// writes it to meta.db later (a restarted master's raft hands the FSM its
// whole log again, which it skips up to meta.db's index), and a stop
// drops what the FSM had not written yet: so the index must stay the same
// for a settling time (2 s) before the stop; if the dumps still differ in
// index, the masters are started again and the settling time grows (5 s,
// 15 s) before the differing indexes are an error.
func (c *Masters) StopAndDump(ctx context.Context) (map[int][]byte, error) {
	var running []int
	for i := range c.Peers {
		if c.Running(i) {
			running = append(running, i)
		}
	}
	var err error
	for try, settle := range []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second} {
		if err = c.waitOneIndex(ctx, settle); err != nil {
			return nil, err
		}
		for _, i := range running {
			c.Stop(i)
		}
		var dumps map[int][]byte
		if dumps, err = c.dumpFiles(running); err == nil || !errors.Is(err, errIndexes) {
			return dumps, err
		}
		c.tb.Logf("%v after settling %v; starting them again (try %d of 3)", err, settle, try+1)
		for _, i := range running {
			c.Start(i)
		}
	}
	return nil, err
}

var errIndexes = errors.New("fleetsim: masters stopped at different applied indexes")

// dumpFiles dumps the meta.db of each stopped master of ids.
func (c *Masters) dumpFiles(ids []int) (map[int][]byte, error) {
	dumps := map[int][]byte{}
	idx := map[uint64][]string{}
	for _, i := range ids {
		f, err := meta.OpenFSM(nil, filepath.Join(c.Dirs[i], "meta.db"), logger(c.Peers[i].ID))
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		err = f.View(func(r *meta.Reader) error {
			idx[r.AppliedIndex()] = append(idx[r.AppliedIndex()], c.Peers[i].ID)
			return r.Dump(&buf)
		})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("fleetsim: dump %s: %w", c.Peers[i].ID, err)
		}
		dumps[i] = buf.Bytes()
	}
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: %v", errIndexes, idx)
	}
	return dumps, nil
}

// waitOneIndex waits until every running master reports the same applied
// index: from its FSM in this process; from GetMasterStatus for a
// process, where it must also stay unchanged for settle.
func (c *Masters) waitOneIndex(ctx context.Context, settle time.Duration) error {
	if c.binary == "" {
		_, err := c.WaitAgree(ctx)
		return err
	}
	var agreed uint64
	var since time.Time
	for {
		idx := map[uint64]bool{}
		var last error
		for i := range c.Peers {
			if !c.Running(i) {
				continue
			}
			mc, err := c.conn(i)
			if err != nil {
				return err
			}
			st, err := mc.GetMasterStatus(ctx, &pb.GetMasterStatusRequest{})
			if err != nil {
				last = err
				idx[0], idx[1] = true, true // unknown: not agreed
				continue
			}
			idx[st.AppliedIndex] = true
		}
		if len(idx) == 1 {
			for a := range idx {
				if a != agreed || since.IsZero() {
					agreed, since = a, time.Now()
				}
			}
			if time.Since(since) >= settle {
				return nil
			}
		} else {
			since = time.Time{}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleetsim: masters did not stay at one applied index for %v (%v, last error %v): %w", settle, idx, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewestSnapshot is the newest raft snapshot in master i's snapshot store
// on disk (nil when it has none); it may be read while the master runs.
func (c *Masters) NewestSnapshot(i int) (*raft.SnapshotMeta, error) {
	store, err := raft.NewFileSnapshotStore(filepath.Join(c.Dirs[i], "raft"), 2, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: snapshots of %s: %w", c.Peers[i].ID, err)
	}
	list, err := store.List()
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return list[0], nil
}

// AppliedIndex is raft's applied index of running master i.
func (c *Masters) AppliedIndex(ctx context.Context, i int) (uint64, error) {
	if c.binary == "" {
		return c.M[i].Raft().AppliedIndex(), nil
	}
	mc, err := c.conn(i)
	if err != nil {
		return 0, err
	}
	st, err := mc.GetMasterStatus(ctx, &pb.GetMasterStatusRequest{})
	if err != nil {
		return 0, fmt.Errorf("fleetsim: status of %s: %w", c.Peers[i].ID, err)
	}
	return st.AppliedIndex, nil
}
