package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostsGluster starts a cluster on hosts over GlusterFS and checks
// what the harness promises: every process on its own address, each
// tserver host with its own client mount that the machine's mount table
// does not show, one volume seen alike from every host, a cut that stops
// a host's traffic with the masters but not with the machine, and a Close
// that leaves no bridge, veth, mount, holder or volume behind.
func TestHostsGluster(t *testing.T) {
	c := New(t, Options{TServers: 2, Hosts: &HostsOptions{Gluster: true}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	seen := map[string]bool{}
	for _, a := range append(c.MasterAddrs(), c.TServerAddr(0), c.TServerAddr(1)) {
		host, _, _ := net.SplitHostPort(a)
		if seen[host] || host == "127.0.0.1" || !strings.HasPrefix(host, "10.") {
			t.Errorf("process address %s: want a host address of its own on the bridge (seen %v)", a, seen)
		}
		seen[host] = true
	}

	shared := filepath.Join(c.Dir(), "shared")
	if mountedAt(t, "/proc/self/mounts", shared) {
		t.Errorf("the machine's own mount table shows a glusterfs mount at %s", shared)
	}
	for i := 0; i < 2; i++ {
		if !mountedAt(t, fmt.Sprintf("/proc/%d/mounts", c.TServerHost(i).PID()), shared) {
			t.Errorf("tserver host %d has no glusterfs mount at %s", i, shared)
		}
	}

	// One volume: written on host 0, read on host 1 and in the brick.
	probe := filepath.Join(shared, "probe")
	if _, err := c.TServerHost(0).Run(ctx, "sh", "-c", "echo from-ts0 > "+probe); err != nil {
		t.Fatal(err)
	}
	if out, err := c.TServerHost(1).Run(ctx, "cat", probe); err != nil || out != "from-ts0\n" {
		t.Errorf("host 1 reads %q, %v; want host 0's from-ts0", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(c.Volume().Brick, "probe")); err != nil || string(b) != "from-ts0\n" {
		t.Errorf("brick holds %q, %v", b, err)
	}

	// The cut: ts0 reaches no master, the machine still reaches ts0.
	master := c.MasterAddrs()[0]
	dialFrom := func(i int) error {
		_, err := c.TServerHost(i).Run(ctx, "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(master, ":", "/", 1))
		return err
	}
	if err := dialFrom(0); err != nil {
		t.Fatalf("before the cut, ts0 cannot reach master %s: %v", master, err)
	}
	if err := c.CutTServerFromMasters(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(0); err == nil {
		t.Errorf("after the cut, ts0 still reaches master %s", master)
	}
	if err := dialFrom(1); err != nil {
		t.Errorf("ts1, not cut, cannot reach master %s: %v", master, err)
	}
	if conn, err := net.DialTimeout("tcp", c.TServerAddr(0), 2*time.Second); err != nil {
		t.Errorf("after the cut, the machine cannot reach ts0: %v", err)
	} else {
		conn.Close()
	}
	if err := c.HealTServer(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(0); err != nil {
		t.Errorf("after the heal, ts0 cannot reach master %s: %v", master, err)
	}

	var pids []int
	for i := 0; i < 2; i++ {
		pids = append(pids, c.TServerHost(i).PID())
	}
	pids = append(pids, c.MasterHost(0).PID())
	bridge, vol := c.Network().Bridge(), c.Volume().Name
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("bridge %s is still there after Close", bridge)
	}
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/ns", pid)); err == nil {
			t.Errorf("host holder %d still runs after Close", pid)
		}
	}
	if _, err := os.Stat(filepath.Join("/var/lib/glusterd/vols", vol)); err == nil {
		t.Errorf("volume %s still exists after Close", vol)
	}
}

// mountedAt reports whether the mount table at path lists a glusterfs
// mount at dir.
func mountedAt(t *testing.T, path, dir string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == dir && strings.HasPrefix(f[2], "fuse.glusterfs") {
			return true
		}
	}
	return false
}
