package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The roles of the processes whose CPU a run measures.
const (
	RoleClient   = "client" // the bench's own process
	RoleTServer  = "tserver"
	RoleMaster   = "master"
	RoleFrontend = "frontend"
)

// Proc is a server process of this machine whose CPU time a run measures.
type Proc struct {
	// Role names it in the report: master, tserver, frontend, numbered
	// (tserver1, tserver2, …) when there are several of one role; or what
	// --pids called it.
	Role string `json:"role"`
	Pid  int    `json:"pid"`
	// Addr is the address it was found listening on ("" when given by
	// pid).
	Addr string `json:"addr,omitempty"`
}

// ParseProcs parses the --pids flag: role=pid pairs separated by commas.
func ParseProcs(s string) ([]Proc, error) {
	var procs []Proc
	for _, item := range strings.Split(s, ",") {
		role, pid, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.Atoi(pid)
		if !ok || role == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: %q is not role=pid", ErrOptions, item)
		}
		if role == RoleClient || slices.ContainsFunc(procs, func(p Proc) bool { return p.Role == role }) {
			return nil, fmt.Errorf("%w: role %q named twice (the client is this process)", ErrOptions, role)
		}
		procs = append(procs, Proc{Role: role, Pid: n})
	}
	return procs, nil
}

// server is a server of the run known by its address.
type server struct{ role, addr string }

// numbered gives role to addrs: role itself for one, role1, role2, … for
// several.
func numbered(role string, addrs []string) []server {
	var out []server
	for i, a := range addrs {
		r := role
		if len(addrs) > 1 {
			r = fmt.Sprintf("%s%d", role, i+1)
		}
		out = append(out, server{r, a})
	}
	return out
}

// findProcs finds the process of this machine that listens on each
// server's address (through /proc/net/tcp{,6} and the sockets among the
// /proc/<pid>/fd of the processes this user may read). It returns the
// processes found, in the order of servers, and a line for each server
// not found saying why. Servers of one process (`bighive dev` serves
// them all in one) are one Proc, whose role joins theirs with "+".
func findProcs(ctx context.Context, servers []server) ([]Proc, []string) {
	var listeners []listener
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if b, err := os.ReadFile(f); err == nil {
			listeners = append(listeners, parseNetTCP(b)...)
		}
	}
	local := localIPs()
	want := map[uint64]bool{}
	inodes := make([]uint64, len(servers))
	var missing []string
	for i, s := range servers {
		ino, err := listenerOf(ctx, listeners, local, s.addr)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s %s: %v", s.role, s.addr, err))
			continue
		}
		inodes[i], want[ino] = ino, true
	}
	owners := socketOwners(want)
	var procs []Proc
	for i, s := range servers {
		if inodes[i] == 0 {
			continue
		}
		pid, ok := owners[inodes[i]]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s %s: its socket is in no process this user may read", s.role, s.addr))
			continue
		}
		if j := slices.IndexFunc(procs, func(p Proc) bool { return p.Pid == pid }); j >= 0 {
			procs[j].Role += "+" + s.role
			procs[j].Addr += "," + s.addr
			continue
		}
		procs = append(procs, Proc{Role: s.role, Pid: pid, Addr: s.addr})
	}
	return procs, missing
}

// listenerOf is the inode of the listening socket serving addr on this
// machine.
func listenerOf(ctx context.Context, listeners []listener, local []net.IP, addr string) (uint64, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", p, err)
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if host != "" {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return 0, err
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	isLocal := func(ip net.IP) bool {
		return ip.IsLoopback() || ip.IsUnspecified() || slices.ContainsFunc(local, ip.Equal)
	}
	if host != "" && !slices.ContainsFunc(ips, isLocal) {
		return 0, fmt.Errorf("not an address of this machine")
	}
	for _, l := range listeners {
		if l.port == port && (host == "" || l.ip.IsUnspecified() || slices.ContainsFunc(ips, l.ip.Equal)) {
			return l.inode, nil
		}
	}
	return 0, fmt.Errorf("no socket of this machine listens there")
}

// localIPs are the addresses of this machine's interfaces.
func localIPs() []net.IP {
	addrs, _ := net.InterfaceAddrs()
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

// listener is a listening TCP socket of /proc/net/tcp or tcp6.
type listener struct {
	ip    net.IP
	port  int
	inode uint64
}

// tcpListen is the state LISTEN in /proc/net/tcp (include/net/tcp_states.h).
const tcpListen = "0A"

// parseNetTCP returns the listening sockets of a /proc/net/tcp or
// /proc/net/tcp6 table. A line is
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
//
// with local_address as hex IP:port: the port a number, the IP the 4
// (IPv4) or 16 (IPv6) bytes of the address in network order printed as
// 32-bit words of the kernel's byte order.
func parseNetTCP(table []byte) []listener {
	var out []listener
	for _, line := range bytes.Split(table, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		ipHex, portHex, ok := strings.Cut(f[1], ":")
		port, err1 := strconv.ParseUint(portHex, 16, 16)
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if !ok || err1 != nil || err2 != nil || len(ipHex)%8 != 0 || (len(ipHex) != 8 && len(ipHex) != 32) {
			continue
		}
		ip := make(net.IP, len(ipHex)/2)
		bad := false
		for w := 0; w < len(ipHex)/8; w++ {
			v, err := strconv.ParseUint(ipHex[8*w:8*w+8], 16, 32)
			bad = bad || err != nil
			binary.NativeEndian.PutUint32(ip[4*w:], uint32(v))
		}
		if !bad {
			out = append(out, listener{ip: ip, port: int(port), inode: inode})
		}
	}
	return out
}

// socketOwners maps each socket inode of want to the pid of a process
// holding it open, looking through the /proc/<pid>/fd this user may read.
func socketOwners(want map[uint64]bool) map[uint64]int {
	owners := map[uint64]int{}
	if len(want) == 0 {
		return owners
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			link, err := os.Readlink(dir + "/" + fd.Name())
			if err != nil {
				continue
			}
			s, ok := strings.CutPrefix(link, "socket:[")
			if !ok {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
			if err == nil && want[ino] {
				if _, seen := owners[ino]; !seen {
					owners[ino] = pid
				}
			}
		}
	}
	return owners
}
