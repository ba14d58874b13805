package bench

import (
	"context"
	"fmt"

	"bighive/testkit/cluster"
)

// LocalOptions configure StartLocal.
type LocalOptions struct {
	// Dir holds the cluster's data and process logs (required).
	Dir string
	// CacheBytes and MemLimit are the tserver's --cache-bytes and
	// --mem-limit (0: the tserver's defaults).
	CacheBytes, MemLimit int64
	// TLS runs the cluster with TLS (certificates generated under Dir;
	// see cluster.Options.TLS).
	TLS bool
	// APIOnTServer starts the tserver with --bigtable: it serves the Cloud
	// Bigtable API itself (the cluster's frontend process runs as well).
	APIOnTServer bool
}

// StartLocal starts one master and one tserver as real processes (built
// from ./cmd/master and ./cmd/tserver of the module in the working
// directory) on loopback ports under opts.Dir. The caller closes it.
func StartLocal(ctx context.Context, opts LocalOptions) (*cluster.Cluster, error) {
	var flags []string
	if opts.CacheBytes > 0 {
		flags = append(flags, fmt.Sprintf("--cache-bytes=%d", opts.CacheBytes))
	}
	if opts.MemLimit > 0 {
		flags = append(flags, fmt.Sprintf("--mem-limit=%d", opts.MemLimit))
	}
	if opts.APIOnTServer {
		flags = append(flags, "--bigtable")
	}
	c, err := cluster.Start(ctx, cluster.Options{Masters: 1, TServers: 1, Dir: opts.Dir, Flags: flags, TLS: opts.TLS})
	if err != nil {
		return nil, fmt.Errorf("bench: start local cluster: %w", err)
	}
	return c, nil
}
