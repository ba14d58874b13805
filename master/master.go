package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	"bighive/internal/limits"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// Master is one master process: a raft member with the metadata FSM and
// the gRPC Master service.
type Master struct {
	pb.UnimplementedMasterServer

	cfg      Config
	log      *slog.Logger
	node     *meta.Node
	srv      *grpc.Server
	grpcAddr string
	fwd      *forwarder
	metrics  *metrics
	health   *obs.Health
	http     *obs.HTTPServer
	events   eventRing // recent events for the status page

	notify chan bool
	stop   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	leader *leaderState // the ready leader session, nil otherwise

	grantCache grantCache

	closeOnce sync.Once
	closeErr  error
}

// Start opens the master's data directory (bootstrapping the raft cluster
// the first time), starts raft and serves the Master service on lis. It
// returns once serving; Close stops it.
func Start(cfg Config, lis net.Listener) (*Master, error) {
	cfg.setDefaults()
	if cfg.ID == "" {
		return nil, errors.New("master: --id is required")
	}
	m := &Master{
		cfg:    cfg,
		log:    cfg.Logger.With("master", cfg.ID),
		notify: make(chan bool, 16),
		stop:   make(chan struct{}),
	}
	m.grpcAddr = cfg.GRPCAddr
	if m.grpcAddr == "" {
		m.grpcAddr = lis.Addr().String()
	}
	var peers []meta.Peer
	found := len(cfg.Peers) == 0
	for _, p := range cfg.Peers {
		peers = append(peers, meta.Peer{ID: p.ID, RaftAddr: p.RaftAddr})
		found = found || p.ID == cfg.ID
	}
	if !found {
		return nil, fmt.Errorf("master: id %q is not in the peer list", cfg.ID)
	}
	rc := DefaultRaftConfig()
	if cfg.Raft != nil {
		c := *cfg.Raft
		rc = &c
	}
	rc.NotifyCh = m.notify
	var err error
	nc := meta.NodeConfig{ID: cfg.ID, Dir: cfg.Dir, RaftAddr: cfg.RaftAddr, Peers: peers, Raft: rc, Logger: m.log}
	if cfg.TLS != nil {
		if nc.StreamLayer, err = raftStreamLayer(cfg.TLS, cfg.RaftAddr); err != nil {
			return nil, err
		}
	}
	node, err := meta.OpenNode(nc)
	if err != nil {
		if nc.StreamLayer != nil {
			_ = nc.StreamLayer.Close()
		}
		return nil, err
	}
	m.node = node
	if m.fwd, err = newForwarder(m); err != nil {
		_ = node.Close()
		return nil, err
	}

	reg := cfg.Metrics
	if reg == nil {
		reg = obs.NewRegistry()
	}
	m.metrics = newMetrics(m, reg)
	gm := obs.NewGRPCMetrics(reg)
	// The internal-method check and authentication run before forwarding,
	// so a follower forwards only what it would accept itself; the master
	// that handles the call (the leader, or every master for
	// GetMasterStatus) authorizes it against its own replica of the
	// grants, which on the leader holds every grant change it
	// acknowledged. The follower passes the caller on (forward.go).
	unary := []grpc.UnaryServerInterceptor{gm.UnaryInterceptor(), apierr.UnaryServerInterceptor(m.log),
		tlsconf.UnaryInternalInterceptor(cfg.TLS)}
	stream := []grpc.StreamServerInterceptor{gm.StreamInterceptor(), tlsconf.StreamInternalInterceptor(cfg.TLS)}
	var ck *auth.Checker
	if cfg.AuthTokens != nil {
		ck = auth.New(auth.Config{Tokens: cfg.AuthTokens, Grants: m.grants, Logger: m.log})
		unary = append(unary, ck.AuthenticateInterceptor())
		stream = append(stream, ck.StreamInterceptor())
	}
	unary = append(unary, m.fwd.intercept)
	if ck != nil {
		unary = append(unary, ck.UnaryInterceptor())
	}
	opts := append(append(append(limits.GRPCServerOptions(), limits.GRPCKeepaliveServerOptions()...), tlsconf.ServerOptions(cfg.TLS)...),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...))
	m.srv = grpc.NewServer(opts...)
	pb.RegisterMasterServer(m.srv, m)
	m.health = obs.RegisterHealthAndReflection(m.srv, pb.Master_ServiceDesc.ServiceName)
	if cfg.HTTPListen != "" {
		if m.http, err = obs.ListenHTTPTLS(cfg.HTTPListen, reg, m.log, tlsconf.HTTPConfig(cfg.TLS)); err != nil {
			m.fwd.close()
			_ = node.Close()
			return nil, fmt.Errorf("master: %w", err)
		}
		m.http.Handle("/", m.StatusHandler())
	}

	m.wg.Add(5)
	go m.watchLeadership()
	go m.watchHealth()
	go m.runMerger()
	go m.runBackupExpiry()
	go func() {
		defer m.wg.Done()
		if err := m.srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			m.log.Error("gRPC server stopped", "err", err)
		}
	}()
	m.log.Info("master started", "grpc", m.grpcAddr, "raft", string(node.Raft.String()), "peers", len(cfg.Peers))
	return m, nil
}

// raftStreamLayer is the mutual-TLS raft transport's stream layer on
// addr, advertised as addr.
func raftStreamLayer(src *tlsconf.Source, addr string) (raft.StreamLayer, error) {
	adv, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("master: raft address %q: %w", addr, err)
	}
	sl, err := tlsconf.RaftStreamLayer(src, addr, adv)
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	return raftStream{sl}, nil
}

// raftStream is tlsconf's stream layer as a raft.StreamLayer, whose Dial
// takes a raft.ServerAddress.
type raftStream struct{ *tlsconf.StreamLayer }

func (s raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.StreamLayer.Dial(string(address), timeout)
}

// Addr is the master's gRPC address.
func (m *Master) Addr() string { return m.grpcAddr }

// IsLeader reports whether this master is the leader and ready to answer.
func (m *Master) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leader != nil
}

// LeaderID is the raft id of the current leader as this master knows it.
func (m *Master) LeaderID() string {
	_, id := m.node.Raft.LeaderWithID()
	return string(id)
}

// HTTPAddr is the address of the HTTP port, "" without one.
func (m *Master) HTTPAddr() string {
	if m.http == nil {
		return ""
	}
	return m.http.Addr()
}

// HTTP is the HTTP port (nil without one): a status page is added to it
// with one Handle call.
func (m *Master) HTTP() *obs.HTTPServer { return m.http }

// Registry is the registry of the master's metrics.
func (m *Master) Registry() *prometheus.Registry { return m.metrics.reg }

// watchHealth keeps the health service SERVING while raft knows a leader
// (this master or another: a follower forwards), NOT_SERVING otherwise.
func (m *Master) watchHealth() {
	defer m.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		addr, _ := m.node.Raft.LeaderWithID()
		m.health.Set(addr != "")
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// Raft exposes the raft member (for tests and operational tooling: stats,
// snapshots).
func (m *Master) Raft() *raft.Raft { return m.node.Raft }

// Close stops serving, ends the leader session and shuts raft down.
func (m *Master) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		m.health.Shutdown()
		stopped := make(chan struct{})
		go func() { m.srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(2 * time.Second):
			m.srv.Stop()
		}
		m.wg.Wait()
		m.fwd.close()
		m.closeErr = errors.Join(m.node.Close(), m.http.Close())
		m.log.Info("master stopped")
	})
	return m.closeErr
}

// watchLeadership starts a leader session when raft makes this node the
// leader and ends it when leadership is lost.
func (m *Master) watchLeadership() {
	defer m.wg.Done()
	type session struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var cur *session
	end := func() {
		if cur != nil {
			cur.cancel()
			<-cur.done
			cur = nil
		}
	}
	defer end()
	for {
		select {
		case <-m.stop:
			return
		case isLeader := <-m.notify:
			end()
			if !isLeader {
				m.log.Info("lost leadership")
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			cur = &session{cancel: cancel, done: make(chan struct{})}
			go func(done chan struct{}) {
				defer close(done)
				m.runLeader(ctx)
			}(cur.done)
		}
	}
}

func (m *Master) setLeader(ls *leaderState) {
	m.mu.Lock()
	m.leader = ls
	m.mu.Unlock()
}

// ready returns the leader session, or Unavailable naming the leader.
func (m *Master) ready() (*leaderState, error) {
	m.mu.Lock()
	ls := m.leader
	m.mu.Unlock()
	if ls != nil {
		return ls, nil
	}
	if m.node.Raft.State() == raft.Leader {
		return nil, apierr.Unavailable("master: %s was just elected leader and is catching up; retry shortly", m.cfg.ID)
	}
	return nil, apierr.NotLeader(m.fwd.leaderAddr())
}

// readyRead is ready plus a check with a quorum that this master is still
// the leader, so a read it answers is not stale.
func (m *Master) readyRead() (*leaderState, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := m.node.Raft.VerifyLeader().Error(); err != nil {
		return nil, meta.RaftError(err)
	}
	return ls, nil
}

// apply commits cmd and returns its result; a refused command's error is
// returned as the error.
func (m *Master) apply(ctx context.Context, cmd *spb.MetaCommand) (*meta.Result, error) {
	res, err := m.node.Apply(ctx, cmd)
	m.metrics.command(cmd, res, err)
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return res, nil
}

// view reads the metadata.
func (m *Master) view(fn func(*meta.Reader) error) error { return m.node.FSM.View(fn) }

func codeOf(err error) codes.Code { return apierr.CodeOf(err) }
