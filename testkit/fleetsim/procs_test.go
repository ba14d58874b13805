package fleetsim

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"bighive/master"
	"bighive/testkit/cluster"
)

var flagProcs = flag.Bool("scale.procs", true, "run the 3 masters as OS processes of cmd/master (false: in the test process)")

// startWorldMasters starts the scenario's 3 masters: as OS processes of
// the cmd/master binary (found or built as testkit/cluster does) when s.procs,
// else in this process.
func startWorldMasters(t *testing.T, s size, extra func(*master.Config)) *Masters {
	t.Helper()
	if !s.procs {
		t.Log("masters: in the test process (CPU and memory are the whole process's)")
		return StartMasters(t, 3, s.tweak(extra))
	}
	bin, err := cluster.Binary("master")
	if err != nil {
		t.Fatal(err)
	}
	t.Log("masters: 3 OS processes of cmd/master")
	return StartMasterProcs(t, bin, 3, s.tweak(extra))
}

// masterUsages reads every running master's usage (for a stopped one,
// only the time: a master started later counts from zero). With masters
// in this process every entry is the test process's.
func (w *world) masterUsages() []Usage {
	w.t.Helper()
	out := make([]Usage, len(w.ms.Peers))
	for i := range out {
		if w.ms.Procs() && !w.ms.Running(i) {
			out[i] = Usage{At: time.Now()}
			continue
		}
		u, err := w.ms.Usage(i)
		if err != nil {
			w.t.Fatal(err)
		}
		out[i] = u
	}
	return out
}

// logMasters prints, for each running master, its CPU in cores since
// before (from /proc/<pid>/stat: user + system), its VmRSS and VmHWM
// (/proc/<pid>/status), and whether it leads. With masters in this
// process there is one process: its figures are printed once, as upper
// bounds (the fakes run in it too).
func (w *world) logMasters(what string, before []Usage) {
	w.t.Helper()
	now := w.masterUsages()
	leader := w.leader()
	if !w.ms.Procs() {
		u := now[0]
		w.t.Logf("%s: test process (masters and fakes) CPU %.2f cores over %v, VmRSS %s, VmHWM %s",
			what, u.Cores(before[0]), u.At.Sub(before[0].At).Round(time.Millisecond), mib(u.RSS), mib(u.HWM))
		return
	}
	var parts []string
	for i, u := range now {
		role := "follower"
		switch {
		case u.PID == 0:
			parts = append(parts, w.ms.Peers[i].ID+" stopped")
			continue
		case i == leader:
			role = "leader"
		}
		parts = append(parts, fmt.Sprintf("%s %s (pid %d) CPU %.2f cores, VmRSS %s, VmHWM %s",
			w.ms.Peers[i].ID, role, u.PID, u.Cores(before[i]), mib(u.RSS), mib(u.HWM)))
	}
	w.t.Logf("%s: master processes over %v: %s", what, now[leader].At.Sub(before[leader].At).Round(time.Millisecond), strings.Join(parts, "; "))
}

// restartAndCompare starts master i again (after its kill), closes the
// fleet, stops every master once they applied one index and checks that
// their metadata files dump byte for byte the same: the killed master
// recovered what it had and caught up with what it missed.
func (w *world) restartAndCompare(i int) {
	w.t.Helper()
	w.ms.Start(i)
	w.fl.Close()
	dumps, err := w.ms.StopAndDump(ctxFor(w.t, w.s.budget()))
	if err != nil {
		w.t.Fatal(err)
	}
	for j, d := range dumps {
		if !bytes.Equal(d, dumps[i]) {
			w.t.Fatalf("%s's metadata dump (%d bytes) differs from the restarted %s's (%d bytes)", w.ms.Peers[j].ID, len(d), w.ms.Peers[i].ID, len(dumps[i]))
		}
	}
	w.t.Logf("%s restarted: all %d metadata dumps agree byte for byte (%d bytes each)", w.ms.Peers[i].ID, len(dumps), len(dumps[i]))
}
