package master

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"bighive/internal/auth"
	"bighive/internal/tlsconf"
	pb "bighive/proto/bighivepb"
)

// Peer is one master of the cluster.
type Peer struct {
	ID       string
	RaftAddr string
	GRPCAddr string
}

// ParsePeers parses "id=raftaddr=grpcaddr,..." (the --peers flag).
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(item), "=")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return nil, fmt.Errorf("master: peer %q: want id=raftaddr=grpcaddr", item)
		}
		if seen[parts[0]] {
			return nil, fmt.Errorf("master: peer id %q listed twice", parts[0])
		}
		seen[parts[0]] = true
		out = append(out, Peer{ID: parts[0], RaftAddr: parts[1], GRPCAddr: parts[2]})
	}
	return out, nil
}

// Config configures a master.
type Config struct {
	// ID is this master's raft id; with Peers it must be one of them.
	ID string
	// Dir is the data directory.
	Dir string
	// RaftAddr is the raft transport's TCP address.
	RaftAddr string
	// GRPCAddr is this master's advertised gRPC address (what a follower
	// names in NotLeader). Defaults to the listener's address.
	GRPCAddr string
	// Peers lists every master, this one included; empty means a
	// single-node cluster.
	Peers []Peer

	// Lease is how long a heartbeat keeps a tserver's lease (default 5 s).
	Lease time.Duration
	// Heartbeat is the interval tservers are told to heartbeat at (default 1 s).
	Heartbeat time.Duration
	// DeadMargin: a tserver is dead once Lease + DeadMargin passed since its
	// last heartbeat (default 2 heartbeats).
	DeadMargin time.Duration
	// ConfirmWindow: the leader grants leases only while a quorum
	// confirmed its leadership within this window (it asks every quarter
	// of it), so a new leader may declare a tserver it never heard from
	// dead once Lease + ConfirmWindow passed since its own start, not
	// Lease + DeadMargin (confirm.go). Default a quarter heartbeat, at
	// least 100 ms; at most DeadMargin.
	ConfirmWindow time.Duration
	// StartupGrace: a new leader session (a master failover, or a cold
	// start) neither assigns unassigned tablets nor declares tservers dead
	// until this long has passed or every tserver the metadata knows has
	// heartbeated or registered, whichever comes first, so the tablets are
	// spread over the tservers that check in (HBase's wait for region
	// servers). Default one Lease; negative: no grace.
	StartupGrace time.Duration
	// MaxMoves bounds rebalancing moves in flight (default 8).
	MaxMoves int
	// MovesPerInterval bounds the rebalancing moves the leader starts in
	// any MoveInterval, cluster-wide, on top of MaxMoves in flight: a
	// move stalls its tablet, so the tablets of a tserver that came back
	// are taken from the others a few at a time (default 4 per
	// MoveInterval, which defaults to one Lease; negative: no bound).
	MovesPerInterval int
	MoveInterval     time.Duration
	// RebalanceWarmup: a tserver whose registration this leader saw is
	// not a rebalancing target until this long after it (default two
	// Leases; negative: none). A tserver that was stopped past its lease
	// comes back as a new incarnation with no tablet; it still gets
	// unassigned tablets at once, but takes none from the others until it
	// has heartbeated through the warm-up, so a flapping tserver does not
	// pull tablets back and forth.
	RebalanceWarmup time.Duration
	// SplitThreshold is the tservers' --split-threshold, which the master
	// cannot see (default DefaultSplitThreshold, the tservers' default;
	// negative: the tservers do not split). The automatic merger never
	// merges a pair whose sizes sum to half of it or more, and the
	// default MergeThreshold is ¼ of it.
	SplitThreshold int64
	// MergeThreshold: adjacent tablets both reported smaller than this
	// many bytes are merged automatically (default ¼ of SplitThreshold,
	// or DefaultMergeThreshold when the tservers do not split; negative:
	// no automatic merges). MergeCheckInterval is how often the leader
	// looks for such pairs (default 30 s); MergeMinAge how long both must
	// have been seen small first (default 10 min), so a freshly pre-split
	// table is not merged back while it fills.
	MergeThreshold     int64
	MergeCheckInterval time.Duration
	MergeMinAge        time.Duration
	// MergeHook, when set, is called at each MergeStep of the master's
	// side of a merge; an error fails the step. Testing only: the e2e
	// kill test's fault file (--merge-fault-file) kills the process there.
	MergeHook func(MergeStep) error
	// BackupHook, when set, is called at each BackupStep of a backup or a
	// restore; an error fails the call. Testing only: the e2e kill test's
	// fault file (--backup-fault-file) kills the process there.
	BackupHook func(BackupStep) error
	// BackupFlushedHook, when set, is called after each attempt's flushes
	// of a CreateBackup, before its record (backup.go). Testing only: a
	// test splits a tablet there to see the record refused and retried.
	BackupFlushedHook func(table string)
	// BackupExpiryInterval is how often the leader deletes the backups
	// whose expiry time has passed (default 1 min).
	BackupExpiryInterval time.Duration
	// ResendInterval: an assignment the tserver does not report is sent
	// again at most this often (default 3 heartbeats).
	ResendInterval time.Duration
	// TickInterval is the leader loop's period (default Heartbeat / 2).
	TickInterval time.Duration
	// ForwardAttemptTimeout bounds one attempt of a call a follower
	// forwards to the leader, so a hung leader costs one attempt and the
	// forwarding moves on to another master (default 5 s; the incoming
	// call's deadline bounds it too).
	ForwardAttemptTimeout time.Duration
	// DDLChunk bounds the tablets one raft command of CreateTable,
	// DeleteTable or the leader's assignment writes (default
	// DefaultDDLChunk): a bigger table is created and deleted in several
	// commands, and assigned over several ticks (ddl.go).
	DDLChunk int

	// Raft tunes raft; nil is DefaultRaftConfig.
	Raft *raft.Config
	// Logger; nil is slog.Default().
	Logger *slog.Logger
	// HTTPListen is the address of the HTTP port (/metrics,
	// /debug/pprof/); empty: no HTTP port.
	HTTPListen string
	// TLS, if set, is the --tls-* files: gRPC, the HTTP port and raft
	// serve TLS 1.3 only, every dial verifies its peer, and internal
	// methods need a server certificate. Nil: plaintext.
	TLS *tlsconf.Source
	// Metrics is the registry the master's metrics go to (default: a new
	// one with the Go runtime and process collectors).
	Metrics *prometheus.Registry

	// AuthTokens, when set, turns authentication and authorization on
	// (--auth-tokens): every call but the tservers' internal ones needs a
	// known token (or client certificate) and a grant.
	AuthTokens *auth.Tokens
	// BootstrapAdmin is granted admin on every table when a leader starts
	// and no grant exists (--bootstrap-admin).
	BootstrapAdmin string

	// heartbeatHook (tests) runs in Heartbeat between reading the
	// metadata and granting the lease.
	heartbeatHook func(*pb.HeartbeatRequest)
	// verifyLeader (tests), if set, replaces raft's VerifyLeader in the
	// leader's confirmation of its leadership (confirm.go).
	verifyLeader func() error
	// ddlChunkHook (tests) runs after each committed chunk of a
	// CreateTable or DeleteTable call (ddlchunk.go), with the call's context.
	ddlChunkHook func(ctx context.Context, table string, chunk int)
}

// DefaultRaftConfig is the raft configuration of a master whose
// Config.Raft is nil: hashicorp/raft's defaults with elections twice as
// quick, heartbeat and election timeouts of 500 ms (raft's are 1 s). A
// follower calls an election after 0.5-1 s without the leader, and the
// election succeeds once the last follower's own timeout passed (until
// then it still knows a leader and refuses to vote), so a stopped leader
// is replaced in 0.5-1 s, up to about 2 s when two candidates collide,
// against 1-3 s with raft's defaults. That is what a failover of the
// leader adds to a tserver's recovery when both fail together (the new
// leader then waits a lease and the confirm window from its start). The
// leader still steps down after 500 ms without a quorum (raft's default
// LeaderLeaseTimeout, at most the heartbeat timeout).
func DefaultRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout, c.ElectionTimeout = 500*time.Millisecond, 500*time.Millisecond
	c.LeaderLeaseTimeout = min(c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	return c
}

func (c *Config) setDefaults() {
	if c.Lease <= 0 {
		c.Lease = 5 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	if c.DeadMargin <= 0 {
		c.DeadMargin = 2 * c.Heartbeat
	}
	if c.ConfirmWindow <= 0 {
		c.ConfirmWindow = max(c.Heartbeat/4, 100*time.Millisecond)
	}
	c.ConfirmWindow = min(c.ConfirmWindow, c.DeadMargin)
	if c.StartupGrace == 0 {
		c.StartupGrace = c.Lease
	}
	if c.MaxMoves <= 0 {
		c.MaxMoves = 8
	}
	if c.MovesPerInterval == 0 {
		c.MovesPerInterval = 4
	}
	if c.MoveInterval <= 0 {
		c.MoveInterval = c.Lease
	}
	if c.RebalanceWarmup == 0 {
		c.RebalanceWarmup = 2 * c.Lease
	}
	if c.SplitThreshold == 0 {
		c.SplitThreshold = DefaultSplitThreshold
	}
	if c.MergeThreshold == 0 {
		c.MergeThreshold = DefaultMergeThreshold
		if c.SplitThreshold > 0 {
			c.MergeThreshold = max(1, c.SplitThreshold/4)
		}
	}
	if c.MergeCheckInterval <= 0 {
		c.MergeCheckInterval = defaultMergeCheck
	}
	if c.MergeMinAge <= 0 {
		c.MergeMinAge = defaultMergeMinAge
	}
	if c.BackupExpiryInterval <= 0 {
		c.BackupExpiryInterval = defaultBackupExpiry
	}
	if c.ResendInterval <= 0 {
		c.ResendInterval = 3 * c.Heartbeat
	}
	if c.TickInterval <= 0 {
		c.TickInterval = c.Heartbeat / 2
	}
	if c.DDLChunk <= 0 {
		c.DDLChunk = DefaultDDLChunk
	}
	if c.ForwardAttemptTimeout <= 0 {
		c.ForwardAttemptTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SplitThreshold > 0 && c.MergeThreshold > c.SplitThreshold/4 {
		c.Logger.Warn("merge threshold above ¼ of the split threshold: a pair merges only while its sizes sum below half the split threshold",
			"merge_threshold", c.MergeThreshold, "split_threshold", c.SplitThreshold)
	}
}
