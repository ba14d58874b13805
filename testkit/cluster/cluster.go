package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"bighive/client"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// Options configures Start.
type Options struct {
	// Masters is the number of masters (default 1; use 1 or 3).
	Masters int
	// TServers is the number of tservers (0 is allowed: masters only).
	TServers int
	// Dir holds every process's data and log. Required.
	Dir string
	// DataDirs is the number of --fs-data-dirs per tserver (default 1).
	DataDirs int
	// Lease and Heartbeat, if set, are passed to the masters as --lease
	// and --heartbeat.
	Lease, Heartbeat time.Duration
	// Flags are appended to every tserver's command line (memory limits,
	// split thresholds, …); MasterFlags to every master's.
	Flags, MasterFlags []string
	// Env is added to every process's environment.
	Env []string
	// StopGrace bounds the wait for a SIGTERMed process (default 30 s).
	StopGrace time.Duration
	// TLS runs the cluster with TLS 1.3 on every connection: Start makes
	// a CA, a server certificate per process (with the server role) and a
	// client certificate (CN ClientPrincipal) under <Dir>/tls/, and the
	// harness's own connections and Client use the client certificate.
	TLS bool
	// AuthTokens is a tokens file given to every master, tserver and the
	// frontend as --auth-tokens; BootstrapAdmin goes to the masters as
	// --bootstrap-admin. Token is the bearer token the harness's own calls
	// (waiting for the leader, the tservers, serving tables) carry.
	AuthTokens, BootstrapAdmin, Token string
	// Hosts, when set, runs every master and tserver on a host of its own
	// (its own network namespace and address; see HostsOptions). It needs
	// root; New skips the test when hosts are unavailable or under -short.
	Hosts *HostsOptions
}

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts     Options
	masters  []*master
	tservers []*proc
	tsAddrs  []string
	tsHTTP   []string // tservers' HTTP ports (/metrics)
	frontend *proc    // serves the Cloud Bigtable API on btAddr
	btAddr   string
	btHTTP   string
	pki      *pki     // TLS mode; nil: plaintext
	hosts    *hostEnv // Options.Hosts; nil: every process on loopback

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	started bool // Start has returned the cluster
}

type master struct {
	*proc
	id, addr, raftAddr, httpAddr string
}

// Start starts the masters, waits for a leader, starts the tservers and
// waits until the leader lists every one of them as live. A port taken
// between the choice and the bind fails the attempt; Start then retries
// with new ports, up to three times. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("cluster: Options.Dir is required")
	}
	if opts.Masters <= 0 {
		opts.Masters = 1
	}
	if opts.DataDirs <= 0 {
		opts.DataDirs = 1
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 30 * time.Second
	}
	names := []string{"master", "frontend"}
	if opts.TServers > 0 {
		names = append(names, "tserver")
	}
	bins, err := Binaries(names...)
	if err != nil {
		return nil, err
	}
	mbin, fbin, tbin := bins[0], bins[1], ""
	if opts.TServers > 0 {
		tbin = bins[2]
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var p *pki
	if opts.TLS {
		if p, err = newPKI(opts.Dir); err != nil {
			return nil, err
		}
	}
	if opts.Hosts != nil {
		// Fixed ports inside the hosts: one attempt.
		env, err := startHosts(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("cluster: hosts: %w", err)
		}
		c, err := start(ctx, opts, p, env, mbin, tbin, fbin)
		if err != nil {
			return nil, fmt.Errorf("cluster: start: %w", errors.Join(err, env.close()))
		}
		return c, nil
	}
	var errs []error
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := start(ctx, opts, p, nil, mbin, tbin, fbin)
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if ctx.Err() != nil || !errors.Is(err, errEarlyExit) {
			break
		}
		// Fresh directories for the next attempt: a master bootstrapped
		// with other ports must not be reused.
		c.wipe()
	}
	return nil, fmt.Errorf("cluster: start: %w", errors.Join(errs...))
}

var errEarlyExit = errors.New("a process exited during start-up")

func start(ctx context.Context, opts Options, p *pki, env *hostEnv, mbin, tbin, fbin string) (*Cluster, error) {
	c := &Cluster{opts: opts, conns: map[string]*grpc.ClientConn{}, pki: p, hosts: env}
	for i := 0; i < opts.Masters; i++ {
		if env != nil {
			h := env.masters[i]
			c.masters = append(c.masters, &master{id: fmt.Sprintf("m%d", i+1),
				addr: hostAddr(h, hostGRPCPort), raftAddr: hostAddr(h, hostRaftPort), httpAddr: hostAddr(h, hostHTTPPort)})
			continue
		}
		addr, err := freePort()
		if err != nil {
			return c, err
		}
		raft, err := freePort()
		if err != nil {
			return c, err
		}
		httpAddr, err := freePort()
		if err != nil {
			return c, err
		}
		c.masters = append(c.masters, &master{id: fmt.Sprintf("m%d", i+1), addr: addr, raftAddr: raft, httpAddr: httpAddr})
	}
	peers := c.peersFlag()
	for i, m := range c.masters {
		args := []string{
			"--id", m.id, "--listen", m.addr, "--raft-listen", m.raftAddr,
			"--peers", peers, "--data", filepath.Join(opts.Dir, m.id), "--http-listen", m.httpAddr,
		}
		if opts.Lease > 0 {
			args = append(args, "--lease", opts.Lease.String())
		}
		if opts.Heartbeat > 0 {
			args = append(args, "--heartbeat", opts.Heartbeat.String())
		}
		tlsArgs, err := p.serverFlags(m.id)
		if err != nil {
			return c, err
		}
		args = append(append(args, tlsArgs...), opts.authFlags()...)
		if opts.BootstrapAdmin != "" {
			args = append(args, "--bootstrap-admin", opts.BootstrapAdmin)
		}
		args = append(args, opts.MasterFlags...)
		m.proc = &proc{name: m.id, bin: mbin, args: args, env: opts.Env, logPath: filepath.Join(opts.Dir, m.id+".log")}
		if env != nil {
			m.proc.wrap = env.masters[i].Wrap()
		}
	}
	base := c.sharedBase()
	for i := 0; i < opts.TServers; i++ {
		var addr, httpAddr string
		var wrap []string
		if env != nil {
			addr, httpAddr = hostAddr(env.tservers[i], hostGRPCPort), hostAddr(env.tservers[i], hostHTTPPort)
			wrap = env.tservers[i].Wrap()
		} else {
			var err error
			if addr, err = freePort(); err != nil {
				return c, err
			}
			if httpAddr, err = freePort(); err != nil {
				return c, err
			}
		}
		name := fmt.Sprintf("ts%d", i)
		var dirs []string
		for d := 0; d < opts.DataDirs; d++ {
			dirs = append(dirs, filepath.Join(base, name, fmt.Sprintf("data%d", d)))
		}
		args := []string{
			"--listen", addr, "--masters", strings.Join(c.MasterAddrs(), ","),
			"--fs-root", filepath.Join(base, "root"), "--fs-data-dirs", strings.Join(dirs, ","),
			"--http-listen", httpAddr,
		}
		tlsArgs, err := p.serverFlags(name)
		if err != nil {
			return c, err
		}
		args = append(append(args, tlsArgs...), opts.authFlags()...)
		args = append(args, opts.Flags...)
		c.tservers = append(c.tservers, &proc{name: name, bin: tbin, args: args, wrap: wrap, env: opts.Env, logPath: filepath.Join(opts.Dir, name+".log")})
		c.tsAddrs = append(c.tsAddrs, addr)
		c.tsHTTP = append(c.tsHTTP, httpAddr)
	}
	btAddr, err := freePort()
	if err != nil {
		return c, err
	}
	c.btAddr = btAddr
	if c.btHTTP, err = freePort(); err != nil {
		return c, err
	}
	tlsArgs, err := p.serverFlags("frontend")
	if err != nil {
		return c, err
	}
	c.frontend = &proc{name: "frontend", bin: fbin, env: opts.Env, logPath: filepath.Join(opts.Dir, "frontend.log"),
		args: append(append([]string{"--listen", btAddr, "--masters", strings.Join(c.MasterAddrs(), ","), "--http-listen", c.btHTTP}, tlsArgs...), opts.authFlags()...)}
	for _, m := range c.masters {
		if err := m.start(); err != nil {
			c.Close()
			return c, err
		}
	}
	if _, err := c.waitLeader(ctx); err != nil {
		c.Close()
		return c, err
	}
	for _, ts := range c.tservers {
		if err := ts.start(); err != nil {
			c.Close()
			return c, err
		}
	}
	if err := c.frontend.start(); err != nil {
		c.Close()
		return c, err
	}
	if err := c.frontend.waitListening(c.btAddr, restartWait); err != nil {
		if c.frontend.exitedNow() {
			err = fmt.Errorf("%w: %w", errEarlyExit, err) // its port was taken: retry
		}
		c.Close()
		return c, err
	}
	if err := c.waitTServers(ctx); err != nil {
		c.Close()
		return c, err
	}
	return c, nil
}

// BigtableAddr is the address of the frontend process serving the Cloud
// Bigtable API (data and table admin) over the cluster, for
// BIGTABLE_EMULATOR_HOST or option.WithGRPCConn.
func (c *Cluster) BigtableAddr() string { return c.btAddr }

// peersFlag is the masters' --peers value: id=raftaddr=grpcaddr,
// comma-separated, every master included (master.ParsePeers).
func (c *Cluster) peersFlag() string {
	var parts []string
	for _, m := range c.masters {
		parts = append(parts, m.id+"="+m.raftAddr+"="+m.addr)
	}
	return strings.Join(parts, ",")
}

// wipe removes the directories and logs of a failed start attempt.
func (c *Cluster) wipe() {
	if c == nil {
		return
	}
	for _, m := range c.masters {
		os.RemoveAll(filepath.Join(c.opts.Dir, m.id))
		if m.proc != nil {
			os.Rename(m.logPath, m.logPath+".failed-start")
		}
	}
	for _, ts := range c.tservers {
		os.RemoveAll(filepath.Join(c.opts.Dir, ts.name))
		os.Rename(ts.logPath, ts.logPath+".failed-start")
	}
	if c.frontend != nil {
		os.Rename(c.frontend.logPath, c.frontend.logPath+".failed-start")
	}
	os.RemoveAll(filepath.Join(c.opts.Dir, "root"))
}

// exitedEarly returns errEarlyExit naming any process that has exited.
func (c *Cluster) exitedEarly() error {
	for _, p := range c.procs() {
		if ch := p.exited(); ch != nil {
			select {
			case <-ch:
				// The log's last lines in the error itself: a test's
				// output may be cut before the dump of every log.
				last, _ := tail(p.logPath, 4)
				return fmt.Errorf("%w: %s (see %s; it ends:\n%s)", errEarlyExit, p.name, p.logPath, strings.Join(last, "\n"))
			default:
			}
		}
	}
	return nil
}

func (c *Cluster) procs() []*proc {
	var out []*proc
	for _, m := range c.masters {
		if m.proc != nil {
			out = append(out, m.proc)
		}
	}
	out = append(out, c.tservers...)
	if c.frontend != nil {
		out = append(out, c.frontend)
	}
	return out
}

// MasterPID, TServerPID and FrontendPID are the running processes' ids
// (0: not running), for tools that measure them: on hosts their sockets
// are in namespaces the machine's /proc/net does not list.
func (c *Cluster) MasterPID(i int) int  { return c.masters[i].pid() }
func (c *Cluster) TServerPID(i int) int { return c.tservers[i].pid() }
func (c *Cluster) FrontendPID() int     { return c.frontend.pid() }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// MasterAddrs returns the masters' gRPC addresses.
func (c *Cluster) MasterAddrs() []string {
	out := make([]string, len(c.masters))
	for i, m := range c.masters {
		out[i] = m.addr
	}
	return out
}

// MasterHTTPAddr returns master i's HTTP address (/metrics, /debug/pprof/).
func (c *Cluster) MasterHTTPAddr(i int) string { return c.masters[i].httpAddr }

// TServerHTTPAddr returns tserver i's HTTP address.
func (c *Cluster) TServerHTTPAddr(i int) string { return c.tsHTTP[i] }

// FrontendHTTPAddr returns the frontend's HTTP address.
func (c *Cluster) FrontendHTTPAddr() string { return c.btHTTP }

// TServerAddr returns tserver i's gRPC address.
func (c *Cluster) TServerAddr(i int) string { return c.tsAddrs[i] }

// NumTServers is the number of tservers.
func (c *Cluster) NumTServers() int { return len(c.tservers) }

// KillTServer sends SIGKILL to tserver i and waits for it to exit.
func (c *Cluster) KillTServer(i int) error { return c.tservers[i].kill() }

// StopTServer sends SIGTERM to tserver i and waits for a clean exit; an
// error says it exited with a non-zero status or had to be killed.
func (c *Cluster) StopTServer(i int) error { return c.tservers[i].stop(c.opts.StopGrace) }

// PauseTServer freezes tserver i with SIGSTOP and returns once it is
// stopped: its sockets stay open but it answers nothing and sends no
// heartbeat.
func (c *Cluster) PauseTServer(i int) error { return c.tservers[i].pause() }

// ResumeTServer continues a paused tserver with SIGCONT.
func (c *Cluster) ResumeTServer(i int) error { return c.tservers[i].signal(syscall.SIGCONT) }

// RestartTServer starts tserver i again, with its old address and data,
// after stopping it if it is still running, and waits until it accepts
// connections. It does not wait for the tserver to register; WaitServing
// or the client's retries do.
func (c *Cluster) RestartTServer(i int) error {
	p := c.tservers[i]
	if p.running() {
		if err := p.kill(); err != nil && !errors.Is(err, errNotRunning) {
			return err
		}
	}
	if err := p.start(); err != nil {
		return err
	}
	return p.waitListening(c.tsAddrs[i], restartWait)
}

// restartWait bounds how long a restarted process may take to listen.
const restartWait = 30 * time.Second

// KillMaster sends SIGKILL to master i and waits for it to exit.
func (c *Cluster) KillMaster(i int) error { return c.masters[i].kill() }

// StopMaster sends SIGTERM to master i and waits for a clean exit.
func (c *Cluster) StopMaster(i int) error { return c.masters[i].stop(c.opts.StopGrace) }

// PauseMaster freezes master i with SIGSTOP; ResumeMaster continues it.
func (c *Cluster) PauseMaster(i int) error { return c.masters[i].pause() }

// ResumeMaster continues a paused master with SIGCONT.
func (c *Cluster) ResumeMaster(i int) error { return c.masters[i].signal(syscall.SIGCONT) }

// RestartMaster starts master i again with its old addresses and data,
// after killing it if it is still running, and waits until it accepts
// connections (it may not have caught up with the leader yet).
func (c *Cluster) RestartMaster(i int) error {
	m := c.masters[i]
	if m.running() {
		if err := m.kill(); err != nil && !errors.Is(err, errNotRunning) {
			return err
		}
	}
	if err := m.start(); err != nil {
		return err
	}
	return m.waitListening(m.addr, restartWait)
}

// Close stops every process (SIGTERM, then SIGKILL after the grace
// period) and closes the harness's connections. Logs and data stay in Dir.
// It returns the processes' unclean exits, if any.
func (c *Cluster) Close() error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	stop := func(p *proc) {
		defer wg.Done()
		if !p.running() {
			return
		}
		if err := p.stop(c.opts.StopGrace); err != nil && !errors.Is(err, errNotRunning) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	// The frontend first (its calls need the servers), then the tservers,
	// so their last reports reach a live master.
	if c.frontend != nil {
		wg.Add(1)
		go stop(c.frontend)
		wg.Wait()
	}
	for _, p := range c.tservers {
		wg.Add(1)
		go stop(p)
	}
	wg.Wait()
	for _, m := range c.masters {
		if m.proc != nil {
			wg.Add(1)
			go stop(m.proc)
		}
	}
	wg.Wait()
	c.mu.Lock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
	// The hosts after their processes: a mount or namespace in use would
	// stay.
	errs = append(errs, c.hosts.close())
	return errors.Join(errs...)
}

func (o Options) authFlags() []string {
	if o.AuthTokens == "" {
		return nil
	}
	return []string{"--auth-tokens", o.AuthTokens}
}

// Client dials the cluster with the client library.
func (c *Cluster) Client(ctx context.Context, opts ...client.Option) (*client.Client, error) {
	return client.Dial(ctx, c.MasterAddrs(), append(c.clientOptions(), opts...)...)
}

func (c *Cluster) masterClient(addr string) (pb.MasterClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.conns[addr]
	if !ok {
		var err error
		var dial []grpc.DialOption
		if c.opts.Token != "" {
			dial = append(dial, grpc.WithPerRPCCredentials(client.TokenCredentials(c.opts.Token)))
		}
		cc, err = grpc.NewClient(addr, limits.GRPCDialOptions(c.Credentials(), dial...)...)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.conns[addr] = cc
	}
	return pb.NewMasterClient(cc), nil
}

// poll calls try every 50 ms until it reports done, returns an error, a
// process exits, or ctx ends; last describes the state for the timeout
// error.
func (c *Cluster) poll(ctx context.Context, what string, try func(ctx context.Context) (done bool, last string, err error)) error {
	last := ""
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		done, l, err := try(actx)
		cancel()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if l != "" {
			last = l
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w (last: %s)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Leader returns the index of the master that answers as leader (itself:
// followers are asked not to forward), skipping paused masters, waiting
// for one until ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	return c.waitLeader(ctx)
}

func (c *Cluster) waitLeader(ctx context.Context) (int, error) {
	leader := -1
	err := c.poll(ctx, "a master leader", func(ctx context.Context) (bool, string, error) {
		if err := c.startupExit(); err != nil {
			return false, "", err
		}
		var last []string
		for i, m := range c.masters {
			if !m.answering() {
				continue // a paused master would spend the whole try
			}
			mc, err := c.masterClient(m.addr)
			if err != nil {
				return false, "", err
			}
			if _, err := mc.ListTables(notForwarded(ctx), &pb.ListTablesRequest{}); err != nil {
				last = append(last, fmt.Sprintf("%s: %v", m.id, err))
				continue
			}
			leader = i
			return true, "", nil
		}
		return false, strings.Join(last, "; "), nil
	})
	return leader, err
}

// notForwarded marks a call as forwarded already (the header the masters'
// forwarding sets), so a follower refuses it with NotLeader instead of
// relaying it: only the leader itself answers.
func notForwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "bighive-forwarded-by", "e2e-cluster")
}

// startupExit is errEarlyExit while Start has not yet returned the
// cluster; later a dead process is the test's business.
func (c *Cluster) startupExit() error {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if started {
		return nil
	}
	return c.exitedEarly()
}

func (c *Cluster) waitTServers(ctx context.Context) error {
	defer func() {
		c.mu.Lock()
		c.started = true
		c.mu.Unlock()
	}()
	if len(c.tservers) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, a := range c.tsAddrs {
		want[a] = true
	}
	return c.poll(ctx, "every tserver to register", func(ctx context.Context) (bool, string, error) {
		if err := c.startupExit(); err != nil {
			return false, "", err
		}
		resp, err := c.callLeader(ctx, func(ctx context.Context, mc pb.MasterClient) (any, error) {
			return mc.ListTServers(ctx, &pb.ListTServersRequest{})
		})
		if err != nil {
			return false, err.Error(), nil
		}
		live := 0
		for _, ts := range resp.(*pb.ListTServersResponse).Tservers {
			if ts.Live && want[ts.Address] {
				live++
			}
		}
		return live == len(want), fmt.Sprintf("%d of %d tservers live", live, len(want)), nil
	})
}

// callLeader runs fn on the first running, unpaused master that answers it.
func (c *Cluster) callLeader(ctx context.Context, fn func(ctx context.Context, mc pb.MasterClient) (any, error)) (any, error) {
	var errs []error
	for _, m := range c.masters {
		if !m.answering() {
			continue
		}
		mc, err := c.masterClient(m.addr)
		if err != nil {
			return nil, err
		}
		resp, err := fn(ctx, mc)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.id, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("cluster: no master is running")
	}
	return nil, errors.Join(errs...)
}

// WaitServing waits until every tablet of table is served: the leader
// lists a tserver for each and reports it SERVING.
func (c *Cluster) WaitServing(ctx context.Context, table string) error {
	return c.poll(ctx, "table "+table+" to serve", func(ctx context.Context) (bool, string, error) {
		resp, err := c.callLeader(ctx, func(ctx context.Context, mc pb.MasterClient) (any, error) {
			return mc.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: table})
		})
		if err != nil {
			return false, err.Error(), nil
		}
		locs := resp.(*pb.GetTableLocationsResponse).Locations
		waiting := 0
		for _, l := range locs {
			if l.TserverAddress == "" || l.State != pb.TabletState_TABLET_STATE_SERVING {
				waiting++
			}
		}
		return len(locs) > 0 && waiting == 0, fmt.Sprintf("%d of %d tablets not serving", waiting, len(locs)), nil
	})
}
