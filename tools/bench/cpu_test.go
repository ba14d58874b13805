package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       uint64
		err        bool
	}{
		{"plain", "4242 (tserver) S 1 4242 4242 0 -1 4194560 1520 0 0 0 250 31 0 0 20 0 12 0 9000 1000000 700\n", 281, false},
		// A command name may hold spaces and parentheses, even ") R 1 2":
		// the fields count from the last ')'.
		{"name with spaces and parens", "77 (my (odd) name) R 1 2) S 1 77 77 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", 7, false},
		{"no name", "4242 tserver S 1", 0, true},
		{"short", "4242 (tserver) S 1 2 3", 0, true},
		{"not a number", "4242 (tserver) S 1 4242 4242 0 -1 4194560 1520 0 0 0 x 31 0 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatTicks([]byte(tc.stat))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStatTicks = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseMachineTicks(t *testing.T) {
	stat := "cpu  100 2 30 5000 40 5 6 7 8 9\ncpu0 50 1 15 2500 20 2 3 3 4 4\nintr 1\n"
	if got, err := parseMachineTicks([]byte(stat)); err != nil || got != 100+2+30+5+6 {
		t.Errorf("parseMachineTicks = %d, %v; want %d (user nice system irq softirq)", got, err, 100+2+30+5+6)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7\n"} {
		if _, err := parseMachineTicks([]byte(bad)); err == nil {
			t.Errorf("parseMachineTicks(%q) succeeded", bad)
		}
	}
}

// TestReadCPU: this process's CPU time grows as it spins, by getrusage
// and by /proc/<pid>/stat alike (the latter in clock ticks of
// 1/AT_CLKTCK s).
func TestReadCPU(t *testing.T) {
	if tick := clockTick(); tick <= 0 || time.Second%tick != 0 {
		t.Fatalf("clock tick %v", tick)
	}
	self0, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	proc0, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Spin until getrusage counts 100 ms more (the machine may be busy).
	self1 := self0
	for deadline := time.Now().Add(30 * time.Second); self1-self0 < 100*time.Millisecond && time.Now().Before(deadline); {
		self1, _ = selfCPU()
	}
	proc1, _ := ProcessCPU(os.Getpid())
	if d := proc1 - proc0; self1-self0 < 100*time.Millisecond || d < self1-self0-3*clockTick() {
		t.Errorf("spinning: getrusage %v, /proc %v", self1-self0, d)
	}
	if m, err := machineCPU(); err != nil || m <= 0 {
		t.Errorf("machine CPU %v, %v", m, err)
	}
}

func TestCPUOver(t *testing.T) {
	res := Result{Rows: 1000, Elapsed: 2 * time.Second}
	procs := []Proc{{Role: "tserver", Pid: 7}, {Role: "master", Pid: 8}}
	a := cpuSample{client: time.Second, machine: 10 * time.Second, procs: []time.Duration{time.Second, -1}}
	b := cpuSample{client: 1500 * time.Millisecond, machine: 13 * time.Second, procs: []time.Duration{2 * time.Second, time.Second}}
	cpuOver(&res, procs, a, b)
	client, _ := res.CPUOf(RoleClient)
	ts, _ := res.CPUOf("tserver")
	if client.CPU != 500*time.Millisecond || client.PerOp != 500 || ts.CPU != time.Second || ts.PerOp != 1000 || ts.Pid != 7 {
		t.Errorf("client %+v, tserver %+v; want 500 ms and 500 µs/op, 1 s and 1000 µs/op", client, ts)
	}
	if _, ok := res.CPUOf("master"); ok {
		t.Error("a process unreadable at the start has a figure")
	}
	if res.CoresBusy != 0.75 || res.MachineBusy != 1.5 {
		t.Errorf("cores busy %v, machine %v; want 0.75, 1.5", res.CoresBusy, res.MachineBusy)
	}
	if line := res.cpuLine([]string{RoleClient, "tserver", "master"}, 2); line != "cpu µs/op: client 500.0, tserver 1000.0, master -; cores busy 0.75 of 2 (machine 1.50)" {
		t.Errorf("cpu line %q", line)
	}
}
