package master

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"bighive/internal/hbdelta"
	pb "bighive/proto/bighivepb"
)

// owners is the fleet-wide view of who serves what; adding a tablet some
// other fake serves is a violation of invariant 6 (docs/design.md: one
// tserver serves a tablet at a time).
type owners struct {
	mu         sync.Mutex
	by         map[string]string // tablet → tserver
	violations []string
}

func newOwners() *owners { return &owners{by: map[string]string{}} }

func (o *owners) take(tablet, ts string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.by[tablet]; ok && cur != ts {
		o.violations = append(o.violations, fmt.Sprintf("tablet %s served by %s and %s", tablet, cur, ts))
	}
	o.by[tablet] = ts
}

func (o *owners) drop(tablet, ts string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by[tablet] == ts {
		delete(o.by, tablet)
	}
}

// fakeTS is a tserver stand-in: it registers, heartbeats, "loads" what it
// is assigned (reporting its log position) and drops what it is told to.
// It stops serving everything when its lease runs out, as a real tserver.
type fakeTS struct {
	t      *testing.T
	uuid   string
	inc    int64
	cl     *client
	owners *owners

	mu      sync.Mutex
	tablets map[string]int64 // serving: tablet → epoch
	loading map[string]int64 // load reported, not yet answered
	wg      sync.WaitGroup
	prios   map[string]pb.CachePriority
	leaseTo time.Time
	lease   time.Duration
	deltas  bool            // send delta heartbeats (else full ones, as a tserver before deltas)
	tracker hbdelta.Tracker // with deltas

	// prefix is the log prefix it registers and loads at (default
	// uuid_7100, which is not a valid prefix: its tablets are assigned
	// without a log split); onSplit, if set, gets the log-split tasks of
	// every heartbeat reply.
	prefix  string
	onSplit func(*pb.LogSplitTask)
	sizes   map[string]int64 // reported tablet sizes (absent: other)
	other   int64            // the size of a tablet not in sizes (0: 100 bytes)
	addr    string           // registered address (default uuid.test:7100)

	cancel context.CancelFunc
	done   chan struct{}
}

func newFakeTS(t *testing.T, uuid string, cl *client, o *owners) *fakeTS {
	return &fakeTS{t: t, uuid: uuid, inc: time.Now().UnixNano(), cl: cl, owners: o, prefix: uuid + "_7100",
		tablets: map[string]int64{}, loading: map[string]int64{}, prios: map[string]pb.CachePriority{}, sizes: map[string]int64{}}
}

func (f *fakeTS) register(ctx context.Context) error {
	return f.cl.do(ctx, func(mc pb.MasterClient) error {
		addr := f.addr
		if addr == "" {
			addr = f.uuid + ".test:7100"
		}
		r, err := mc.RegisterTServer(ctx, &pb.RegisterTServerRequest{Uuid: f.uuid, Address: addr,
			Incarnation: f.inc, WalPrefix: f.prefix, BlockStoreUuid: "bs-" + f.uuid})
		if err == nil {
			f.mu.Lock()
			f.lease = time.Duration(r.LeaseDurationMicros) * time.Microsecond
			f.leaseTo = time.Now().Add(f.lease)
			f.mu.Unlock()
		}
		return err
	})
}

func (f *fakeTS) heartbeat(ctx context.Context) error {
	f.mu.Lock()
	req := &pb.HeartbeatRequest{Uuid: f.uuid, Incarnation: f.inc}
	for id, ep := range f.tablets {
		req.Tablets = append(req.Tablets, &pb.TabletReport{TabletId: id, Epoch: ep, SizeBytes: f.size(id), Serving: true})
	}
	for id, ep := range f.loading {
		req.Tablets = append(req.Tablets, &pb.TabletReport{TabletId: id, Epoch: ep})
	}
	var filled hbdelta.Sent
	if f.deltas {
		filled = f.tracker.Fill(req, req.Tablets)
	}
	f.mu.Unlock()
	sent := time.Now()
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := f.cl.at(f.pick()).Heartbeat(hctx, req)
	if err != nil {
		f.rotate()
		f.expireIfDue()
		return err
	}
	if resp.Reregister {
		// The master declared this incarnation dead and may have moved its
		// tablets: like a real tserver, serve nothing and come back as a
		// new incarnation.
		f.dropAll()
		f.mu.Lock()
		f.inc = time.Now().UnixNano()
		f.tracker.Reset()
		f.mu.Unlock()
		return f.register(ctx)
	}
	f.mu.Lock()
	if f.deltas {
		f.tracker.Ack(filled, resp)
	}
	f.leaseTo = sent.Add(time.Duration(resp.LeaseDurationMicros) * time.Microsecond)
	for _, p := range resp.CachePriorities {
		f.prios[p.Table] = p.Priority
	}
	for _, u := range resp.Unassign {
		if ep, ok := f.tablets[u.TabletId]; ok && ep <= u.Epoch {
			delete(f.tablets, u.TabletId)
			f.owners.drop(u.TabletId, f.uuid)
		}
		if ep, ok := f.loading[u.TabletId]; ok && ep <= u.Epoch {
			delete(f.loading, u.TabletId)
		}
	}
	for _, a := range resp.Assign {
		id, ep := a.Tablet.TabletId, a.Tablet.Epoch
		if cur, ok := f.tablets[id]; ok && cur >= ep {
			continue
		}
		if cur, ok := f.loading[id]; ok && cur >= ep {
			continue
		}
		delete(f.tablets, id)
		f.loading[id] = ep
		f.wg.Add(1)
		go f.load(ctx, id, ep)
	}
	f.mu.Unlock()
	if f.onSplit != nil {
		for _, task := range resp.LogSplitTasks {
			f.onSplit(task)
		}
	}
	return nil
}

// load reports the tablet loaded (in the background, as a tserver does)
// and serves it once the master accepted the report.
func (f *fakeTS) load(ctx context.Context, id string, ep int64) {
	defer f.wg.Done()
	_, err := f.cl.at(f.pick()).ReportTabletLoad(ctx, &pb.ReportTabletLoadRequest{TabletId: id, Epoch: ep,
		TserverUuid: f.uuid, Position: &pb.LogPosition{Prefix: f.prefix, FileTimestamp: 1}})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loading[id] != ep {
		return // unassigned meanwhile
	}
	delete(f.loading, id)
	if err != nil {
		return // the master resends the assignment
	}
	f.owners.take(id, f.uuid)
	f.tablets[id] = ep
}

// expireIfDue stops serving everything once the lease ran out.
func (f *fakeTS) expireIfDue() {
	f.mu.Lock()
	due := !f.leaseTo.IsZero() && time.Now().After(f.leaseTo)
	f.mu.Unlock()
	if due {
		f.dropAll()
	}
}

func (f *fakeTS) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.tablets {
		f.owners.drop(id, f.uuid)
	}
	f.tablets = map[string]int64{}
	f.loading = map[string]int64{}
}

func (f *fakeTS) pick() int {
	f.cl.mu.Lock()
	defer f.cl.mu.Unlock()
	return f.cl.next
}

func (f *fakeTS) rotate() {
	f.cl.mu.Lock()
	f.cl.next = (f.cl.next + 1) % len(f.cl.conns)
	f.cl.mu.Unlock()
}

// start registers and heartbeats every interval until stop.
func (f *fakeTS) start(every time.Duration) {
	f.t.Helper()
	if err := f.register(ctxT(f.t, 10*time.Second)); err != nil {
		f.t.Fatalf("register %s: %v", f.uuid, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		for ctx.Err() == nil {
			_ = f.heartbeat(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	f.t.Cleanup(f.stop)
}

// stop ends the heartbeats and, like a crashed process, serves nothing.
func (f *fakeTS) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.wg.Wait()
	f.cancel = nil
	f.mu.Lock()
	f.loading = map[string]int64{}
	for id := range f.tablets {
		f.owners.drop(id, f.uuid)
	}
	f.tablets = map[string]int64{}
	f.mu.Unlock()
}

func (f *fakeTS) serving() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int64{}
	for k, v := range f.tablets {
		out[k] = v
	}
	return out
}

// size is a tablet's reported size; call with f.mu held.
func (f *fakeTS) size(id string) int64 {
	if n, ok := f.sizes[id]; ok {
		return n
	}
	if f.other != 0 {
		return f.other
	}
	return 100
}
