package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// span is how many ports below the ephemeral range are used.
const span = 12000

var (
	mu    sync.Mutex
	held  = map[int]*os.File{} // reserved by this process, lock file open
	lo    int                  // lowest port used; the window is lo to lo+span-1
	setup error
	once  sync.Once
)

// bounds reads the ephemeral range and places the window below it (or,
// if too little room is below it, above it).
func bounds() {
	ephLo, ephHi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && a <= z {
				ephLo, ephHi = a, z
			}
		}
	}
	switch {
	case ephLo-span >= 1024:
		lo = ephLo - span
	case ephHi+1+span <= 65536:
		lo = ephHi + 1
	default:
		setup = fmt.Errorf("ports: no room for %d ports outside the ephemeral range %d-%d", span, ephLo, ephHi)
	}
	if setup == nil {
		if err := os.MkdirAll(lockDir(), 0o777); err != nil {
			setup = fmt.Errorf("ports: %w", err)
		}
	}
}

func lockDir() string { return filepath.Join(os.TempDir(), "bighive-test-ports") }

// Range reserves n consecutive ports and returns the first.
func Range(n int) (int, error) {
	once.Do(bounds)
	if setup != nil {
		return 0, setup
	}
	if n < 1 || n > span {
		return 0, fmt.Errorf("ports: cannot reserve %d consecutive ports", n)
	}
	mu.Lock()
	defer mu.Unlock()
	// Every first port of the window, from a random one on.
	starts := span - n + 1
	first := rand.IntN(starts)
	for i := range starts {
		if p := lo + (first+i)%starts; tryRange(p, n) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("ports: no %d consecutive free ports in %d-%d", n, lo, lo+span-1)
}

// tryRange reserves ports p..p+n-1, all or none. Callers hold mu.
func tryRange(p, n int) bool {
	var got []int
	for q := p; q < p+n; q++ {
		if !tryOne(q) {
			for _, g := range got {
				release(g)
			}
			return false
		}
		got = append(got, q)
	}
	return true
}

// tryOne reserves port p: not held by this process, its lock file locked
// by no other process, and bindable now. Callers hold mu.
func tryOne(p int) bool {
	if _, ok := held[p]; ok {
		return false
	}
	f, err := os.OpenFile(filepath.Join(lockDir(), strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		f.Close() // drops the lock
		return false
	}
	l.Close()
	held[p] = f
	return true
}

// release drops a reservation made by a tryRange that failed part way.
func release(p int) {
	if f, ok := held[p]; ok {
		f.Close()
		delete(held, p)
	}
}

// Addr reserves one port and returns its loopback address, 127.0.0.1:port.
func Addr() (string, error) {
	p, err := Range(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// AddrT is Addr failing the test on an error.
func AddrT(tb testing.TB) string {
	tb.Helper()
	a, err := Addr()
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
