package master

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	pb "bighive/proto/bighivepb"
	"bighive/storage/wal"
)

// planWorld is a leader session without raft, for the planning functions.
func planWorld() *leaderState {
	return &leaderState{m: &Master{log: testLogger()}, kick: make(chan struct{}, 1), leases: map[string]*lease{}, splits: newLogSplits()}
}

func uuids(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%04d", prefix, i))
	}
	return out
}

// deadFleet makes k dead prefixes, each with tablets whose positions are
// among files log files; it returns the unassigned tablets and every
// prefix's file timestamps.
func deadFleet(rng *rand.Rand, k, tabletsPer, files int) ([]*pb.TabletMeta, map[string][]int64) {
	var tabs []*pb.TabletMeta
	logs := map[string][]int64{}
	for d := range k {
		prefix := wal.FormatPrefix(fmt.Sprintf("10.0.0.%d:7100", d))
		for f := range files {
			logs[prefix] = append(logs[prefix], int64(1000+100*f))
		}
		for i := range tabletsPer {
			ts := logs[prefix][rng.IntN(files)]
			tabs = append(tabs, &pb.TabletMeta{TabletId: fmt.Sprintf("t%02d%05d", d, i), Epoch: 3,
				State: pb.TabletState_TABLET_STATE_UNASSIGNED, LogPositions: []*pb.LogPosition{{Prefix: prefix, FileTimestamp: ts}}})
		}
	}
	return tabs, logs
}

// TestLogSplitPlanScalesWithFiles: K dead prefixes among L live tservers
// make one group of at most (files + splitSlices - 1) tasks per prefix,
// the same for L = 3 and L = 300; every log file of a prefix (from the
// oldest position on) lies in exactly one task, so it is read once, and
// every tablet is listed by every task holding a file at or after its
// position, so each of its records is found. Tasks spread within one of
// even over the live tservers.
func TestLogSplitPlanScalesWithFiles(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	const k, tabletsPer, files = 10, 50, 6
	for _, l := range []int{3, 30, 300} {
		t.Run(fmt.Sprintf("live=%d", l), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(l)))
			ls := planWorld()
			live := uuids("live", l)
			tabs, logs := deadFleet(rng, k, tabletsPer, files)
			now := time.UnixMicro(2000) // after every file
			held := ls.holdForSplitLocked(now, live, tabs)
			if len(held) != len(tabs) {
				t.Fatalf("%d of %d tablets held for the split", len(held), len(tabs))
			}
			if len(ls.splits.groups) != 1 || len(ls.splits.groups[0].plans) != k {
				t.Fatalf("%d groups (want 1 with %d plans)", len(ls.splits.groups), k)
			}
			total := 0
			perTS := map[string]int{}
			for prefix, p := range ls.splits.plans {
				if n := len(p.tasks); n > files+splitSlices-1 {
					t.Errorf("%s: %d tasks for %d files", prefix, n, files)
				}
				total += len(p.tasks)
				ranges := map[string]wal.SplitRange{}
				for id, task := range p.tasks {
					r, _, err := wal.ParseTaskID(id)
					if err != nil {
						t.Fatal(err)
					}
					ranges[id] = *r
					perTS[task.to]++
				}
				for _, ts := range logs[prefix] {
					var in []string
					for id, r := range ranges {
						if r.Contains(ts) {
							in = append(in, id)
						}
					}
					oldest := slices.MinFunc(maps2slice(p.tablets), func(a, b *splitTablet) int { return cmp.Compare(a.from, b.from) }).from
					if ts < oldest {
						if len(in) != 0 {
							t.Errorf("%s: file %d before every position is read by %v", prefix, ts, in)
						}
						continue
					}
					if len(in) != 1 {
						t.Fatalf("%s: file %d lies in %d tasks %v, want exactly 1", prefix, ts, len(in), in)
					}
					for id, tab := range p.tablets {
						if want := tab.from <= ts; slices.Contains(p.tasks[in[0]].pb.TabletIds, id) != want {
							t.Fatalf("%s: tablet %s (position %d): listed by the task of file %d = %v, want %v", prefix, id, tab.from, ts, !want, want)
						}
					}
				}
			}
			if total > k*(files+splitSlices-1) {
				t.Errorf("%d tasks for %d dead prefixes of %d files", total, k, files)
			}
			lo, hi := total, 0
			for _, u := range live {
				lo, hi = min(lo, perTS[u]), max(hi, perTS[u])
			}
			if hi-lo > 1 {
				t.Errorf("tasks per live tserver range from %d to %d", lo, hi)
			}
			t.Logf("%d dead prefixes of %d files among %d live: %d tasks, %d to %d per live tserver", k, files, l, total, lo, hi)
		})
	}
}

func maps2slice(m map[string]*splitTablet) []*splitTablet {
	out := make([]*splitTablet, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestLogSplitTasksMoveOffDeadExecutor: a task whose tserver is no longer
// live goes to the least loaded live one, which gets it in its next
// heartbeat reply; reporting every task completes the group.
func TestLogSplitTasksMoveOffDeadExecutor(t *testing.T) {
	ls := planWorld()
	live := []string{"a", "b", "c"}
	tabs, _ := deadFleet(rand.New(rand.NewPCG(1, 2)), 2, 5, 2)
	now := time.UnixMicro(2000)
	ls.holdForSplitLocked(now, live, tabs)
	var ofB []string
	for _, p := range ls.splits.plans {
		for id, task := range p.tasks {
			if task.to == "b" {
				ofB = append(ofB, id)
			}
		}
	}
	if len(ofB) == 0 {
		t.Fatal("b was given no task")
	}
	if got := ls.splitTasksForLocked("b", now); len(got) != len(ofB) {
		t.Fatalf("b's heartbeat reply carries %d tasks, want its %d", len(got), len(ofB))
	}
	// b dies: its tasks go to a and c, sent in their next replies.
	ls.holdForSplitLocked(now, []string{"a", "c"}, tabs)
	sent := map[string]bool{}
	for _, u := range []string{"a", "c"} {
		for _, task := range ls.splitTasksForLocked(u, now) {
			sent[task.TaskId] = true
		}
	}
	for _, id := range ofB {
		if !sent[id] {
			t.Errorf("task %s of dead b was not sent to a live tserver", id)
		}
	}
	g := ls.splits.groups[0]
	if g.pending != g.tasks {
		t.Fatalf("pending %d of %d before any report", g.pending, g.tasks)
	}
}
