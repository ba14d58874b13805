package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
	"bighive/storage/wal"
	"bighive/testkit/wait"
)

// splitter answers log-split tasks for a fake tserver like a real one
// would, with one recovery file per listed tablet, unless it is told to
// swallow them (a tserver that dies before it reports).
type splitter struct {
	f       *fakeTS
	mu      sync.Mutex
	got     map[string]bool // task ids received
	swallow bool
}

func newSplitter(t *testing.T, uuid string, cl *client, o *owners) *splitter {
	s := &splitter{got: map[string]bool{}}
	s.f = newFakeTS(t, uuid, cl, o)
	s.f.prefix = wal.FormatPrefix(uuid + ".test:7100")
	s.f.onSplit = s.handle
	return s
}

func (s *splitter) handle(task *pb.LogSplitTask) {
	r, _, err := wal.ParseTaskID(task.TaskId)
	s.mu.Lock()
	first := !s.got[task.TaskId]
	s.got[task.TaskId] = true
	swallow := s.swallow
	s.mu.Unlock()
	if err != nil || r == nil || swallow || !first {
		return
	}
	req := &pb.ReportLogSplitRequest{TaskId: task.TaskId, TserverUuid: s.f.uuid, RecoveryFiles: map[string]string{}}
	for _, id := range task.TabletIds {
		req.RecoveryFiles[id] = r.RecoveryFile(id)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.f.cl.do(ctx, func(mc pb.MasterClient) error { _, err := mc.ReportLogSplit(ctx, req); return err })
	}()
}

func (s *splitter) tasks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.got {
		if r, _, err := wal.ParseTaskID(id); err == nil && r != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// TestLogSplitExecutorDies: a tserver dies; the split of its log is
// planned; one of the tservers given a task dies before it reports; its
// task goes to the survivor, which answers it; every tablet of the first
// dead tserver is then served again with one recovery file per task of
// the plan and no position of the dead prefix left.
func TestLogSplitExecutorDies(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	mc := cl.at(0)
	o := newOwners()
	var sp []*splitter
	for i := range 3 {
		s := newSplitter(t, fmt.Sprintf("ts%d", i), cl, o)
		s.f.start(50 * time.Millisecond)
		sp = append(sp, s)
	}
	if _, err := mc.CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf"), SplitKeys: splitKeys(11)}); err != nil {
		t.Fatal(err)
	}
	counts := servingCounts(t, mc, "t", 12)
	// The fakes serve once their load reports' answers arrive, just after
	// the metadata says SERVING.
	wait.For(t, 5*time.Second, "the fakes serving what the metadata says", func() error {
		for _, s := range sp {
			if err := servingN(s.f, counts[s.f.uuid]); err != nil {
				return err
			}
		}
		return nil
	})
	victim, executor, survivor := sp[0], sp[1], sp[2]
	lost := map[string]bool{}
	for id := range victim.f.serving() {
		lost[id] = true
	}
	if len(lost) == 0 {
		t.Fatal("the victim serves nothing")
	}
	executor.mu.Lock()
	executor.swallow = true
	executor.mu.Unlock()
	victim.f.stop()
	wait.For(t, 20*time.Second, "a task of the victim's log at the executor", func() error {
		if len(executor.tasks()) == 0 {
			return errors.New("no task")
		}
		return nil
	})
	swallowed := executor.tasks()
	executor.f.stop()

	wait.For(t, 30*time.Second, "every tablet served by the survivor", func() error { return servingN(survivor.f, 12) })
	got := survivor.tasks()
	for _, id := range swallowed {
		if !slices.Contains(got, id) {
			t.Errorf("task %s of the dead executor was never sent to the survivor (it got %v)", id, got)
		}
	}
	victimTasks := 0
	for _, id := range got {
		if r, _, _ := wal.ParseTaskID(id); r.Prefix == victim.f.prefix {
			victimTasks++
		}
	}
	err := c.masters[0].view(func(r *meta.Reader) error {
		for id := range lost {
			tm, err := r.Tablet(id)
			if err != nil {
				return err
			}
			for _, p := range tm.LogPositions {
				if p.Prefix == victim.f.prefix {
					t.Errorf("tablet %s still lists a position of the dead prefix: %v", id, tm.LogPositions)
				}
			}
			n := 0
			for _, f := range tm.RecoveryFiles {
				if r, err := wal.ParseSplitRange(recoveryRange(f)); err == nil && r.Prefix == victim.f.prefix {
					n++
				}
			}
			if n != victimTasks {
				t.Errorf("tablet %s has %d recovery files of the dead prefix, want one per task (%d): %v", id, n, victimTasks, tm.RecoveryFiles)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("victim's log: %d tasks, %d swallowed by the executor and answered by the survivor", victimTasks, len(swallowed))
	if len(o.violations) > 0 {
		t.Fatalf("invariant 6: %v", o.violations)
	}
}

// recoveryRange is the range part of recovery/<range>/<tablet>.log.
func recoveryRange(path string) string {
	rest, _ := strings.CutPrefix(path, "recovery/")
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}
