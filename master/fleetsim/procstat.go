package fleetsim

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) is
// not reachable without cgo).
const clockTick = 10 * time.Millisecond

// Usage is one process's CPU time and memory at one moment, from
// /proc/<pid>/stat and /proc/<pid>/status.
type Usage struct {
	PID int
	At  time.Time
	// CPU is user + system time since the process started.
	CPU time.Duration
	// RSS and HWM are VmRSS and VmHWM (the peak resident set), in bytes.
	RSS, HWM uint64
}

// ReadUsage reads the usage of process pid.
func ReadUsage(pid int) (Usage, error) {
	u := Usage{PID: pid, At: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("fleetsim: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'. utime and stime are fields 14, 15.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return u, fmt.Errorf("fleetsim: /proc/%d/stat: no command name in %q", pid, stat)
	}
	f := strings.Fields(string(stat[end+1:])) // f[0] is field 3
	if len(f) < 13 {
		return u, fmt.Errorf("fleetsim: /proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	for _, s := range f[11:13] {
		ticks, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return u, fmt.Errorf("fleetsim: /proc/%d/stat: CPU time %q: %w", pid, s, err)
		}
		u.CPU += time.Duration(ticks) * clockTick
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("fleetsim: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		for key, dst := range map[string]*uint64{"VmRSS:": &u.RSS, "VmHWM:": &u.HWM} {
			if v, ok := strings.CutPrefix(line, key); ok {
				kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err != nil {
					return u, fmt.Errorf("fleetsim: /proc/%d/status: %s %q: %w", pid, key, v, err)
				}
				*dst = kb << 10
			}
		}
	}
	return u, nil
}

// Cores is the CPU the process used between before and u, in cores; a
// before of another process (a restart in between) counts from zero.
func (u Usage) Cores(before Usage) float64 {
	if before.PID != u.PID {
		before = Usage{At: before.At}
	}
	d := u.At.Sub(before.At)
	if d <= 0 {
		return 0
	}
	return float64(u.CPU-before.CPU) / float64(d)
}
