package ports

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestAddrsDistinctBelowEphemeral: many reservations are distinct, in the
// window, outside the ephemeral range and bindable.
func TestAddrsDistinctBelowEphemeral(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a := AddrT(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		_, ps, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(ps)
		if p < lo || p >= lo+span {
			t.Fatalf("port %d outside the window %d-%d", p, lo, lo+span-1)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("reserved %s not bindable: %v", a, err)
		}
		l.Close()
	}
}

// TestRangeConsecutive: a range is n reserved consecutive ports.
func TestRangeConsecutive(t *testing.T) {
	p, err := Range(5)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for q := p; q < p+5; q++ {
		if _, ok := held[q]; !ok {
			t.Fatalf("port %d of range %d+5 not held", q, p)
		}
	}
}

// TestSkipsLockedAndBound: a port whose lock file another process holds,
// or that something has bound, is not handed out.
func TestSkipsLockedAndBound(t *testing.T) {
	once.Do(bounds)
	if setup != nil {
		t.Fatal(setup)
	}
	mu.Lock()
	defer mu.Unlock()
	// A free port of the window that this process does not hold.
	p := -1
	for q := lo; q < lo+span; q++ {
		if _, ok := held[q]; ok {
			continue
		}
		if tryOne(q) {
			release(q)
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("no free port in the window")
	}
	// Another open file description of the lock file stands for another
	// process: flock locks belong to the description.
	f, err := os.OpenFile(filepath.Join(lockDir(), strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if tryOne(p) {
		t.Fatalf("port %d handed out while another holder locks it", p)
	}
	f.Close()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatal(err)
	}
	if tryOne(p) {
		t.Fatalf("port %d handed out while bound", p)
	}
	l.Close()
	if !tryOne(p) {
		t.Fatalf("port %d not handed out once free", p)
	}
	release(p)
}
