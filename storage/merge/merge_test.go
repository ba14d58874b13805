package merge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"bighive/storage/split"
	"bighive/storage/tablet/tsfile"
)

// The tablets and the master are fakes here: they are the fault-injection
// seams of the protocol. The real parts run in e2e (TestMergeSIGKILLAtEachStep,
// TestMergeEmptiedTableToTwo) and tools/cli (TestMergeCommand).

type fakeTablet struct {
	id      string
	buffer  bool // the active buffer holds writes
	standby bool
}

func (t *fakeTablet) HasStandby() bool { return t.standby }
func (t *fakeTablet) SwapBuffers() bool {
	if !t.buffer || t.standby {
		return false
	}
	t.buffer, t.standby = false, true
	return true
}
func (t *fakeTablet) FlushStandby(context.Context) (tsfile.Info, error) {
	return tsfile.Info{Store: "elsewhere", MinRow: []byte(t.id)}, nil
}

type fakeMaster struct {
	err  error
	reps []Report
}

func (m *fakeMaster) AllocateTabletIDs(_ context.Context, n int) ([]string, error) {
	return []string{"t9"}[:n], nil
}
func (m *fakeMaster) ReportMerge(_ context.Context, r Report) error {
	m.reps = append(m.reps, r)
	return m.err
}

// routes records what each parent was routed through, in order.
type routes struct {
	mu  sync.Mutex
	got map[string][]*split.DualWrite
}

func (r *routes) route(id string) func(*split.DualWrite) {
	return func(d *split.DualWrite) {
		r.mu.Lock()
		r.got[id] = append(r.got[id], d)
		r.mu.Unlock()
	}
}

func (r *routes) fenced(id string) bool {
	l := r.got[id]
	if len(l) == 0 || l[len(l)-1] == nil {
		return false
	}
	_, err := l[len(l)-1].Admit()
	return errors.Is(err, split.ErrFenced)
}

func TestRunSteps(t *testing.T) {
	injected := errors.New("injected")
	cases := []struct {
		name       string
		failAt     Step
		masterErr  error
		standby    bool
		rightStart string
		wantErr    error // nil: committed
		wantFenced bool  // both parents still fenced when Run returns
		wantReport bool
	}{
		{name: "committed", wantFenced: true, wantReport: true},
		{name: "fail at prepare", failAt: StepPrepare, wantErr: injected},
		{name: "fail at allocate", failAt: StepAllocate, wantErr: injected},
		{name: "fail at fence", failAt: StepFence, wantErr: injected},
		{name: "fail at flush", failAt: StepFlush, wantErr: injected},
		{name: "fail at report", failAt: StepReport, wantErr: injected},
		{name: "fail after commit", failAt: StepCommitted, wantFenced: true, wantReport: true},
		{name: "master refuses", masterErr: fmt.Errorf("%w: stale epoch", ErrRefused), wantErr: ErrRefused, wantReport: true},
		{name: "outcome unknown", masterErr: errors.New("no answer"), wantErr: ErrOutcomeUnknown, wantFenced: true, wantReport: true},
		{name: "standby pending", standby: true, wantErr: ErrBusy},
		{name: "not adjacent", rightStart: "n", wantErr: ErrNotAdjacent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &routes{got: map[string][]*split.DualWrite{}}
			lt, rtab := &fakeTablet{id: "l", buffer: true, standby: tc.standby}, &fakeTablet{id: "r", buffer: true}
			start := "m"
			if tc.rightStart != "" {
				start = tc.rightStart
			}
			left := Parent{ID: "l", Epoch: 3, Start: nil, End: []byte("m"), Tablet: lt, Route: rt.route("l")}
			right := Parent{ID: "r", Epoch: 4, Start: []byte(start), Tablet: rtab, Route: rt.route("r")}
			m := &fakeMaster{err: tc.masterErr}
			checkpoints, ended := 0, 0
			o := Options{
				Exclusive:  func(f func()) { f() },
				BeginSplit: func() func() { return func() { ended++ } },
				Checkpoint: func(context.Context) error { checkpoints++; return nil },
				Master:     m,
				Logger:     slog.New(slog.DiscardHandler),
				Hook: func(s Step) error {
					if s == tc.failAt {
						return injected
					}
					return nil
				},
			}
			res, err := Run(context.Background(), o, left, right)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil {
				if res == nil || res.Report.MergedID != "t9" || len(res.Report.Flushed) != 2 ||
					string(res.Report.Flushed[0].MinRow) != "l" || string(res.Report.Flushed[1].MinRow) != "r" {
					t.Fatalf("result %+v: want merged t9 with both parents' flushed buffers, left first", res)
				}
			}
			for _, id := range []string{"l", "r"} {
				if got := rt.fenced(id); got != tc.wantFenced {
					t.Errorf("parent %s fenced %v after Run, want %v (routes %v)", id, got, tc.wantFenced, rt.got[id])
				}
			}
			if (len(m.reps) > 0) != tc.wantReport {
				t.Errorf("%d reports sent, want a report: %v", len(m.reps), tc.wantReport)
			}
			if len(m.reps) > 0 && (m.reps[0].Left.Epoch != 3 || m.reps[0].Right.Epoch != 4) {
				t.Errorf("report carries epochs %d and %d, want 3 and 4", m.reps[0].Left.Epoch, m.reps[0].Right.Epoch)
			}
			if tc.wantErr != ErrNotAdjacent && (checkpoints != 1 || ended != 1) {
				t.Errorf("%d checkpoints and %d ends of the preparing state, want one each", checkpoints, ended)
			}
		})
	}
}
