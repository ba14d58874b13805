package fleetsim

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/storage/wal"
	"bighive/tserver/membership"
)

// Fake is one simulated tserver: a membership.Host with no storage behind
// it. Its registration, heartbeats, lease and registering again are the
// real tserver's (package membership); what it holds is a map.
type Fake struct {
	fl     *Fleet
	UUID   string
	addr   string
	prefix string

	mu      sync.Mutex
	member  *membership.Member // this life's; nil before the first Start
	gen     int                // bumped by every drop of everything: loads of an older life are dropped
	tablets map[string]int64   // serving: tablet → epoch
	loading map[string]int64   // load reported, not yet answered
	splits  map[string]bool    // log-split tasks being answered
	cancel  context.CancelFunc
	done    chan struct{}
}

// quiet is the fakes' logger: a fleet's registrations and failed
// heartbeats are counted, not logged.
var quiet = slog.New(slog.DiscardHandler)

func newFake(fl *Fleet, uuid string) *Fake {
	addr := uuid + ".fleet:7100"
	return &Fake{fl: fl, UUID: uuid, addr: addr, prefix: wal.FormatPrefix(addr),
		tablets: map[string]int64{}, loading: map[string]int64{}, splits: map[string]bool{}}
}

// Running reports whether the fake is heartbeating.
func (k *Fake) Running() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cancel != nil
}

// Tablets returns what the fake serves (tablet → epoch).
func (k *Fake) Tablets() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int64, len(k.tablets))
	for id, ep := range k.tablets {
		out[id] = ep
	}
	return out
}

// Membership is the current life's membership (nil before Start).
func (k *Fake) Membership() *membership.Member {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.member
}

// Start registers the fake as a new incarnation and starts its heartbeats
// at a random phase of the interval.
func (k *Fake) Start(ctx context.Context) error {
	k.mu.Lock()
	if k.cancel != nil {
		k.mu.Unlock()
		return nil
	}
	var last int64
	if k.member != nil {
		last = k.member.Incarnation()
	}
	m := membership.New(membership.Config{UUID: k.UUID, Address: k.addr, WALPrefix: k.prefix, BlockStoreUUID: "bs-" + k.UUID,
		Incarnation: membership.NextIncarnation(last), OnHeartbeat: k.fl.heartbeated, Logger: quiet}, k.fl.hb, (*fakeHost)(k))
	k.member = m
	k.mu.Unlock()
	if err := m.Register(ctx); err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(k.fl.ctx)
	k.mu.Lock()
	k.cancel, k.done = cancel, make(chan struct{})
	done := k.done
	k.mu.Unlock()
	k.fl.mu.Lock()
	phase := time.Duration(k.fl.rnd.Int64N(int64(m.Interval())))
	k.fl.mu.Unlock()
	go func() {
		defer close(done)
		select {
		case <-hctx.Done():
			return
		case <-time.After(phase):
		}
		m.Run(hctx)
	}()
	return nil
}

// Kill stops the fake like a crashed process: no more heartbeats, nothing
// served.
func (k *Fake) Kill() {
	k.mu.Lock()
	cancel, done := k.cancel, k.done
	k.cancel = nil
	k.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	k.dropAll()
}

// fakeHost is the fake as its membership's Host.
type fakeHost Fake

var _ membership.Host = (*fakeHost)(nil)

func (h *fakeHost) Reports(req *pb.HeartbeatRequest) []*pb.TabletReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	reports := make([]*pb.TabletReport, 0, len(h.tablets)+len(h.loading))
	for id, ep := range h.tablets {
		reports = append(reports, &pb.TabletReport{TabletId: id, Epoch: ep, SizeBytes: 64 << 20, MemstoreBytes: 1 << 20, Serving: true})
	}
	for id, ep := range h.loading {
		reports = append(reports, &pb.TabletReport{TabletId: id, Epoch: ep})
	}
	req.Load = &pb.TServerLoad{MemstoreBytes: int64(len(h.tablets)) << 20, WritesPerSecond: 100, ReadsPerSecond: 100}
	return reports
}

// Learn: a fake has no grants, schemas or cache.
func (h *fakeHost) Learn(*pb.HeartbeatResponse) {}

func (h *fakeHost) Unassign(_ context.Context, unassign []*pb.TabletUnassignment) {
	if len(unassign) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var dropped []string
	for _, u := range unassign {
		h.fl.Unassignments.Add(1)
		if ep, ok := h.tablets[u.TabletId]; ok && membership.Unassigns(u, ep) {
			delete(h.tablets, u.TabletId)
			dropped = append(dropped, u.TabletId)
		}
		if ep, ok := h.loading[u.TabletId]; ok && membership.Unassigns(u, ep) {
			delete(h.loading, u.TabletId)
		}
	}
	if len(dropped) > 0 {
		h.fl.drop(dropped, h.UUID, time.Now())
	}
}

// Assign "loads" the newly assigned tablets: one batched load report per
// limits.MaxTabletLoads of them, as a tserver's loadReporter sends the
// loads that finish together.
func (h *fakeHost) Assign(ctx context.Context, assign []*pb.TabletAssignment) {
	if len(assign) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var loads []*pb.TabletLoadReport
	for _, a := range assign {
		h.fl.Assignments.Add(1)
		id, ep := a.Tablet.TabletId, a.Tablet.Epoch
		if cur, ok := h.tablets[id]; ok && cur >= ep {
			continue
		}
		if cur, ok := h.loading[id]; ok && cur >= ep {
			continue
		}
		if _, ok := h.tablets[id]; ok {
			delete(h.tablets, id)
			h.fl.drop([]string{id}, h.UUID, now)
		}
		h.loading[id] = ep
		loads = append(loads, &pb.TabletLoadReport{TabletId: id, Epoch: ep})
	}
	k, gen := (*Fake)(h), h.gen
	for len(loads) > 0 {
		batch := loads[:min(len(loads), limits.MaxTabletLoads)]
		loads = loads[len(batch):]
		h.fl.calls.Add(1)
		go func() {
			defer h.fl.calls.Done()
			k.loadTablets(ctx, gen, batch)
		}()
	}
}

func (h *fakeHost) RunLogSplitTasks(ctx context.Context, tasks []*pb.LogSplitTask) {
	if len(tasks) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, task := range tasks {
		if !h.splits[task.TaskId] {
			h.splits[task.TaskId] = true
			h.fl.calls.Add(1)
			go func() {
				defer h.fl.calls.Done()
				(*Fake)(h).answerSplit(ctx, task)
			}()
		}
	}
}

// LeaseChanged: a fake whose lease ran out serves nothing.
func (h *fakeHost) LeaseChanged(valid bool) {
	if !valid {
		(*Fake)(h).dropAll()
	}
}

func (h *fakeHost) DropAll(string) {
	h.fl.Reregisters.Add(1)
	(*Fake)(h).dropAll()
}

// loadTablets reports the tablets loaded at a log position of this
// fake's prefix in one ReportTabletLoads call and serves each once the
// master accepted its load. The position's file is the incarnation's
// (in microseconds, as a log file's timestamp): one log file per
// incarnation, as a tserver whose log never rolls.
func (k *Fake) loadTablets(ctx context.Context, gen int, loads []*pb.TabletLoadReport) {
	select {
	case k.fl.load <- struct{}{}:
	case <-ctx.Done():
		return
	}
	k.mu.Lock()
	pos := &pb.LogPosition{Prefix: k.prefix, FileTimestamp: k.member.Incarnation()}
	k.mu.Unlock()
	for _, l := range loads {
		l.Position = pos
	}
	var resp *pb.ReportTabletLoadsResponse
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := k.fl.call(cctx, func(mc pb.MasterClient) (err error) {
		resp, err = mc.ReportTabletLoads(cctx, &pb.ReportTabletLoadsRequest{TserverUuid: k.UUID, Loads: loads})
		return err
	})
	cancel()
	<-k.fl.load
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, l := range loads {
		id, ep := l.TabletId, l.Epoch
		if k.gen != gen || k.loading[id] != ep {
			continue // dropped or unassigned meanwhile
		}
		delete(k.loading, id)
		lerr := err
		if err == nil {
			lerr = apierr.FromRowStatus(resp.Results[i].GetStatus())
		}
		if lerr != nil {
			k.fl.LoadErrors.Add(1)
			k.fl.lastLoadErr.Store(lerr.Error())
			continue // the master resends the assignment
		}
		k.fl.Loads.Add(1)
		k.tablets[id] = ep
		k.fl.take(id, k.UUID, time.Now())
	}
}

// answerSplit answers a log-split task with one recovery file path per
// tablet (nothing is written: the fakes have no logs), or a delete task.
func (k *Fake) answerSplit(ctx context.Context, task *pb.LogSplitTask) {
	defer func() {
		k.mu.Lock()
		delete(k.splits, task.TaskId)
		k.mu.Unlock()
	}()
	req := &pb.ReportLogSplitRequest{TaskId: task.TaskId, TserverUuid: k.UUID}
	if r, _, err := wal.ParseTaskID(task.TaskId); err == nil && r != nil {
		req.RecoveryFiles = make(map[string]string, len(task.TabletIds))
		for _, id := range task.TabletIds {
			req.RecoveryFiles[id] = r.RecoveryFile(id)
		}
	}
	err := k.fl.call(ctx, func(mc pb.MasterClient) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := mc.ReportLogSplit(cctx, req)
		return err
	})
	if err == nil {
		k.fl.SplitTasks.Add(1)
	}
}

// dropAll drops every tablet and load (a crash, a lease run out, or the
// master's reregister).
func (k *Fake) dropAll() {
	k.mu.Lock()
	if len(k.tablets) == 0 && len(k.loading) == 0 {
		k.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(k.tablets))
	for id := range k.tablets {
		ids = append(ids, id)
	}
	k.tablets, k.loading = map[string]int64{}, map[string]int64{}
	k.gen++
	k.mu.Unlock()
	k.fl.drop(ids, k.UUID, time.Now())
}
