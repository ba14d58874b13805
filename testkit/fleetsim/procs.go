package fleetsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"bighive/master"
	pb "bighive/proto/bighivepb"
)

// proc is one master running as an OS process of the cmd/master binary.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and was waited for
	err  error         // its exit, once done is closed
	log  *os.File
}

// masterArgs are the cmd/master flags that give a master cfg. A setting
// the binary has no flag for fails the test rather than being dropped.
func masterArgs(cfg master.Config, peers []master.Peer, grpcAddr, httpAddr string) ([]string, error) {
	if cfg.DeadMargin != 0 || cfg.ResendInterval != 0 || cfg.TickInterval != 0 || cfg.TLS != nil || cfg.HTTPListen != "" {
		return nil, errors.New("fleetsim: the master binary has no flag for the dead margin, resend or tick interval, TLS or HTTP address a tweak set")
	}
	var ps []string
	for _, p := range peers {
		ps = append(ps, p.ID+"="+p.RaftAddr+"="+p.GRPCAddr)
	}
	args := []string{"--id", cfg.ID, "--listen", grpcAddr, "--raft-listen", cfg.RaftAddr, "--data", cfg.Dir,
		"--http-listen", httpAddr, "--log-level", "warn"}
	if os.Getenv("FLEETSIM_LOG") != "" {
		args[len(args)-1] = "info"
	}
	if len(peers) > 1 {
		args = append(args, "--peers", strings.Join(ps, ","))
	}
	dur := func(flag string, d time.Duration) {
		if d != 0 {
			args = append(args, flag, d.String())
		}
	}
	dur("--lease", cfg.Lease)
	dur("--heartbeat", cfg.Heartbeat)
	dur("--merge-check-interval", cfg.MergeCheckInterval)
	dur("--merge-min-age", cfg.MergeMinAge)
	dur("--move-interval", cfg.MoveInterval)
	dur("--rebalance-warmup", cfg.RebalanceWarmup)
	if cfg.MovesPerInterval != 0 {
		args = append(args, "--moves-per-interval", strconv.Itoa(cfg.MovesPerInterval))
	}
	if cfg.MaxMoves != 0 {
		args = append(args, "--max-moves", strconv.Itoa(cfg.MaxMoves))
	}
	if cfg.MergeThreshold != 0 {
		args = append(args, "--merge-threshold", strconv.FormatInt(cfg.MergeThreshold, 10))
	}
	if r := cfg.Raft; r != nil {
		d := raft.DefaultConfig()
		if r.MaxAppendEntries != d.MaxAppendEntries || r.CommitTimeout != d.CommitTimeout || r.BatchApplyCh != d.BatchApplyCh {
			return nil, errors.New("fleetsim: the master binary has no flag for a raft setting a tweak changed")
		}
		dur("--raft-heartbeat-timeout", r.HeartbeatTimeout)
		dur("--raft-election-timeout", r.ElectionTimeout)
		dur("--raft-leader-lease-timeout", r.LeaderLeaseTimeout)
		dur("--raft-snapshot-interval", r.SnapshotInterval)
		args = append(args, "--raft-snapshot-threshold", strconv.FormatUint(r.SnapshotThreshold, 10),
			"--raft-trailing-logs", strconv.FormatUint(r.TrailingLogs, 10))
	}
	return args, nil
}

// startProc starts master i as a process and waits until its gRPC port
// accepts connections.
func (c *Masters) startProc(i int, cfg master.Config) error {
	c.tb.Helper()
	args, err := masterArgs(cfg, c.Peers, c.Peers[i].GRPCAddr, c.HTTPAddrs[i])
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(c.Dirs[i]), c.Peers[i].ID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if os.Getenv("FLEETSIM_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", c.Peers[i].ID, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	c.procs[i] = p
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", c.Peers[i].GRPCAddr, time.Second)
		if err == nil {
			_ = conn.Close()
			// The listener may be another process's that took the port
			// (this one then exits at its own listen, at once): the
			// master counts as started once it outlived that moment.
			select {
			case <-p.done: // reported just below
			case <-time.After(startSettle):
				return nil
			}
		}
		select {
		case <-p.done:
			c.procs[i] = nil
			out, _ := os.ReadFile(logf.Name())
			if bytes.Contains(out, []byte("address already in use")) {
				return fmt.Errorf("%s exited at start (%v): %w; its log: %s", c.Peers[i].ID, p.err, errPortTaken, logf.Name())
			}
			return fmt.Errorf("%s exited at start (%v); its log: %s", c.Peers[i].ID, p.err, logf.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen on %s after a minute: %v", c.Peers[i].ID, c.Peers[i].GRPCAddr, err)
		}
	}
}

// startSettle is how long a master process must outlive a successful dial
// of its port to count as started.
const startSettle = 500 * time.Millisecond

// errPortTaken: a master could not listen on a port picked for it, which
// another process took between the pick and the master's start.
var errPortTaken = errors.New("a port picked for it was taken meanwhile")

// stopProc sends master i sig and waits until it exited; SIGTERM that
// does not end it within 30 s is followed by SIGKILL.
func (c *Masters) stopProc(i int, sig syscall.Signal) {
	p := c.procs[i]
	if p == nil {
		return
	}
	c.procs[i] = nil
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		c.tb.Logf("%s did not stop on %v within 30 s: SIGKILL", c.Peers[i].ID, sig)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// conn is a gRPC connection to master i (kept across its restarts).
func (c *Masters) conn(i int) (pb.MasterClient, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.conns[i] == nil {
		cc, err := grpc.NewClient(c.Peers[i].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("fleetsim: connect %s: %w", c.Peers[i].ID, err)
		}
		c.conns[i] = cc
	}
	return pb.NewMasterClient(c.conns[i]), nil
}

// notForwarded marks a call as forwarded already, so that a follower
// refuses it instead of relaying it to the leader: only the ready leader
// answers it.
func notForwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "bighive-forwarded-by", "fleetsim")
}

// procIsLeader reports whether master process i is the ready leader: it
// answers ListTables itself (a master that is not, or is still catching
// up, refuses with Unavailable).
func (c *Masters) procIsLeader(ctx context.Context, i int) bool {
	mc, err := c.conn(i)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = mc.ListTables(notForwarded(ctx), &pb.ListTablesRequest{})
	return err == nil
}

// procUnassigned lists the tablets master process i has no owner for, from
// its GetTableLocations of every table (ok false when it could not say).
func (c *Masters) procUnassigned(ctx context.Context, i int) (ids []string, ok bool) {
	mc, err := c.conn(i)
	if err != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(notForwarded(ctx), 5*time.Second)
	defer cancel()
	tables, err := mc.ListTables(ctx, &pb.ListTablesRequest{})
	if err != nil {
		return nil, false
	}
	for _, t := range tables.Tables {
		locs, err := mc.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: t.GetSchema().GetName()})
		if err != nil {
			return nil, false
		}
		for _, l := range locs.Locations {
			if l.TserverUuid == "" {
				ids = append(ids, l.TabletId)
			}
		}
	}
	return ids, true
}

// scrape is a Gatherer of master process i's /metrics.
func (c *Masters) scrape(i int) prometheus.Gatherer {
	url := "http://" + c.HTTPAddrs[i] + "/metrics"
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fleetsim: scrape %s: %w", url, err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("fleetsim: scrape %s: %w", url, err)
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		return out, nil
	})
}
