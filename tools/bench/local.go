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
	// TServers is the number of tservers (default 1).
	TServers int
	// Hosts runs the master and each tserver on a host of its own
	// (cluster.HostsOptions: a network namespace each, and with Gluster
	// the tservers' shared root on a GlusterFS volume every tserver host
	// mounts). It needs root.
	Hosts *cluster.HostsOptions
}

// StartLocal starts one master and opts.TServers tservers as real
// processes (built from ./cmd/master and ./cmd/tserver of the module in
// the working directory) on loopback ports, or on hosts, under opts.Dir.
// The caller closes it.
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
	c, err := cluster.Start(ctx, cluster.Options{Masters: 1, TServers: max(opts.TServers, 1), Dir: opts.Dir, Flags: flags, TLS: opts.TLS, Hosts: opts.Hosts})
	if err != nil {
		return nil, fmt.Errorf("bench: start local cluster: %w", err)
	}
	return c, nil
}

// LocalProcs are the server processes of a cluster StartLocal started, by
// pid: on hosts their sockets are in namespaces of their own, where the
// search by listening address does not look.
func LocalProcs(c *cluster.Cluster) []Proc {
	var procs []Proc
	var tservers []string
	for i := 0; i < c.NumTServers(); i++ {
		tservers = append(tservers, c.TServerAddr(i))
	}
	for i, s := range numbered(RoleTServer, tservers) {
		procs = append(procs, Proc{Role: s.role, Pid: c.TServerPID(i), Addr: s.addr})
	}
	for i, s := range numbered(RoleMaster, c.MasterAddrs()) {
		procs = append(procs, Proc{Role: s.role, Pid: c.MasterPID(i), Addr: s.addr})
	}
	return append(procs, Proc{Role: RoleFrontend, Pid: c.FrontendPID(), Addr: c.BigtableAddr()})
}
