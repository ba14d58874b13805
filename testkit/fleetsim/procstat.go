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
	if u.CPU, err = parseStatCPU(stat); err != nil {
		return u, fmt.Errorf("fleetsim: /proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("fleetsim: %w", err)
	}
	if u.RSS, u.HWM, err = parseStatusMem(status); err != nil {
		return u, fmt.Errorf("fleetsim: /proc/%d/status: %w", pid, err)
	}
	return u, nil
}

// parseStatCPU is utime + stime of a /proc/<pid>/stat line (fields 14
// and 15). The command name (field 2) is in parentheses and may hold
// spaces and parentheses: fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(string(stat[end+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var cpu time.Duration
	for _, s := range f[11:13] {
		ticks, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time %q: %w", s, err)
		}
		cpu += time.Duration(ticks) * clockTick
	}
	return cpu, nil
}

// parseStatusMem is VmRSS and VmHWM of a /proc/<pid>/status, in bytes.
func parseStatusMem(status []byte) (rss, hwm uint64, err error) {
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		for key, dst := range map[string]*uint64{"VmRSS:": &rss, "VmHWM:": &hwm} {
			if v, ok := strings.CutPrefix(line, key); ok {
				kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("%s %q: %w", key, v, err)
				}
				*dst = kb << 10
				found++
			}
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("VmRSS or VmHWM missing (%d of 2 found)", found)
	}
	return rss, hwm, nil
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
