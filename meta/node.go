package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	spb "bighive/proto/storagepb"
	"bighive/storage/vfs"
)

// Peer is one voter of the bootstrap configuration.
type Peer struct {
	ID       string
	RaftAddr string
}

// NodeConfig configures OpenNode.
type NodeConfig struct {
	// ID is this node's raft server id (stable across restarts).
	ID string
	// Dir is the data directory (meta.db and raft/ live here).
	Dir string
	// RaftAddr is the TCP address the raft transport listens on and
	// advertises. Ignored when Transport is set.
	RaftAddr string
	// Transport, if set, is used instead of a TCP transport on RaftAddr.
	Transport raft.Transport
	// StreamLayer, if set (and Transport is not), carries raft's network
	// transport instead of plain TCP (the mutual-TLS layer of tlsconf);
	// the node closes it.
	StreamLayer raft.StreamLayer
	// Peers is the bootstrap configuration, this node included. Empty means
	// a single-node cluster of this node. Used only when Dir holds no raft
	// state yet; afterwards the configuration comes from the log.
	Peers []Peer
	// Raft tunes raft (timeouts, snapshot threshold); nil uses
	// raft.DefaultConfig. LocalID, Logger and NoSnapshotRestoreOnStart are
	// set by OpenNode.
	Raft *raft.Config
	// Logger receives meta's and raft's logs; nil is slog.Default().
	Logger *slog.Logger
	// FS is the filesystem for the files meta writes itself; nil is vfs.Default.
	FS vfs.FS
}

// Node is one raft member with the metadata FSM.
type Node struct {
	Raft *raft.Raft
	FSM  *FSM

	id     string
	trans  raft.Transport
	closer io.Closer // the TCP transport, if OpenNode made it
	store  *raftboltdb.BoltStore
	log    *slog.Logger
}

// OpenNode opens the FSM and the raft stores in cfg.Dir, bootstraps the
// cluster if the directory is new, and starts raft.
func OpenNode(cfg NodeConfig) (*Node, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lg = lg.With("node", cfg.ID)
	fsys := cfg.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	if cfg.ID == "" {
		return nil, errors.New("meta: node id is empty")
	}
	raftDir := filepath.Join(cfg.Dir, "raft")
	if err := fsys.MkdirAll(raftDir, 0o755); err != nil {
		return nil, fmt.Errorf("meta: create %s: %w", raftDir, err)
	}
	n := &Node{id: cfg.ID, log: lg}
	ok := false
	defer func() {
		if !ok {
			n.closeStores()
		}
	}()

	var err error
	if n.FSM, err = OpenFSM(fsys, filepath.Join(cfg.Dir, "meta.db"), lg); err != nil {
		return nil, err
	}
	if n.store, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(raftDir, "raft.db")}); err != nil {
		return nil, fmt.Errorf("meta: open raft log: %w", err)
	}
	hl := hclogFor(lg)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hl)
	if err != nil {
		return nil, fmt.Errorf("meta: open snapshot store: %w", err)
	}
	if err := n.catchUpFromSnapshot(snaps); err != nil {
		return nil, err
	}

	n.trans = cfg.Transport
	if n.trans == nil && cfg.StreamLayer != nil {
		nt := raft.NewNetworkTransportWithLogger(cfg.StreamLayer, 3, 10*time.Second, hl)
		n.trans, n.closer = nt, nt
	}
	if n.trans == nil {
		addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
		if err != nil {
			return nil, fmt.Errorf("meta: raft address %q: %w", cfg.RaftAddr, err)
		}
		tcp, err := raft.NewTCPTransportWithLogger(cfg.RaftAddr, addr, 3, 10*time.Second, hl)
		if err != nil {
			return nil, fmt.Errorf("meta: raft transport on %s: %w", cfg.RaftAddr, err)
		}
		n.trans, n.closer = tcp, tcp
	}

	rc := raft.DefaultConfig()
	if cfg.Raft != nil {
		c := *cfg.Raft
		rc = &c
	}
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hl
	// meta.db is durable and records its applied index: raft need not
	// rebuild it from the newest snapshot at every start.
	rc.NoSnapshotRestoreOnStart = true

	existing, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("meta: inspect raft state: %w", err)
	}
	if !existing {
		conf := raft.Configuration{}
		peers := cfg.Peers
		if len(peers) == 0 {
			peers = []Peer{{ID: cfg.ID, RaftAddr: string(n.trans.LocalAddr())}}
		}
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{
				Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		if err := raft.BootstrapCluster(rc, n.store, n.store, snaps, n.trans, conf); err != nil {
			return nil, fmt.Errorf("meta: bootstrap: %w", err)
		}
		lg.Info("bootstrapped new raft cluster", "voters", len(conf.Servers))
	}
	if n.Raft, err = raft.NewRaft(rc, n.FSM, n.store, n.store, snaps, n.trans); err != nil {
		return nil, fmt.Errorf("meta: start raft: %w", err)
	}
	ok = true
	return n, nil
}

// catchUpFromSnapshot restores the newest snapshot if meta.db is older
// than it (meta.db lost or replaced); otherwise meta.db is kept.
func (n *Node) catchUpFromSnapshot(snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	latest := list[0]
	if n.FSM.AppliedIndex() >= latest.Index {
		return nil
	}
	_, rc, err := snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("meta: open snapshot %s: %w", latest.ID, err)
	}
	n.log.Info("meta.db is behind the newest snapshot; restoring it",
		"applied", n.FSM.AppliedIndex(), "snapshot_index", latest.Index)
	return n.FSM.Restore(rc)
}

// Apply proposes cmd and waits until it is committed and applied here (the
// leader) or ctx ends. A nil error means the Result is the command's
// outcome; Result.Err says whether it was refused.
func (n *Node) Apply(ctx context.Context, cmd *spb.MetaCommand) (*Result, error) {
	cmd.Version = CommandVersion
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("meta: encode command: %w", err)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := n.Raft.Apply(data, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return nil, apierr.Wrap(apierr.CodeOf(ctx.Err()), ctx.Err(), "meta: waiting for the raft commit (the change may still apply)")
	case err := <-done:
		if err != nil {
			return nil, RaftError(err)
		}
	}
	res, _ := f.Response().(*Result)
	if res == nil {
		return nil, apierr.Wrap(apierrInternal, errors.New("no result"), "meta: command applied without a result")
	}
	return res, nil
}

// RaftError maps raft's errors to gRPC-coded ones: not the leader or
// leadership lost → Unavailable (retry at the leader), shutdown →
// Unavailable, anything else → Internal.
func RaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrAbortedByRestore):
		return apierr.Wrap(apierrUnavailable, err, "meta: raft cannot commit here now; retry at the leader")
	}
	return apierr.Wrap(apierrInternal, err, "meta: raft")
}

// Close shuts raft down and closes the stores.
func (n *Node) Close() error {
	var err error
	if n.Raft != nil {
		err = n.Raft.Shutdown().Error()
	}
	n.closeStores()
	return err
}

func (n *Node) closeStores() {
	if n.closer != nil {
		_ = n.closer.Close()
	}
	if n.store != nil {
		_ = n.store.Close()
	}
	if n.FSM != nil {
		_ = n.FSM.Close()
	}
}

// hclogFor routes raft's hclog output into slog at its level.
func hclogFor(lg *slog.Logger) hclog.Logger {
	std := log.New(slogWriter{lg}, "", 0)
	return hclog.FromStandardLogger(std, &hclog.LoggerOptions{Name: "raft", Level: hclog.Info})
}

type slogWriter struct{ lg *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	if len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	lvl := slog.LevelInfo
	switch {
	case strings.Contains(msg, "[ERROR]"):
		lvl = slog.LevelError
	case strings.Contains(msg, "[WARN]"):
		lvl = slog.LevelWarn
	case strings.Contains(msg, "[DEBUG]"), strings.Contains(msg, "[TRACE]"):
		lvl = slog.LevelDebug
	}
	w.lg.Log(context.Background(), lvl, msg, "component", "raft")
	return len(p), nil
}
