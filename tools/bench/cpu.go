package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The CPU time of a phase: the user + system time each measured process
// (this one, the client, and Report.Procs) spent between the start and
// the end of the phase's timed window, and the busy time of the whole
// machine over the same window.

// atClockTick is AT_CLKTCK of the auxiliary vector (linux/auxvec.h): the
// kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat and of
// the times in /proc/stat. It is what sysconf(_SC_CLK_TCK) returns.
const atClockTick = 17

// clockTick is the length of one clock tick: 1 s / AT_CLKTCK, or 10 ms
// (USER_HZ 100, what every Linux architecture Go supports uses) when the
// auxiliary vector does not say.
var clockTick = sync.OnceValue(func() time.Duration {
	auxv, err := unix.Auxv()
	if err == nil {
		for _, kv := range auxv {
			if kv[0] == atClockTick && kv[1] > 0 {
				return time.Second / time.Duration(kv[1])
			}
		}
	}
	return 10 * time.Millisecond
})

// parseStatTicks is utime + stime, in clock ticks, of a /proc/<pid>/stat
// line (fields 14 and 15: the process's threads, living and exited,
// without its children). The command name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseStatTicks(stat []byte) (uint64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(string(stat[end+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// ProcessCPU is the user + system time process pid has used so far, from
// /proc/<pid>/stat.
func ProcessCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := parseStatTicks(stat)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * clockTick(), nil
}

// selfCPU is the user + system time this process has used so far, from
// getrusage (microseconds, finer than /proc's clock ticks).
func selfCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// parseMachineTicks is the busy time of all CPUs, in clock ticks, from the
// "cpu" line of /proc/stat: user, nice, system, irq and softirq (not idle
// or iowait; not steal, the time the hypervisor gave to others; not guest
// and guest_nice, which user and nice already count).
func parseMachineTicks(stat []byte) (uint64, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("first line %q: want cpu and at least 7 times", line)
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system [idle iowait] irq softirq
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("field %d of %q: %w", i, line, err)
		}
		busy += n
	}
	return busy, nil
}

// machineCPU is the busy time of all the machine's CPUs so far.
func machineCPU() (time.Duration, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := parseMachineTicks(stat)
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: %w", err)
	}
	return time.Duration(ticks) * clockTick(), nil
}

// cpuSample is the CPU time used so far by the client, by each of a
// run's procs (-1: unreadable) and by the machine (-1: unknown).
type cpuSample struct {
	client, machine time.Duration
	procs           []time.Duration
}

// sampleCPU reads the CPU time of this process, of procs and of the
// machine.
func sampleCPU(procs []Proc) cpuSample {
	s := cpuSample{client: -1, machine: -1, procs: make([]time.Duration, len(procs))}
	if d, err := selfCPU(); err == nil {
		s.client = d
	}
	for i, p := range procs {
		d, err := ProcessCPU(p.Pid)
		if err != nil {
			d = -1
		}
		s.procs[i] = d
	}
	if d, err := machineCPU(); err == nil {
		s.machine = d
	}
	return s
}

// cpuOver sets res's CPU figures from the samples taken at the start
// (a) and the end (b) of its timed window: each process's CPU time and
// µs per row, the cores the measured processes kept busy and the
// machine's busy cores. A process unreadable in either sample is left
// out.
func cpuOver(res *Result, procs []Proc, a, b cpuSample) {
	add := func(role string, pid int, before, after time.Duration) {
		if before < 0 || after < 0 {
			return
		}
		c := ProcCPU{Role: role, Pid: pid, CPU: after - before}
		if res.Rows > 0 {
			c.PerOp = float64(c.CPU) / 1e3 / float64(res.Rows)
		}
		res.CPU = append(res.CPU, c)
		res.CoresBusy += perSec(c.CPU.Seconds(), res.Elapsed)
	}
	add(RoleClient, os.Getpid(), a.client, b.client)
	for i, p := range procs {
		add(p.Role, p.Pid, a.procs[i], b.procs[i])
	}
	res.MachineBusy = -1
	if a.machine >= 0 && b.machine >= 0 {
		res.MachineBusy = perSec((b.machine - a.machine).Seconds(), res.Elapsed)
	}
}
