package fleetsim

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{"plain", "4242 (master) S 1 4242 4242 0 -1 4194560 1520 0 0 0 250 31 0 0 20 0 12 0 9000 1000000 700", 2810 * time.Millisecond, false},
		{"name with spaces and parens", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", 70 * time.Millisecond, false},
		{"no name", "4242 master S 1", 0, true},
		{"short", "4242 (master) S 1 2 3", 0, true},
		{"not a number", "4242 (master) S 1 4242 4242 0 -1 4194560 1520 0 0 0 x 31 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.stat))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStatCPU = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseStatusMem(t *testing.T) {
	rss, hwm, err := parseStatusMem([]byte("Name:\tmaster\nVmHWM:\t   30720 kB\nVmRSS:\t   28672 kB\nThreads:\t12\n"))
	if err != nil || rss != 28672<<10 || hwm != 30720<<10 {
		t.Fatalf("parseStatusMem = %d, %d, %v; want %d, %d", rss, hwm, err, 28672<<10, 30720<<10)
	}
	if _, _, err := parseStatusMem([]byte("Name:\tkthreadd\n")); err == nil {
		t.Fatal("a status without VmRSS (a kernel thread) parsed")
	}
}

// ReadUsage of this process: memory is resident, its peak at least the
// current resident set, and CPU time was spent (this test binary ran).
func TestReadUsageSelf(t *testing.T) {
	var u Usage
	var err error
	// Spin until the kernel has counted a clock tick of CPU (10 ms).
	for until, x := time.Now().Add(10*time.Second), 0; ; x++ {
		if x%100_000 == 0 {
			if u, err = ReadUsage(os.Getpid()); err != nil {
				t.Fatal(err)
			}
			if u.CPU > 0 || time.Now().After(until) {
				break
			}
		}
	}
	if u.RSS == 0 || u.HWM < u.RSS || u.PID != os.Getpid() {
		t.Fatalf("usage %+v: want RSS > 0, HWM >= RSS, this pid", u)
	}
	if _, err := ReadUsage(-1); err == nil {
		t.Fatal("usage of pid -1 read")
	}
	// A restart in between (another pid) counts from zero.
	before := Usage{PID: u.PID + 1, At: u.At.Add(-time.Second), CPU: time.Hour}
	if c := u.Cores(before); c <= 0 {
		t.Fatalf("cores since another process's usage = %v, want the new process's own, > 0", c)
	}
}
