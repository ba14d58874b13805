package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"bighive/testkit/hosts"
)

// HostsOptions runs a cluster on hosts (package testkit/hosts): every
// master and tserver in a network namespace of its own, with its own
// address on a bridge, so that a host can be cut from the others while
// it keeps running. The frontend and the caller stay on the machine and
// reach the hosts through the bridge.
type HostsOptions struct {
	// Gluster puts the tservers' shared root and data directories on a
	// GlusterFS volume (its brick <Dir>/brick) that every tserver host
	// mounts with a client of its own, in a mount namespace of its own, at
	// <Dir>/shared. Without it the tservers share <Dir>/root as in local
	// mode.
	Gluster bool
	// GlusterDefaults runs the volume and its clients with GlusterFS's own
	// caching defaults instead of the coherent configuration
	// (hosts.CoherentVolumeOptions, hosts.CoherentClientArgs), under which
	// a host sees another's changes at once; docs/gluster.md says what
	// the defaults let a host read stale.
	GlusterDefaults bool
	// VolumeOptions are gluster volume set KEY VALUE pairs applied (after
	// the coherent configuration's) before the volume starts.
	VolumeOptions []string
	// Replicas is the number of bricks of the volume (<Dir>/brick,
	// <Dir>/brick1, …), each a replica of every file (default 1: a plain
	// volume). With 3 the volume keeps serving while one brick is
	// stopped (StopBrick).
	Replicas int
}

// Ports inside a host: every host has its own network namespace, so they
// are fixed.
const (
	hostGRPCPort = 7000
	hostRaftPort = 7001
	hostHTTPPort = 7002
)

// hostEnv is the hosts of one cluster.
type hostEnv struct {
	net      *hosts.Network
	vol      *hosts.Volume // nil without Gluster
	masters  []*hosts.Host
	tservers []*hosts.Host
	mounts   []*hosts.Mount // tserver i's mount, without Gluster nil
	shared   string         // the mount point inside the tserver hosts
}

// HostsAvailable reports whether a cluster with opts.Hosts can start on
// this machine; the error says what is missing.
func HostsAvailable(opts HostsOptions) error { return hosts.Available(opts.Gluster) }

func startHosts(ctx context.Context, opts Options) (_ *hostEnv, err error) {
	if opts.TLS {
		return nil, errors.New("cluster: TLS on hosts is not supported (the certificates name loopback addresses)")
	}
	if err := hosts.Available(opts.Hosts.Gluster); err != nil {
		return nil, err
	}
	e := &hostEnv{shared: filepath.Join(opts.Dir, "shared")}
	if e.net, err = hosts.NewNetwork(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if opts.Hosts.Gluster {
		volOpts := opts.Hosts.VolumeOptions
		if !opts.Hosts.GlusterDefaults {
			volOpts = append(append([]string(nil), hosts.CoherentVolumeOptions...), volOpts...)
		}
		bricks := []string{filepath.Join(opts.Dir, "brick")}
		for i := 1; i < opts.Hosts.Replicas; i++ {
			bricks = append(bricks, filepath.Join(opts.Dir, "brick"+strconv.Itoa(i)))
		}
		if e.vol, err = hosts.NewReplicatedVolume(ctx, e.net.HostAddr(), bricks, volOpts...); err != nil {
			return e, err
		}
	}
	for i := 0; i < opts.Masters; i++ {
		h, err := e.net.AddHost(ctx, fmt.Sprintf("m%d", i+1), false)
		if err != nil {
			return e, err
		}
		e.masters = append(e.masters, h)
	}
	for i := 0; i < opts.TServers; i++ {
		name := fmt.Sprintf("ts%d", i)
		h, err := e.net.AddHost(ctx, name, true)
		if err != nil {
			return e, err
		}
		e.tservers = append(e.tservers, h)
		var m *hosts.Mount
		if e.vol != nil {
			var clientArgs []string
			if !opts.Hosts.GlusterDefaults {
				clientArgs = hosts.CoherentClientArgs
			}
			if m, err = h.Mount(ctx, e.vol, e.shared, filepath.Join(opts.Dir, name+".glusterfs.log"), clientArgs...); err != nil {
				return e, err
			}
		}
		e.mounts = append(e.mounts, m)
	}
	return e, nil
}

// close tears down the mounts, the hosts, the bridge and the volume.
func (e *hostEnv) close() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.net != nil {
		errs = append(errs, e.net.Close())
	}
	if e.vol != nil {
		errs = append(errs, e.vol.Close())
	}
	return errors.Join(errs...)
}

func hostAddr(h *hosts.Host, port int) string { return h.Addr + ":" + strconv.Itoa(port) }

// sharedBase is where tservers' --fs-root and data directories live, as
// the tservers see it.
func (c *Cluster) sharedBase() string {
	if c.hosts != nil && c.hosts.vol != nil {
		return c.hosts.shared
	}
	return c.opts.Dir
}

// RootDir is where the caller reads the tservers' shared root (--fs-root)
// on this machine: <Dir>/root, or on GlusterFS the root's directory in the
// volume's brick (read only: the brick is the server's copy).
func (c *Cluster) RootDir() string {
	if c.hosts != nil && c.hosts.vol != nil {
		return filepath.Join(c.hosts.vol.Brick, "root")
	}
	return filepath.Join(c.opts.Dir, "root")
}

// TServerHost is tserver i's host; nil when the cluster does not run on
// hosts.
func (c *Cluster) TServerHost(i int) *hosts.Host {
	if c.hosts == nil {
		return nil
	}
	return c.hosts.tservers[i]
}

// MasterHost is master i's host; nil when the cluster does not run on
// hosts.
func (c *Cluster) MasterHost(i int) *hosts.Host {
	if c.hosts == nil {
		return nil
	}
	return c.hosts.masters[i]
}

// Network is the hosts' network; nil when the cluster does not run on
// hosts.
func (c *Cluster) Network() *hosts.Network {
	if c.hosts == nil {
		return nil
	}
	return c.hosts.net
}

var errNoHosts = errors.New("cluster: not running on hosts (Options.Hosts)")

// CutTServerFromMasters drops every packet between tserver i's host and
// the masters' hosts. The tserver keeps running, keeps its mount of the
// shared volume and stays reachable from the caller and the other
// tservers.
func (c *Cluster) CutTServerFromMasters(ctx context.Context, i int) error {
	if c.hosts == nil {
		return errNoHosts
	}
	var addrs []string
	for _, m := range c.hosts.masters {
		addrs = append(addrs, m.Addr)
	}
	return c.hosts.tservers[i].Cut(ctx, addrs...)
}

// CutTServerFromClients drops every packet between the machine (the
// test's clients and the frontend) and tserver i's gRPC port. The
// tserver keeps its masters, its lease and its mount of the shared
// volume (served from the machine too, on other ports): only its clients
// lose it.
func (c *Cluster) CutTServerFromClients(ctx context.Context, i int) error {
	if c.hosts == nil {
		return errNoHosts
	}
	return c.hosts.tservers[i].CutPort(ctx, c.hosts.net.HostAddr(), hostGRPCPort)
}

// CutMasterFromMasters drops every packet between master i's host and
// the other masters' hosts: a leader so cut loses its quorum while the
// tservers and the clients still reach it.
func (c *Cluster) CutMasterFromMasters(ctx context.Context, i int) error {
	if c.hosts == nil {
		return errNoHosts
	}
	var addrs []string
	for j, m := range c.hosts.masters {
		if j != i {
			addrs = append(addrs, m.Addr)
		}
	}
	return c.hosts.masters[i].Cut(ctx, addrs...)
}

// HealMaster removes the cuts of master i's host.
func (c *Cluster) HealMaster(ctx context.Context, i int) error {
	if c.hosts == nil {
		return errNoHosts
	}
	return c.hosts.masters[i].Heal(ctx)
}

// HealTServer removes the cuts of tserver i's host.
func (c *Cluster) HealTServer(ctx context.Context, i int) error {
	if c.hosts == nil {
		return errNoHosts
	}
	return c.hosts.tservers[i].Heal(ctx)
}

// KillTServerHost is a crash of tserver i's whole host: SIGKILL of the
// tserver and of its GlusterFS client (what the client had not sent to
// the server is lost), then its link goes down. The host cannot be
// restarted.
func (c *Cluster) KillTServerHost(i int) error {
	if c.hosts == nil {
		return errNoHosts
	}
	err := c.tservers[i].kill()
	if m := c.hosts.mounts[i]; m != nil {
		m.Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(err, c.hosts.tservers[i].LinkDown(ctx))
}

// Volume is the cluster's GlusterFS volume; nil without
// HostsOptions.Gluster.
func (c *Cluster) Volume() *hosts.Volume {
	if c.hosts == nil {
		return nil
	}
	return c.hosts.vol
}
