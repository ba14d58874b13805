package tserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	"bighive/internal/limits"
	"bighive/internal/masterconn"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
	pb "bighive/proto/bighivepb"
	"bighive/storage/blockstore"
	"bighive/storage/merge"
	"bighive/storage/split"
	"bighive/storage/tablet/blockcache"
	"bighive/storage/vfs"
	"bighive/storage/wal"
	"bighive/tserver/membership"
)

// Options configure a tserver.
type Options struct {
	// Listen is the gRPC address; its host:port is also the WAL prefix, so a
	// tserver keeps one address across restarts.
	Listen string
	// Advertise is the address given to the master and clients (default:
	// the listener's address).
	Advertise string
	// Masters are the masters' gRPC addresses.
	Masters []string
	// Root is the shared root (docs/design.md 'Storage layout').
	Root string
	// DataDirs are the block store's data dirs (default <Root>/blocks/<uuid>).
	DataDirs []string
	// AuthTokens, when set, turns authentication and authorization on
	// (--auth-tokens): data calls need a known token (or client
	// certificate) and a grant, learnt from the master's heartbeat replies.
	AuthTokens *auth.Tokens
	// MemLimit triggers a checkpoint when all write buffers together pass it.
	MemLimit int64
	// CacheBytes bounds the block cache.
	CacheBytes int64
	// HeartbeatInterval until the master says otherwise (default 1 s).
	HeartbeatInterval time.Duration
	// SplitThreshold is the size (TSFiles plus write buffers) over which a
	// tablet splits (default 512 MiB; negative: no automatic splits).
	SplitThreshold int64
	// SplitInterval is the least time between two splits of one tablet
	// (default 30 s); SplitCheckInterval how often sizes are checked
	// (default 1 s); MaxConcurrentSplits bounds the splits running at once
	// (default 2).
	SplitInterval       time.Duration
	SplitCheckInterval  time.Duration
	MaxConcurrentSplits int
	// SplitHook, when set, is called at each step of a split (tests inject
	// faults; see package split).
	SplitHook func(split.Step) error
	// MergeHook, when set, is called at each step of a merge (tests
	// inject faults; package merge).
	MergeHook func(merge.Step) error
	// Compaction policy, as checkpoint.Options: CompactionMajorEvery is the
	// period of each tablet's major compaction (default 24 h, negative:
	// off), CompactionMaxFiles the file count over which a tablet gets a
	// merging compaction (default 6, negative: none), CompactionMergeWidth
	// the files one merges (default CompactionMaxFiles/2+1) and
	// CompactionRate the bytes per second compactions read on average
	// (default 64 MiB/s, negative: unthrottled); CompactionGarbageShare is
	// the estimated share of a tablet's entries that a major compaction
	// would drop past which one runs (default 0.2, negative: never).
	CompactionMajorEvery   time.Duration
	CompactionGarbageShare float64
	// CompactionDuty is the share of the time background compactions may
	// run (default 0.2; 1: no limit).
	CompactionDuty       float64
	CompactionMaxFiles   int
	CompactionMergeWidth int
	CompactionRate       int64
	// CompactionBacklogFiles and CompactionStopFiles are the backlog rule,
	// as checkpoint.Options BacklogFiles and StopFiles: past the first
	// file count a tablet's compactions go first and skip the duty rest,
	// past the second its writes are delayed, at most
	// CompactionMaxWriteDelay (≤ 1 s) each. Defaults 2 ×
	// CompactionMaxFiles, 2 × CompactionBacklogFiles and 250 ms;
	// negative: off.
	CompactionBacklogFiles  int
	CompactionStopFiles     int
	CompactionMaxWriteDelay time.Duration
	// OrphanEvery is the period of the orphan pass over this tserver's
	// block store and OrphanGrace how long a block must stay unreferenced
	// before it deletes it, as checkpoint.Options (defaults 10 min each;
	// OrphanEvery negative: no periodic pass).
	OrphanEvery time.Duration
	OrphanGrace time.Duration
	// FS is the filesystem (default vfs.Default).
	FS     vfs.FS
	Logger *slog.Logger
	// TLS, if set, is the --tls-* files: gRPC and the HTTP port serve TLS
	// 1.3 only, the master connections verify the masters and present
	// this tserver's certificate, and internal methods need a server
	// certificate. Nil: plaintext.
	TLS *tlsconf.Source
	// HTTPListen is the address of the HTTP port (/metrics, /debug/pprof/);
	// empty: no HTTP port.
	HTTPListen string
	// Services, if set, registers more services on the tserver's gRPC
	// server before it serves: cmd/tserver's --bigtable registers the
	// Cloud Bigtable API (package frontend) there, over a client that
	// reaches this tserver through Command.
	Services func(*grpc.Server)
	// Metrics is the registry the tserver's metrics go to (default: a new
	// one with the Go runtime and process collectors).
	Metrics *prometheus.Registry
}

func (o *Options) defaults() {
	if o.MemLimit <= 0 {
		o.MemLimit = 256 << 20
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 256 << 20
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = time.Second
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Server is one tablet server process. Its state is in three named parts
// besides the process's identity and lifecycle: its standing at the master
// (the membership: the lease and the heartbeats that keep it), hosting (the
// tablets it serves and their loads, splits and batch-stream workers) and
// storage (the log, the block stores and cache, and the background engine).
// The parts are embedded, so a field reads as s.lease; the struct says
// which part it belongs to.
type Server struct {
	pb.UnimplementedTServerServer

	opts   Options
	log    *slog.Logger
	fs     vfs.FS
	addr   string // advertised address
	prefix string // WAL prefix
	uuid   string
	auth   *auth.Checker // nil: no authorization

	lis  net.Listener
	grpc *grpc.Server
	// The batch stream's commands, counted as calls of these methods
	// (the interceptors count the calls).
	mutateMetrics, readMetrics, pingMetrics *obs.CommandMetrics
	metrics                                 *metrics
	http                                    *obs.HTTPServer

	standing
	hosting
	storage

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	// failed is set once the log failed (logFailed): nothing is served
	// from then on. fatal is the cause; done is closed once the tserver
	// has stopped on it.
	failed   atomic.Bool
	failOnce sync.Once
	fatal    error
	done     chan struct{}
	// draining is closed when Close starts: batch streams, which a client
	// keeps open, stop taking commands and end, so GracefulStop ends.
	draining chan struct{}
}

// standing is the tserver's membership at the master: the connection to
// the masters, the membership itself (package membership: registration and
// incarnation, heartbeats, the lease; member.go is its Host), the health
// the lease sets, and what the heartbeat replies teach besides tablets.
type standing struct {
	master     *masterconn.Conn
	member     *membership.Member
	lease      membership.Lease // the member's, here so that it reads (invalid) before Start made the member
	grantsSeen atomic.Uint64    // without auth: the grants version last heard of

	health     *obs.Health
	healthMu   sync.Mutex   // orders updateHealth's read of the lease with its Set
	masterHTTP atomic.Value // string: the leader's HTTP address from the last heartbeat reply
}

// hosting is the tablets the tserver serves and the work that changes that
// set: loads (load.go), splits (split.go), and the batch streams' workers.
type hosting struct {
	tablets registry
	schemas schemas // schema.go
	// assignMu serialises applyAssignments: the heartbeat loop and a
	// finished split (its children) both call it, and two unserialised
	// calls for one tablet could each open a replica, leaving one never
	// closed, or put an older epoch over a newer one.
	assignMu sync.Mutex
	// loadSlots bounds the tablet loads (open and replay) that run at
	// once; see maxConcurrentLoads.
	loadSlots chan struct{}
	// loadReports batches the load reports (loadreport.go).
	loadReports *loadReporter
	// pendingLoads: tablet id → epoch of a load started by
	// applyAssignments that has not registered the tablet yet, so that an
	// assignment the master sends again meanwhile starts no second load,
	// an unassignment cancels it, and heartbeats report it as held (a
	// tablet this tserver may still serve at that epoch). Changed under
	// assignMu and pendingMu, read under either: heartbeats read it under
	// pendingMu alone, since assignMu is held while a tablet opens.
	pendingLoads map[string]int64
	pendingMu    sync.Mutex
	// handoffs are the tablets being flushed before they are let go
	// (handoff.go), so that an unassignment repeated by later heartbeat
	// replies starts no second handoff. Under assignMu.
	handoffs map[string]bool
	split    *splitter // split.go
	// workers runs the batch streams' command groups (workers.go).
	workers *workers
}

// storage is what the tserver stores with: its log, its block stores and
// their cache, and the background engine that checkpoints and compacts
// (engine.go, stores.go).
type storage struct {
	wal    *wal.Log
	blocks blockstore.Manager
	cache  *blockcache.Cache
	stores *stores
	eng    *engineState
	// imports holds the blocks of files ImportTSFile wrote until their
	// backup surely names them (backup.go).
	imports importHolds
}

// Start opens the tserver's storage, starts serving gRPC and registers
// with the master. It returns once the listener is open.
func Start(ctx context.Context, opts Options) (s *Server, err error) {
	opts.defaults()
	if len(opts.Masters) == 0 {
		return nil, errors.New("tserver: no master addresses")
	}
	if opts.Root == "" {
		return nil, errors.New("tserver: no shared root (--fs-root)")
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("tserver: listen %s: %w", opts.Listen, err)
	}
	defer func() {
		if err != nil {
			lis.Close()
		}
	}()
	s = &Server{
		opts:     opts,
		log:      opts.Logger,
		fs:       opts.FS,
		addr:     opts.Advertise,
		lis:      lis,
		done:     make(chan struct{}),
		draining: make(chan struct{}),
		hosting: hosting{
			loadSlots:    make(chan struct{}, maxConcurrentLoads),
			pendingLoads: map[string]int64{},
			handoffs:     map[string]bool{},
			workers:      newWorkers(),
		},
	}
	if s.addr == "" {
		s.addr = lis.Addr().String()
	}
	s.prefix = walPrefix(s.addr)
	s.tablets.init()
	if s.uuid, err = identity(s.fs, opts.Root, s.prefix); err != nil {
		return nil, err
	}
	s.log = s.log.With("tserver", s.addr)

	dirs := opts.DataDirs
	if len(dirs) == 0 {
		dirs = []string{filepath.Join(opts.Root, blocksDir, s.uuid)}
	} else if err := recordStoreDirs(s.fs, opts.Root, s.uuid, dirs); err != nil {
		return nil, err
	}
	began := time.Now()
	mgr, rep, err := blockstore.Open(blockstore.Options{Dirs: dirs, FS: s.fs, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("tserver: open block store: %w", err)
	}
	s.blocks = mgr
	s.log.Info("block store open", "dirs", dirs, "took", time.Since(began), "report", rep.String())
	defer func() {
		if err != nil {
			mgr.Close()
		}
	}()
	s.cache = blockcache.New(blockcache.Options{Capacity: opts.CacheBytes})
	s.stores = newStores(s.fs, opts.Root, s.uuid, mgr, s.log)

	s.wal, err = wal.Open(ctx, wal.Options{FS: s.fs, Root: opts.Root, Prefix: s.prefix, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("tserver: open log: %w", err)
	}
	if s.master, err = masterconn.New(opts.Masters, masterconn.Options{
		AttemptTimeout: membership.AttemptTimeout(opts.HeartbeatInterval),
		Credentials:    tlsconf.Credentials(opts.TLS), Logger: s.log}); err != nil {
		s.wal.Close()
		return nil, err
	}
	reg := opts.Metrics
	if reg == nil {
		reg = obs.NewRegistry()
	}
	s.metrics = newMetrics(s, reg)
	s.eng = newEngineState(s)

	gm := obs.NewGRPCMetrics(reg)
	s.mutateMetrics = gm.Command(batchMutateMethod)
	s.readMetrics = gm.Command(batchReadMethod)
	s.pingMetrics = gm.Command(batchPingMethod)
	unary := []grpc.UnaryServerInterceptor{gm.UnaryInterceptor(), apierr.UnaryServerInterceptor(s.log), tlsconf.UnaryInternalInterceptor(opts.TLS)}
	stream := []grpc.StreamServerInterceptor{gm.StreamInterceptor(), apierr.StreamServerInterceptor(s.log), tlsconf.StreamInternalInterceptor(opts.TLS)}
	if s.auth = s.newChecker(opts.AuthTokens); s.auth != nil {
		unary = append(unary, s.auth.UnaryInterceptor())
		stream = append(stream, s.auth.StreamInterceptor())
	}
	s.grpc = grpc.NewServer(append(append(append(limits.GRPCServerOptions(), limits.GRPCKeepaliveServerOptions()...), tlsconf.ServerOptions(opts.TLS)...),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...))...)
	pb.RegisterTServerServer(s.grpc, s)
	if opts.Services != nil {
		opts.Services(s.grpc)
	}
	s.health = obs.RegisterHealthAndReflection(s.grpc, pb.TServer_ServiceDesc.ServiceName)
	if opts.HTTPListen != "" {
		if s.http, err = obs.ListenHTTPTLS(opts.HTTPListen, reg, s.log, tlsconf.HTTPConfig(opts.TLS)); err != nil {
			s.wal.Close()
			s.master.Close()
			return nil, fmt.Errorf("tserver: %w", err)
		}
		s.http.Handle("/", s.StatusHandler())
	}

	s.member = s.newMember()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.loadReports = newLoadReporter(s.ctx, &s.wg, s.sendLoads)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("grpc serve", "err", err)
		}
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.member.Run(s.ctx) // registers, heartbeats, watches the lease
	}()
	s.eng.start(s.ctx)
	s.watchLog()
	s.split = newSplitter(s)
	s.split.start(s.ctx)
	s.log.Info("tserver started", "uuid", s.uuid, "prefix", s.prefix, "root", opts.Root)
	return s, nil
}

// Addr is the address the tserver serves on.
func (s *Server) Addr() string { return s.addr }

// HTTPAddr is the address of the HTTP port, "" without one.
func (s *Server) HTTPAddr() string {
	if s.http == nil {
		return ""
	}
	return s.http.Addr()
}

// HTTP is the HTTP port (nil without one): a status page is added to it
// with one Handle call.
func (s *Server) HTTP() *obs.HTTPServer { return s.http }

// Registry is the registry of the tserver's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// UUID is the tserver's (and its block store's) identity.
func (s *Server) UUID() string { return s.uuid }

// Done is closed once the tserver has stopped on a fatal error: its log
// failed (an I/O error such as ENOSPC or a failed fdatasync, after which
// no write can be made durable). By then it has given up its lease, so
// the master moves its tablets and recovers them from its log elsewhere.
// cmd/tserver exits non-zero on it.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the fatal error Done reports (wrapping wal.ErrFailed), nil
// before Done is closed.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.fatal
	default:
		return nil
	}
}

// logFailed fails the tserver stop on a failed log, once: it stops
// serving at once (the lease is given up, and no request is served
// without one: Server.serving refuses it, and a write already admitted is
// not acknowledged, its append failing on the failed log or its lease
// check after), logs the cause, and stops the process's work in the
// background, every tablet first (Replica.Stop); Done is closed when that
// is finished.
func (s *Server) logFailed(err error) {
	s.failOnce.Do(func() {
		s.failed.Store(true)
		s.member.RevokeLease() // sets the health service too
		s.log.Error("tserver: the write-ahead log failed; giving up the lease and stopping", "err", err)
		s.fatal = fmt.Errorf("tserver %s: stopped on a failed log: %w", s.addr, err)
		go func() {
			s.cancel() // no heartbeat renews the lease from now on
			// Stop waits for the writes in flight, and logFailed may run
			// inside one (the replica reports a failed append): so here.
			for _, r := range s.tablets.all() {
				r.Stop()
			}
			if cerr := s.Close(); cerr != nil {
				s.log.Warn("tserver: stopping after the log failed", "err", cerr)
			}
			close(s.done)
		}()
	})
}

// watchLog stops the tserver when its log reports a failure of its own
// (a log that has a failure notification: Failed and Err); without one, a
// failed log is noticed by the next append (package replica).
func (s *Server) watchLog() {
	l, ok := any(s.wal).(interface {
		Failed() <-chan struct{}
		Err() error
	})
	if !ok {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-l.Failed():
			s.logFailed(l.Err())
		case <-s.ctx.Done():
		}
	}()
}

// Close stops the tserver cleanly: it stops taking requests, finishes the
// ones in flight, stops the background work and closes the log (every
// acknowledged write is durable already).
func (s *Server) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.health.Shutdown()
	close(s.draining)
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.grpc.Stop()
	}
	s.cancel()
	s.wg.Wait()
	s.workers.close()
	s.eng.stop()
	var errs []error
	errs = append(errs, s.wal.Close())
	s.tablets.closeAll()
	errs = append(errs, s.stores.close())
	errs = append(errs, s.blocks.Close())
	errs = append(errs, s.master.Close())
	errs = append(errs, s.http.Close())
	return errors.Join(errs...)
}
