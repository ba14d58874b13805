package hosts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrUnavailable is wrapped by Available's error: the machine cannot run
// hosts (not root, or a command or /dev/fuse is missing).
var ErrUnavailable = errors.New("hosts: unavailable")

var (
	aptOnce sync.Once
	aptErr  error
)

// Available reports whether hosts can run here, and with gluster whether
// GlusterFS volumes can too: root, the ip, unshare, nsenter and iptables
// commands, and for gluster /dev/fuse and the gluster, glusterd and
// glusterfs commands, and that namespaces can be created. When GlusterFS is missing it runs apt-get install
// glusterfs-server glusterfs-client once per process. The error wraps
// ErrUnavailable and names what is missing.
func Available(gluster bool) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: hosts need root (network and mount namespaces, a bridge, FUSE mounts)", ErrUnavailable)
	}
	var missing []string
	for _, c := range []string{"ip", "unshare", "nsenter", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if gluster {
		if glusterMissing() != nil {
			aptOnce.Do(func() { aptErr = aptInstall("glusterfs-server", "glusterfs-client") })
		}
		missing = append(missing, glusterMissing()...)
		if _, err := os.Stat("/dev/fuse"); err != nil {
			missing = append(missing, "/dev/fuse")
		}
	}
	if len(missing) == 0 {
		// Root without the capabilities (a container's): no namespaces.
		if out, err := exec.Command("unshare", "--net", "--mount", "true").CombinedOutput(); err != nil {
			return fmt.Errorf("%w: cannot create network and mount namespaces (unshare: %v: %s)", ErrUnavailable, err, bytes.TrimSpace(out))
		}
	}
	if len(missing) > 0 {
		err := fmt.Errorf("%w: missing %s (Debian: apt-get install iproute2 util-linux iptables glusterfs-server glusterfs-client)",
			ErrUnavailable, strings.Join(missing, ", "))
		if aptErr != nil {
			err = fmt.Errorf("%w; apt-get: %w", err, aptErr)
		}
		return err
	}
	return nil
}

func glusterMissing() []string {
	var missing []string
	for _, c := range []string{"gluster", "glusterd", "glusterfs"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	return missing
}

func aptInstall(pkgs ...string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-qq"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, lastLines(out, 5))
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run runs a command and returns its error with its output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("hosts: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Network is a bridge and the hosts on it.
type Network struct {
	bridge string
	prefix string // "10.a.b."

	mu     sync.Mutex
	hosts  []*Host
	closed bool
}

// NewNetwork creates a bridge with a free /24 and gives the machine's side
// its .1 address.
func NewNetwork(ctx context.Context) (*Network, error) {
	prefix, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	n := &Network{bridge: "bh" + randHex(4), prefix: prefix}
	if _, err := run(ctx, "ip", "link", "add", n.bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"addr", "add", n.HostAddr() + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// freeSubnet picks a 10.a.b.0/24 that no interface of the machine is in.
func freeSubnet() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("hosts: %w", err)
	}
	for try := 0; try < 100; try++ {
		a, _ := rand.Int(rand.Reader, big.NewInt(50))
		b, _ := rand.Int(rand.Reader, big.NewInt(256))
		prefix := fmt.Sprintf("10.%d.%d.", 200+a.Int64(), b.Int64())
		_, subnet, _ := net.ParseCIDR(prefix + "0/24")
		taken := false
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
				taken = true
			}
		}
		if !taken {
			return prefix, nil
		}
	}
	return "", errors.New("hosts: no free 10.x.y.0/24 subnet")
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Bridge is the bridge's interface name.
func (n *Network) Bridge() string { return n.bridge }

// HostAddr is the machine's own address on the bridge: where hosts reach
// the GlusterFS server, and where the test's connections come from.
func (n *Network) HostAddr() string { return n.prefix + "1" }

// AddHost starts a host named name (for logs and errors) with the next
// free address (.2, .3, …) and, with mountNS, a mount namespace of its
// own.
func (n *Network) AddHost(ctx context.Context, name string, mountNS bool) (*Host, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("hosts: network closed")
	}
	idx := len(n.hosts) + 2
	h := &Host{Name: name, Addr: n.prefix + strconv.Itoa(idx), net: n, veth: fmt.Sprintf("%sv%d", n.bridge, idx), mountNS: mountNS}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	if idx > 254 {
		return nil, errors.New("hosts: more than 253 hosts on one network")
	}
	if err := h.start(ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hosts: host %s: %w", name, err)
	}
	return h, nil
}

// Close closes every host and deletes the bridge. It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	hosts := n.hosts
	closed := n.closed
	n.closed = true
	n.mu.Unlock()
	if closed {
		return nil
	}
	var errs []error
	for _, h := range hosts {
		errs = append(errs, h.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := run(ctx, "ip", "link", "del", n.bridge); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Host is one network namespace (and perhaps mount namespace) on a
// Network.
type Host struct {
	Name string
	Addr string // its address on the bridge, without a port

	net     *Network
	veth    string
	mountNS bool

	mu     sync.Mutex
	holder *exec.Cmd
	done   chan struct{} // closed when the holder has exited
	mounts []*Mount
	closed bool
}

func (h *Host) start(ctx context.Context) error {
	args := []string{"--net"}
	if h.mountNS {
		args = append(args, "--mount", "--propagation", "private")
	}
	cmd := exec.Command("unshare", append(args, "sleep", "infinity")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	h.mu.Lock()
	h.holder, h.done = cmd, done
	h.mu.Unlock()
	go func() { cmd.Wait(); close(done) }()
	// unshare has set up the namespaces once it has exec'd sleep.
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("holder process %d did not start: %v", pid, err)
		}
	}
	p := strconv.Itoa(pid)
	if _, err := run(ctx, "ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", p); err != nil {
		return err
	}
	if _, err := run(ctx, "ip", "link", "set", h.veth, "master", h.net.bridge, "up"); err != nil {
		return err
	}
	for _, a := range [][]string{
		{"addr", "add", h.Addr + "/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"link", "set", "lo", "up"},
	} {
		if _, err := h.Run(ctx, "ip", a...); err != nil {
			return err
		}
	}
	return nil
}

// PID is the holder's process id: /proc/PID/ns/ names the host's
// namespaces, /proc/PID/mounts its mount table.
func (h *Host) PID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holder.Process.Pid
}

// Wrap is the command prefix that runs a command inside the host:
// nsenter into its network namespace and, if it has one, its mount
// namespace. nsenter execs the command, so the process keeps the pid (and
// the Pdeathsig) of the process started.
func (h *Host) Wrap() []string {
	w := []string{"nsenter", "--target", strconv.Itoa(h.PID()), "--net"}
	if h.mountNS {
		w = append(w, "--mount")
	}
	return append(w, "--")
}

// Command is exec.Command of name inside the host, with Pdeathsig SIGKILL.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	w := h.Wrap()
	cmd := exec.Command(w[0], append(append(w[1:], name), args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Run runs a command inside the host and returns its combined output.
func (h *Host) Run(ctx context.Context, name string, args ...string) (string, error) {
	w := h.Wrap()
	return run(ctx, w[0], append(append(w[1:], name), args...)...)
}

// Cut drops every packet between the host and addrs (iptables in the
// host's namespace, both directions, established connections included);
// the host keeps its other paths: the bridge's own address (the GlusterFS
// server, the test's connections) and the other hosts.
func (h *Host) Cut(ctx context.Context, addrs ...string) error {
	for _, a := range addrs {
		if _, err := h.Run(ctx, "iptables", "-I", "INPUT", "-s", a, "-j", "DROP"); err != nil {
			return err
		}
		if _, err := h.Run(ctx, "iptables", "-I", "OUTPUT", "-d", a, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// CutPort drops the TCP packets between addr and the host's own port
// (iptables in the host's namespace, both directions, established
// connections included): addr can no longer reach the server listening
// there, while the host's other traffic with addr (its own outgoing
// connections, a GlusterFS mount served from addr) goes on.
func (h *Host) CutPort(ctx context.Context, addr string, port int) error {
	p := strconv.Itoa(port)
	if _, err := h.Run(ctx, "iptables", "-I", "INPUT", "-s", addr, "-p", "tcp", "--dport", p, "-j", "DROP"); err != nil {
		return err
	}
	_, err := h.Run(ctx, "iptables", "-I", "OUTPUT", "-d", addr, "-p", "tcp", "--sport", p, "-j", "DROP")
	return err
}

// Heal removes every rule Cut and CutPort added.
func (h *Host) Heal(ctx context.Context) error {
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		if _, err := h.Run(ctx, "iptables", "-F", chain); err != nil {
			return err
		}
	}
	return nil
}

// LinkDown takes the host off the bridge (its veth down): nothing reaches
// it and it reaches nothing, the GlusterFS server included.
func (h *Host) LinkDown(ctx context.Context) error {
	_, err := run(ctx, "ip", "link", "set", h.veth, "down")
	return err
}

// Close unmounts the host's mounts, deletes its veth pair, kills its
// holder and waits for it to exit. The namespace itself goes once nothing
// refers to it: the kernel keeps it (with nothing visible from the
// machine) while a closed TCP connection of its processes lingers. The
// caller stops the processes it started in the host first. Close is
// idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	mounts, holder, done := h.mounts, h.holder, h.done
	h.mu.Unlock()
	var errs []error
	for _, m := range mounts {
		errs = append(errs, m.Close())
	}
	if _, err := net.InterfaceByName(h.veth); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := run(ctx, "ip", "link", "del", h.veth); err != nil {
			errs = append(errs, err)
		}
	}
	if holder != nil {
		holder.Process.Kill()
		<-done
	}
	return errors.Join(errs...)
}
