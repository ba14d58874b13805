// Command tserver runs a Bighive tablet server.
//
//	tserver --listen 127.0.0.1:7200 --masters 127.0.0.1:7100 --fs-root /shared/bighive
//
// With --bigtable it also serves the Cloud Bigtable API on its gRPC port,
// as a frontend does (package frontend), over a client that reaches this
// tserver's own tablets in-process and the others' over gRPC: a one-tserver
// cluster then answers Bigtable clients without the frontend's extra hop.
//
// It stops cleanly on SIGTERM or SIGINT: in-flight requests finish, the
// log is closed (every acknowledged write is already durable). When its
// log fails (an I/O error: a full disk, a failed fdatasync) it gives up its
// lease, stops and exits with status 1, so the master moves its tablets.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"bighive/client"
	"bighive/frontend"
	"bighive/internal/auth"
	"bighive/internal/faultfile"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
	pb "bighive/proto/bighivepb"
	"bighive/storage/merge"
	"bighive/storage/split"
	"bighive/tserver"
)

func main() {
	var (
		listen    = flag.String("listen", "127.0.0.1:7200", "gRPC `host:port`; also this tserver's WAL prefix, so keep it across restarts")
		advertise = flag.String("advertise", "", "address given to the master and clients (default: the listen address)")
		masters   = flag.String("masters", "127.0.0.1:7100", "comma-separated master gRPC addresses")
		root      = flag.String("fs-root", "", "shared root directory of logs and block stores (required)")
		dataDirs  = flag.String("fs-data-dirs", "", "comma-separated block store data dirs, one per disk (default <fs-root>/blocks/<uuid>)")
		memLimit  = flag.Int64("mem-limit", 256<<20, "write buffer `bytes` of all tablets together that trigger a checkpoint")
		cacheSize = flag.Int64("cache-bytes", 256<<20, "block cache capacity in `bytes`")
		gcPercent = flag.Int("gc-percent", tserver.DefaultGCPercent, "the Go collector's GOGC `percent`, with a soft memory limit of 2 × mem-limit + cache-bytes + 512 MiB; negative: Go's defaults (the GOGC and GOMEMLIMIT environment variables win)")
		obsFlags  = obs.AddFlags(flag.CommandLine, "tserver")
		tlsFiles  tlsconf.Files

		splitThreshold = flag.Int64("split-threshold", 512<<20, "tablet size in `bytes` (TSFiles plus write buffers) over which it splits; negative: no automatic splits")
		splitInterval  = flag.Duration("split-interval", 30*time.Second, "least time between two splits of one tablet")
		maxSplits      = flag.Int("max-splits", 2, "splits this tserver runs at once")
		majorEvery     = flag.Duration("compaction-major-every", 24*time.Hour, "period of each tablet's major compaction, which drops deleted, overwritten and expired cells and purges tombstones; negative: none")
		maxFiles       = flag.Int("compaction-max-files", 6, "TSFiles per tablet over which a merging compaction runs; negative: no merging")
		mergeWidth     = flag.Int("compaction-merge-width", 0, "TSFiles one merging compaction merges (0: compaction-max-files/2+1, at least 2)")
		garbageShare   = flag.Float64("compaction-garbage-share", 0.2, "estimated share of a tablet's entries that a major compaction would drop (tombstones and the deleted, overwritten, expired or dropped-family cells) past which one runs; negative: never")
		compactDuty    = flag.Float64("compaction-duty", 0.2, "share of the time background compactions may run (they rest in between, so they cannot starve writes); 1: no limit")
		backlogFiles   = flag.Int("compaction-backlog-files", 0, "TSFiles per tablet past which its compactions fell behind: they go first (most files first) and skip the duty rest (0: 2 × compaction-max-files; negative: never)")
		stopFiles      = flag.Int("compaction-stop-files", 0, "TSFiles per tablet past which its writes are delayed, 1 ms doubling per further file up to compaction-max-write-delay (0: 2 × compaction-backlog-files; negative: never)")
		maxWriteDelay  = flag.Duration("compaction-max-write-delay", 250*time.Millisecond, "longest delay of one write by compaction-stop-files (at most 1s): writes are slowed, never stopped")
		compactRate    = flag.Int64("compaction-rate", 64<<20, "average `bytes` per second compactions read; negative: unthrottled")
		orphanEvery    = flag.Duration("orphan-every", 10*time.Minute, "period of the orphan pass, which deletes the blocks of this tserver's store that no tablet or backup names; negative: none")
		orphanGrace    = flag.Duration("orphan-grace", 10*time.Minute, "how long a block must have been seen unreferenced before the orphan pass deletes it (0: the default)")
		bigtable       = flag.Bool("bigtable", false, "also serve the Cloud Bigtable API (data and table admin) on the gRPC port, as a frontend would, reaching this tserver's own tablets in-process and other tservers' over gRPC; not with --auth-tokens")
		splitFault     = flag.String("split-fault-file", "", "testing only: a `file` holding a split step number; the split that reaches that step removes the file and kills this process")
		mergeFault     = flag.String("merge-fault-file", "", "testing only: a `file` holding a merge step number; the merge that reaches that step removes the file and kills this process")
	)
	tlsconf.AddFlags(flag.CommandLine, &tlsFiles)
	tokens := auth.TokensFlag(flag.CommandLine)
	flag.Parse()
	obsFlags.HandleVersion(os.Stdout)
	log := obsFlags.Logger(os.Stderr)
	slog.SetDefault(log)
	if *root == "" {
		fmt.Fprintln(os.Stderr, "tserver: --fs-root is required")
		os.Exit(2)
	}
	tlsSrc, err := tlsconf.OpenServer(tlsFiles, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tserver: %v\n", err)
		os.Exit(2)
	}
	authTokens, err := auth.LoadOptional(*tokens)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tserver: --auth-tokens: %v\n", err)
		os.Exit(2)
	}
	if *bigtable && authTokens != nil {
		// The frontend forwards each caller's token on its own RPCs; the
		// in-process path has no RPC to carry it.
		fmt.Fprintln(os.Stderr, "tserver: --bigtable does not work with --auth-tokens yet; run a frontend")
		os.Exit(2)
	}
	if gogc, limit := tserver.TuneGC(*gcPercent, *memLimit, *cacheSize); *gcPercent >= 0 {
		log.Info("tserver: garbage collector", "gogc", gogc, "memory_limit_bytes", limit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var services func(*grpc.Server)
	local := &localTServer{}
	if *bigtable {
		copts := []client.Option{client.WithLogger(log), client.WithLocalTServer(local)}
		if tlsSrc != nil {
			copts = append(copts, client.WithTransportCredentials(tlsconf.Credentials(tlsSrc)))
		}
		c, err := client.Dial(ctx, splitList(*masters), copts...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tserver: --bigtable: %v\n", err)
			os.Exit(2)
		}
		defer c.Close()
		services = frontend.New(c, log).Register
	}
	s, err := tserver.Start(ctx, tserver.Options{
		Services:   services,
		Listen:     *listen,
		Advertise:  *advertise,
		Masters:    splitList(*masters),
		Root:       *root,
		DataDirs:   splitList(*dataDirs),
		AuthTokens: authTokens,
		MemLimit:   *memLimit,
		CacheBytes: *cacheSize,
		Logger:     log,
		HTTPListen: obsFlags.HTTPListen(*listen),
		TLS:        tlsSrc,

		SplitThreshold:      *splitThreshold,
		SplitInterval:       *splitInterval,
		MaxConcurrentSplits: *maxSplits,
		SplitHook:           faultfile.Hook[split.Step](*splitFault, "split", log),
		MergeHook:           faultfile.Hook[merge.Step](*mergeFault, "merge", log),

		CompactionMajorEvery:   *majorEvery,
		CompactionMaxFiles:     *maxFiles,
		CompactionMergeWidth:   *mergeWidth,
		CompactionRate:         *compactRate,
		CompactionGarbageShare: *garbageShare,
		CompactionDuty:         *compactDuty,

		CompactionBacklogFiles:  *backlogFiles,
		CompactionStopFiles:     *stopFiles,
		CompactionMaxWriteDelay: *maxWriteDelay,

		OrphanEvery: *orphanEvery,
		OrphanGrace: *orphanGrace,
	})
	if err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}
	local.s.Store(s)
	select {
	case <-s.Done():
		// The log failed: the tserver gave up its lease and stopped, so
		// the master moves its tablets; it logged the cause already.
		log.Error("tserver stopped", "err", s.Err())
		os.Exit(1)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	if err := s.Close(); err != nil {
		log.Error("shutdown", "err", err)
		os.Exit(1)
	}
}

// localTServer is the tserver as the embedded Bigtable API's client
// reaches it (client.LocalTServer): no address until it started.
type localTServer struct {
	s atomic.Pointer[tserver.Server]
}

func (l *localTServer) Addr() string {
	if s := l.s.Load(); s != nil {
		return s.Addr()
	}
	return ""
}

func (l *localTServer) Command(ctx context.Context, cmd *pb.BatchCommandsRequest_Command) *pb.BatchCommandsResponse_Result {
	return l.s.Load().Command(ctx, cmd)
}

func (l *localTServer) ScanLocal(ctx context.Context, req *pb.ScanRowsRequest) func() (*pb.ScanRowsResponse, error) {
	return l.s.Load().ScanLocal(ctx, req)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
