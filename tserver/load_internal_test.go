package tserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/storage/mutation"
	rp "bighive/storage/replica"
	"bighive/testkit/wait"
)

// TestUnassignedDuringLoadReportNeverServes: a tablet is unassigned (and
// so unloaded) while its load report is in flight, and the master then
// accepts the report. The load must not serve: a tablet has one serving
// state, and a stopped replica never serves again. Before, the replica's
// stopped flag and the load's serving flag were two, and the report's
// answer set the second after the unload had cleared it, so the unloaded
// replica reported serving.
func TestUnassignedDuringLoadReportNeverServes(t *testing.T) {
	logged := &loadOutcomes{}
	_, s := startWithMaster(t, func(c *master.Config) { c.Lease, c.Heartbeat = 3*time.Hour, time.Hour },
		func(o *Options) { o.Logger = slog.New(logged) })
	ctx := context.Background()
	wait.For(t, time.Minute, "a valid lease", func() error {
		if !s.leaseValid() {
			return errors.New("no valid lease")
		}
		return nil
	})
	b := &blockingSender{release: make(chan struct{})}
	s.loadReports = newLoadReporter(s.ctx, &s.wg, b.send)

	const id = "unassigned-while-reporting"
	s.applyAssignments(ctx, []*pb.TabletAssignment{{Tablet: &pb.TabletMeta{TabletId: id, Table: "t", Epoch: 3, Range: &pb.RowRange{}}}}, nil)
	wait.For(t, time.Minute, "the load report", func() error { return callsN(b, 1) })
	r := s.tablets.get(id)
	if r == nil || r.Serving() {
		t.Fatalf("replica during its load report = %v, want registered and loading", r)
	}
	s.applyAssignments(ctx, nil, []*pb.TabletUnassignment{{TabletId: id, Epoch: 3}})
	close(b.release) // the master accepts the report of the unloaded load
	wait.For(t, time.Minute, "the load to end", func() error {
		if got := logged.of(id); got == "" {
			return errors.New("neither served nor failed yet")
		}
		return nil
	})
	if got := logged.of(id); got != "tablet load failed" {
		t.Errorf("the load of the unloaded tablet ended with %q, want a failed load", got)
	}
	if r.Serving() {
		t.Fatal("the unloaded replica serves after its load report was accepted")
	}
	if s.tablets.get(id) != nil || heldReport(s, id) != nil {
		t.Fatal("the unloaded tablet is registered or in the heartbeat")
	}
	err := r.Write(ctx, &mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f",
		Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("v")}}})
	if !errors.Is(err, rp.ErrNotServing) {
		t.Fatalf("write to the unloaded replica: %v, want ErrNotServing", err)
	}
}

// loadOutcomes is a log handler that keeps how each tablet's load ended:
// "tablet serving" or "tablet load failed".
type loadOutcomes struct {
	mu  sync.Mutex
	end map[string]string
}

func (h *loadOutcomes) Enabled(context.Context, slog.Level) bool { return true }
func (h *loadOutcomes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *loadOutcomes) WithGroup(string) slog.Handler            { return h }

func (h *loadOutcomes) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "tablet serving" && r.Message != "tablet load failed" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "tablet" {
			h.mu.Lock()
			if h.end == nil {
				h.end = map[string]string{}
			}
			h.end[a.Value.String()] = r.Message
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *loadOutcomes) of(id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.end[id]
}
