package fleetsim

import (
	"context"
	"sync"
	"time"

	"bighive/internal/apierr"
	"bighive/internal/hbdelta"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	"bighive/storage/wal"
)

// Fake is one simulated tserver.
type Fake struct {
	fl     *Fleet
	UUID   string
	addr   string
	prefix string

	mu       sync.Mutex
	inc      int64
	logFile  int64            // timestamp of the log file loads are reported at: one per incarnation
	gen      int              // bumped by every Kill: loads of an older life are dropped
	tablets  map[string]int64 // serving: tablet → epoch
	loading  map[string]int64 // load reported, not yet answered
	splits   map[string]bool  // log-split tasks being answered
	delta    hbdelta.Tracker  // deltas, as a tserver sends them
	leaseTo  time.Time
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

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

// Start registers the fake as a new incarnation and starts its heartbeats.
func (k *Fake) Start(ctx context.Context) error {
	k.mu.Lock()
	if k.cancel != nil {
		k.mu.Unlock()
		return nil
	}
	k.inc = time.Now().UnixNano()
	k.logFile = k.inc / 1000
	k.delta.Reset()
	k.mu.Unlock()
	if err := k.register(ctx); err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(k.fl.ctx)
	k.mu.Lock()
	k.cancel, k.done = cancel, make(chan struct{})
	done, every := k.done, k.interval
	k.mu.Unlock()
	go func() {
		defer close(done)
		k.fl.mu.Lock()
		phase := time.Duration(k.fl.rnd.Int64N(int64(every)))
		k.fl.mu.Unlock()
		next := time.Now().Add(phase)
		for {
			select {
			case <-hctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			next = next.Add(every)
			k.heartbeat(hctx)
		}
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

func (k *Fake) register(ctx context.Context) error {
	k.mu.Lock()
	req := &pb.RegisterTServerRequest{Uuid: k.UUID, Address: k.addr, Incarnation: k.inc, WalPrefix: k.prefix,
		BlockStoreUuid: "bs-" + k.UUID}
	k.mu.Unlock()
	return k.fl.call(ctx, func(mc pb.MasterClient) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := mc.RegisterTServer(cctx, req)
		if err == nil {
			k.mu.Lock()
			k.interval = time.Duration(r.HeartbeatIntervalMicros) * time.Microsecond
			k.leaseTo = time.Now().Add(time.Duration(r.LeaseDurationMicros) * time.Microsecond)
			k.mu.Unlock()
		}
		return err
	})
}

func (k *Fake) heartbeat(ctx context.Context) {
	k.mu.Lock()
	req := &pb.HeartbeatRequest{Uuid: k.UUID, Incarnation: k.inc}
	reports := make([]*pb.TabletReport, 0, len(k.tablets)+len(k.loading))
	for id, ep := range k.tablets {
		reports = append(reports, &pb.TabletReport{TabletId: id, Epoch: ep, SizeBytes: 64 << 20, MemstoreBytes: 1 << 20, Serving: true})
	}
	for id, ep := range k.loading {
		reports = append(reports, &pb.TabletReport{TabletId: id, Epoch: ep})
	}
	filled := k.delta.Fill(req, reports)
	req.Load = &pb.TServerLoad{MemstoreBytes: int64(len(k.tablets)) << 20, WritesPerSecond: 100, ReadsPerSecond: 100}
	gen := k.gen
	k.mu.Unlock()

	mc, i := k.fl.client()
	sent := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	resp, err := mc.Heartbeat(cctx, req)
	cancel()
	if err != nil {
		k.fl.HBErrors.Add(1)
		k.fl.missed(i)
		k.mu.Lock()
		expired := time.Now().After(k.leaseTo)
		k.mu.Unlock()
		if expired && ctx.Err() == nil {
			k.dropAll() // a tserver whose lease ran out serves nothing
		}
		return
	}
	k.fl.record(sent, time.Since(sent))
	if resp.Reregister {
		k.fl.Reregisters.Add(1)
		k.dropAll()
		k.mu.Lock()
		k.inc = time.Now().UnixNano()
		k.logFile = k.inc / 1000
		k.delta.Reset()
		k.mu.Unlock()
		_ = k.register(ctx)
		return
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != gen {
		return
	}
	k.leaseTo = sent.Add(time.Duration(resp.LeaseDurationMicros) * time.Microsecond)
	k.delta.Ack(filled, resp) // on send_full the next heartbeat is full
	var dropped []string
	for _, u := range resp.Unassign {
		k.fl.Unassignments.Add(1)
		if ep, ok := k.tablets[u.TabletId]; ok && ep <= u.Epoch {
			delete(k.tablets, u.TabletId)
			dropped = append(dropped, u.TabletId)
		}
		if ep, ok := k.loading[u.TabletId]; ok && ep <= u.Epoch {
			delete(k.loading, u.TabletId)
		}
	}
	if len(dropped) > 0 {
		k.fl.drop(dropped, k.UUID, now)
	}
	var loads []*pb.TabletLoadReport
	for _, a := range resp.Assign {
		k.fl.Assignments.Add(1)
		id, ep := a.Tablet.TabletId, a.Tablet.Epoch
		if cur, ok := k.tablets[id]; ok && cur >= ep {
			continue
		}
		if cur, ok := k.loading[id]; ok && cur >= ep {
			continue
		}
		if _, ok := k.tablets[id]; ok {
			delete(k.tablets, id)
			k.fl.drop([]string{id}, k.UUID, now)
		}
		k.loading[id] = ep
		loads = append(loads, &pb.TabletLoadReport{TabletId: id, Epoch: ep})
	}
	// One reply's loads finish together: one batched report per
	// limits.MaxTabletLoads of them, as a tserver's loadReporter sends.
	for len(loads) > 0 {
		batch := loads[:min(len(loads), limits.MaxTabletLoads)]
		loads = loads[len(batch):]
		k.fl.calls.Add(1)
		go func() {
			defer k.fl.calls.Done()
			k.loadTablets(ctx, gen, batch)
		}()
	}
	for _, task := range resp.LogSplitTasks {
		if !k.splits[task.TaskId] {
			k.splits[task.TaskId] = true
			k.fl.calls.Add(1)
			go func() {
				defer k.fl.calls.Done()
				k.answerSplit(ctx, task)
			}()
		}
	}
}

// loadTablets reports the tablets loaded at a log position of this
// fake's prefix in one ReportTabletLoads call and serves each once the
// master accepted its load.
func (k *Fake) loadTablets(ctx context.Context, gen int, loads []*pb.TabletLoadReport) {
	select {
	case k.fl.load <- struct{}{}:
	case <-ctx.Done():
		return
	}
	k.mu.Lock()
	pos := &pb.LogPosition{Prefix: k.prefix, FileTimestamp: k.logFile}
	k.mu.Unlock()
	for _, l := range loads {
		l.Position = pos
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := pb.NewMasterClient(k.fl.conns[k.fl.leader.Load()%int32(len(k.fl.conns))]).ReportTabletLoads(cctx,
		&pb.ReportTabletLoadsRequest{TserverUuid: k.UUID, Loads: loads})
	cancel()
	<-k.fl.load
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, l := range loads {
		id, ep := l.TabletId, l.Epoch
		if k.gen != gen || k.loading[id] != ep {
			continue // killed or unassigned meanwhile
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

func (k *Fake) dropAll() {
	k.mu.Lock()
	ids := make([]string, 0, len(k.tablets))
	for id := range k.tablets {
		ids = append(ids, id)
	}
	k.tablets, k.loading = map[string]int64{}, map[string]int64{}
	k.gen++
	k.mu.Unlock()
	k.fl.drop(ids, k.UUID, time.Now())
}
