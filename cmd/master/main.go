// Command master runs a Bighive master.
//
// One node (development):
//
//	master --id m1 --listen 127.0.0.1:7100 --raft-listen 127.0.0.1:7101 --data /var/lib/bighive/m1
//
// Three nodes: every master gets the same --peers list, id=raftaddr=grpcaddr
// for each master including itself (the gRPC address is what a follower
// forwards to and names in NotLeader errors):
//
//	master --id m1 --listen 10.0.0.1:7100 --raft-listen 10.0.0.1:7101 --data /data/m1 \
//	  --peers m1=10.0.0.1:7101=10.0.0.1:7100,m2=10.0.0.2:7101=10.0.0.2:7100,m3=10.0.0.3:7101=10.0.0.3:7100
//
// The first start in an empty --data directory bootstraps the raft cluster
// with the peers (or with this node alone); later starts recover from the
// directory and ignore --peers for membership. SIGTERM or SIGINT stops it
// cleanly.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"bighive/internal/auth"
	"bighive/internal/faultfile"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
	"bighive/master"
)

func main() {
	var (
		id        = flag.String("id", "m1", "this master's raft `id`, stable across restarts")
		listen    = flag.String("listen", "127.0.0.1:7100", "gRPC `host:port`")
		advertise = flag.String("advertise", "", "gRPC address other masters and clients reach this one at (default: --listen, or this id's entry in --peers)")
		raftAddr  = flag.String("raft-listen", "127.0.0.1:7101", "raft transport `host:port` (also advertised to the other masters)")
		peers     = flag.String("peers", "", "every master as `id=raftaddr=grpcaddr,...` (absent: a single-node cluster)")
		data      = flag.String("data", "bighive-data/master", "data `dir`ectory (metadata, raft log, snapshots)")
		lease     = flag.Duration("lease", 5*time.Second, "tserver lease granted by each heartbeat")
		heartbeat = flag.Duration("heartbeat", time.Second, "heartbeat interval the tservers are told to use")
		maxMoves  = flag.Int("max-moves", 8, "rebalancing moves in flight at most")
		perIntv   = flag.Int("moves-per-interval", 4, "rebalancing moves started in any --move-interval at most, cluster-wide (negative: no bound)")
		moveIntv  = flag.Duration("move-interval", 0, "the interval of --moves-per-interval (default: one --lease)")
		warmup    = flag.Duration("rebalance-warmup", 0, "a tserver takes no tablet from the others by rebalancing until this long after it registered (default: two --lease; negative: none)")
		grace     = flag.Duration("startup-grace", 0, "a new leader assigns no tablet and declares no tserver dead until this long passed or every known tserver checked in (default: one --lease; negative: none)")

		splitThreshold = flag.Int64("split-threshold", master.DefaultSplitThreshold, "the tservers' --split-threshold in `bytes` (the master cannot see theirs: set the same value); negative: the tservers do not split. No automatic merge makes a tablet of half of it or more")
		mergeThreshold = flag.Int64("merge-threshold", 0, "adjacent tablets both smaller than this many `bytes` merge automatically (0: ¼ of --split-threshold, or 128 MiB when it is negative); negative: no automatic merges")
		mergeFault     = flag.String("merge-fault-file", "", "testing only: a `file` holding a master merge step number; the leader that reaches that step removes the file and kills this process")
		backupFault    = flag.String("backup-fault-file", "", "testing only: a `file` holding a master backup step number (or pause:N); the leader that reaches that step removes the file and kills this process (or holds the step)")
		mergeCheck     = flag.Duration("merge-check-interval", 30*time.Second, "how often the leader looks for small adjacent tablets to merge")
		mergeMinAge    = flag.Duration("merge-min-age", 10*time.Minute, "how long both tablets must have been seen small before they merge (keeps a fresh pre-split table)")
		autoMerge      = flag.Bool("auto-merge", true, "merge small adjacent tablets automatically (false: only `bighive merge`)")
		obsFlags       = obs.AddFlags(flag.CommandLine, "master")
		tlsFiles       tlsconf.Files
		tokens         = auth.TokensFlag(flag.CommandLine)
		bootAdmin      = flag.String("bootstrap-admin", "", "`principal` granted admin on every table at start when no grant exists yet")
		raftTuning     = addRaftFlags(flag.CommandLine)
	)
	tlsconf.AddFlags(flag.CommandLine, &tlsFiles)
	flag.Parse()
	obsFlags.HandleVersion(os.Stdout)
	log := obsFlags.Logger(os.Stderr)
	slog.SetDefault(log)

	ps, err := master.ParsePeers(*peers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "master: --peers: %v\n", err)
		os.Exit(2)
	}
	grpcAddr := *advertise
	for _, p := range ps {
		if p.ID == *id && grpcAddr == "" {
			grpcAddr = p.GRPCAddr
		}
	}
	authTokens, err := auth.LoadOptional(*tokens)
	if err != nil {
		fmt.Fprintf(os.Stderr, "master: --auth-tokens: %v\n", err)
		os.Exit(2)
	}
	if *lease <= *heartbeat {
		fmt.Fprintln(os.Stderr, "master: --lease must be longer than --heartbeat (a lease should span several heartbeats)")
		os.Exit(2)
	}
	raftCfg, err := raftTuning.config()
	if err != nil {
		fmt.Fprintf(os.Stderr, "master: %v\n", err)
		os.Exit(2)
	}
	tlsSrc, err := tlsconf.OpenServer(tlsFiles, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "master: %v\n", err)
		os.Exit(2)
	}
	// Take SIGTERM from the start, so a stop during start-up still shuts
	// down cleanly once the master is up.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("listen failed", "addr", *listen, "err", err)
		os.Exit(1)
	}
	m, err := master.Start(master.Config{
		ID: *id, Dir: *data, RaftAddr: *raftAddr, GRPCAddr: grpcAddr, Peers: ps,
		Lease: *lease, Heartbeat: *heartbeat, MaxMoves: *maxMoves, StartupGrace: *grace,
		MovesPerInterval: *perIntv, MoveInterval: *moveIntv, RebalanceWarmup: *warmup, Logger: log,
		SplitThreshold: *splitThreshold, MergeThreshold: mergeThresholdFlag(*mergeThreshold, *autoMerge),
		MergeCheckInterval: *mergeCheck, MergeMinAge: *mergeMinAge, MergeHook: faultfile.Hook[master.MergeStep](*mergeFault, "merge", log),
		BackupHook: faultfile.Hook[master.BackupStep](*backupFault, "backup", log),
		HTTPListen: obsFlags.HTTPListen(*listen), TLS: tlsSrc,
		AuthTokens: authTokens, BootstrapAdmin: *bootAdmin, Raft: raftCfg,
	}, lis)
	if err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}
	s := <-sig
	log.Info("shutting down", "signal", s.String())
	if err := m.Close(); err != nil {
		log.Error("shutdown", "err", err)
		os.Exit(1)
	}
}

// mergeThresholdFlag is the merge threshold, negative (off) without
// --auto-merge.
func mergeThresholdFlag(threshold int64, auto bool) int64 {
	if !auto {
		return -1
	}
	return threshold
}
