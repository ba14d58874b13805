package membership_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/fleetsim"
	"bighive/testkit/inproc"
	"bighive/testkit/wait"
	"bighive/tserver"
	"bighive/tserver/membership"
)

// The contract: what the master relies on from a tserver's membership, run
// against both hosts of package membership — the real tserver (storage and
// all) and a fake of the fleet simulation (testkit/fleetsim), which the
// master's scale tests use by the hundred — each alone against a real
// master, through a tap that records the calls and edits replies on cue
// (tap_test.go). Every step checks something a broken membership or host
// would get wrong; the steps run in order on one cluster.

// host is one tserver under test.
type host interface {
	uuid() string
	member() *membership.Member
	// serving is what it serves now: tablet → epoch (nothing without a
	// valid lease).
	serving() map[string]int64
}

const (
	interval = 500 * time.Millisecond // the master's heartbeat interval
	lease    = 3 * time.Second        // the master's lease
	table    = "contract"
	// stepTimeout bounds a step's waits: a few leases, and a log split's
	// fallback (10 s) on the way to a reassignment.
	stepTimeout = 45 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestContract(t *testing.T) {
	for _, tg := range []struct {
		name  string
		start func(t *testing.T, masterAddr string) host
	}{
		{"real", startReal},
		{"fake", startFake},
	} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			contract(t, tg.start)
		})
	}
}

type realHost struct{ s *tserver.Server }

func startReal(t *testing.T, masterAddr string) host {
	s, err := tserver.Start(context.Background(), tserver.Options{Listen: "127.0.0.1:0", Masters: []string{masterAddr},
		Root: t.TempDir(), MemLimit: 1 << 20, CacheBytes: 1 << 20, SplitThreshold: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return realHost{s}
}

func (h realHost) uuid() string               { return h.s.UUID() }
func (h realHost) member() *membership.Member { return h.s.Membership() }
func (h realHost) serving() map[string]int64 {
	st, err := h.s.Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		panic(err) // Status reads memory only
	}
	out := map[string]int64{}
	if st.Counters["lease_valid"] == 0 {
		return out
	}
	for _, tb := range st.Tablets {
		if tb.State == "serving" {
			out[tb.TabletId] = tb.Epoch
		}
	}
	return out
}

type fakeHost struct{ k *fleetsim.Fake }

func startFake(t *testing.T, masterAddr string) host {
	fl := fleetsim.New(t, fleetsim.Config{Addrs: []string{masterAddr}, N: 1, Seed: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return fakeHost{fl.Fakes[0]}
}

func (h fakeHost) uuid() string               { return h.k.UUID }
func (h fakeHost) member() *membership.Member { return h.k.Membership() }
func (h fakeHost) serving() map[string]int64  { return h.k.Tablets() }

// startMaster starts a master alone, and a client of it.
func startMaster(t *testing.T) (*master.Master, pb.MasterClient) {
	t.Helper()
	m := inproc.StartMaster(t, master.Config{Lease: lease, Heartbeat: interval, Logger: quiet})
	cc, err := grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return m, pb.NewMasterClient(cc)
}

// env is one host, its master and the tap between them.
type env struct {
	tap *tap
	mc  pb.MasterClient
	h   host
}

// sight reads the host's state now.
func (e *env) sight() sight {
	s := sight{serving: e.h.serving()}
	if m := e.h.member(); m != nil && m.LeaseValid() {
		now := time.Now()
		s.leaseEnd = now.Add(m.Lease().Remaining(now))
	}
	return s
}

// tablets is what the master says of the table: tablet → epoch, all on
// the host.
func (e *env) tablets(ctx context.Context) (map[string]int64, error) {
	resp, err := e.mc.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: table})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range resp.Locations {
		if l.TserverUuid != e.h.uuid() || l.State != pb.TabletState_TABLET_STATE_SERVING {
			return nil, fmt.Errorf("tablet %s is %v on %q", l.TabletId, l.State, l.TserverUuid)
		}
		out[l.TabletId] = l.Epoch
	}
	return out, nil
}

// waitServes waits until the host serves every tablet of the table at the
// master's epoch, and returns them.
func (e *env) waitServes(t *testing.T, ctx context.Context) map[string]int64 {
	t.Helper()
	var want map[string]int64
	wait.ForCtx(t, ctx, "the host serving every tablet of the table at the master's epoch", func() error {
		var err error
		if want, err = e.tablets(ctx); err != nil {
			return err
		}
		if got := e.h.serving(); !maps.Equal(got, want) {
			return fmt.Errorf("the host serves %v, the master says %v", got, want)
		}
		return nil
	})
	return want
}

func contract(t *testing.T, start func(t *testing.T, masterAddr string) host) {
	m, mc := startMaster(t)
	var started atomic.Pointer[host]
	tp, addr := startTap(t, m, func() sight {
		if h := started.Load(); h != nil {
			return (&env{h: *h}).sight()
		}
		return sight{}
	})
	e := &env{tap: tp, mc: mc}
	e.h = start(t, addr)
	started.Store(&e.h)
	ctx := context.Background()
	steps := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, e *env)
	}{
		{"registers, then holds the master's interval and a lease", contractRegisters},
		{"assignments reach the host", contractAssigns},
		{"heartbeats are deltas of what changed", contractDeltas},
		{"send_full brings a full heartbeat at once", contractSendFull},
		{"the lease counts from the send", contractLeaseFromSend},
		{"told to register again, drops everything and comes back as a new incarnation", contractReregister},
		{"an unassignment takes its epoch and older ones, never a newer one", contractUnassign},
		{"log-split tasks reach the host", contractLogSplitTasks},
		{"cut off past the lease, the host serves nothing", contractLeaseExpires},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, stepTimeout)
			defer cancel()
			s.run(t, ctx, e)
		}) {
			return // the later steps build on this one
		}
	}
}

// contractRegisters: the host registers under its uuid; its first
// heartbeat is full and of that incarnation; it takes the master's
// interval (not its own default of 1 s) and holds a lease of at most the
// master's.
func contractRegisters(t *testing.T, ctx context.Context, e *env) {
	var reg, first *call
	e.tap.waitFor(t, ctx, "a register and a heartbeat after it", func() error {
		if len(e.tap.registers) == 0 || len(e.tap.beats) == 0 {
			return fmt.Errorf("%d registers, %d heartbeats", len(e.tap.registers), len(e.tap.beats))
		}
		reg, first = e.tap.registers[0], e.tap.beats[0]
		return nil
	})
	if reg.reg.Uuid != e.h.uuid() || first.req.Uuid != e.h.uuid() {
		t.Fatalf("registered %q, heartbeat from %q; the host is %q", reg.reg.Uuid, first.req.Uuid, e.h.uuid())
	}
	if first.req.Incarnation != reg.reg.Incarnation || first.req.Delta || first.req.Seq == 0 {
		t.Fatalf("first heartbeat: incarnation %d (registered %d), delta %v, seq %d; want the registered one, full, numbered",
			first.req.Incarnation, reg.reg.Incarnation, first.req.Delta, first.req.Seq)
	}
	wait.ForCtx(t, ctx, "a valid lease", func() error {
		if !e.h.member().LeaseValid() {
			return errors.New("no valid lease")
		}
		return nil
	})
	m := e.h.member()
	if got := m.Interval(); got != interval {
		t.Errorf("heartbeat interval %v, want the master's %v", got, interval)
	}
	if left := m.Lease().Remaining(time.Now()); left <= 0 || left > lease {
		t.Errorf("lease left %v, want in (0, %v]", left, lease)
	}
	if m.Incarnation() != reg.reg.Incarnation {
		t.Errorf("incarnation %d, registered %d", m.Incarnation(), reg.reg.Incarnation)
	}
}

// contractAssigns: a new table's tablets are assigned to the only host in
// heartbeat replies, and it serves each at the epoch the master gave.
func contractAssigns(t *testing.T, ctx context.Context, e *env) {
	if _, err := e.mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: &pb.TableSchema{Name: table,
		Families: []*pb.FamilySpec{{Name: "cf", MaxVersions: 1}}}, SplitKeys: [][]byte{[]byte("g"), []byte("p")}}); err != nil {
		t.Fatal(err)
	}
	got := e.waitServes(t, ctx)
	if len(got) != 3 {
		t.Fatalf("serves %v, want the table's 3 tablets", got)
	}
	assigned := map[string]bool{}
	e.tap.mu.Lock()
	for _, b := range e.tap.beats {
		for _, a := range b.resp.GetAssign() {
			assigned[a.Tablet.TabletId] = true
		}
	}
	e.tap.mu.Unlock()
	for id := range got {
		if !assigned[id] {
			t.Errorf("tablet %s served but in no heartbeat reply's assignments", id)
		}
	}
}

// contractDeltas: with nothing changing, the host's heartbeats are deltas
// on the one before (which the master acknowledged) naming no tablet, while
// it serves three.
func contractDeltas(t *testing.T, ctx context.Context, e *env) {
	ctx, cancel := context.WithTimeout(ctx, 20*interval)
	defer cancel()
	from := e.tap.heartbeats()
	e.tap.waitFor(t, ctx, "an empty delta heartbeat while the host serves the table", func() error {
		bs := e.tap.beats
		for i := max(from, 1); i < len(bs); i++ {
			prev, b := bs[i-1], bs[i]
			if b.req.Delta && prev.resp.GetAckedSeq() == prev.req.Seq && b.req.BaseSeq == prev.req.Seq &&
				len(b.req.Tablets) == 0 && len(b.req.RemovedTabletIds) == 0 && len(b.host.serving) == 3 {
				return nil
			}
		}
		last := bs[len(bs)-1].req
		return fmt.Errorf("last heartbeat: delta %v, base %d, seq %d, %d tablets, %d removed", last.Delta, last.BaseSeq, last.Seq,
			len(last.Tablets), len(last.RemovedTabletIds))
	})
}

// contractSendFull: after a reply saying send_full, the next heartbeat is
// full, lists every tablet served, and goes at once, not an interval later.
func contractSendFull(t *testing.T, ctx context.Context, e *env) {
	edited, next := e.tap.editNext(t, ctx, edit{fn: func(r *pb.HeartbeatResponse) {
		r.SendFull, r.AckedSeq, r.Assign, r.Unassign = true, 0, nil, nil
	}})
	if next.req.Delta {
		t.Fatalf("heartbeat %d after send_full is a delta on %d", next.req.Seq, next.req.BaseSeq)
	}
	if got := reported(next.req); !slices.Equal(got, slices.Sorted(maps.Keys(next.host.serving))) {
		t.Fatalf("full heartbeat after send_full lists %v, the host serves %v", got, next.host.serving)
	}
	if gap := next.at.Sub(edited.done); gap > interval*4/5 {
		t.Fatalf("the full heartbeat came %v after the send_full reply; want it at once, not at the interval (%v)", gap, interval)
	}
}

// reported is the sorted ids of a heartbeat's tablets.
func reported(req *pb.HeartbeatRequest) []string {
	var ids []string
	for _, r := range req.Tablets {
		ids = append(ids, r.TabletId)
	}
	slices.Sort(ids)
	return ids
}

// contractLeaseFromSend: a reply held back for hold renews the lease to
// the heartbeat's send plus the lease (sent at most a moment before it
// reached the tap), not to its arrival plus the lease, and extends it.
func contractLeaseFromSend(t *testing.T, ctx context.Context, e *env) {
	const hold = 400 * time.Millisecond // under the attempt timeout, 2 intervals
	edited, next := e.tap.editNext(t, ctx, edit{hold: hold})
	end := next.host.leaseEnd // the held reply applied, the next not yet
	if end.IsZero() {
		t.Fatal("no valid lease after the held reply")
	}
	if latest := edited.at.Add(lease); end.After(latest) {
		t.Fatalf("lease ends %v after the held heartbeat reached the master plus the lease: counted from the reply (held %v), not the send",
			end.Sub(latest), hold)
	}
	if earliest := edited.at.Add(lease - hold/2); end.Before(earliest) {
		t.Fatalf("lease ends %v before the held heartbeat's send plus the lease", earliest.Sub(end))
	}
	if !end.After(edited.host.leaseEnd) {
		t.Fatalf("the reply did not extend the lease: it ended at +%v before it, +%v after", edited.host.leaseEnd.Sub(edited.at),
			end.Sub(edited.at))
	}
}

// contractReregister: a reply saying reregister makes the host drop every
// tablet and lease before it registers again, as a new incarnation whose
// first heartbeat is full and lists nothing; the master then gives it the
// table again, at newer epochs.
func contractReregister(t *testing.T, ctx context.Context, e *env) {
	before := e.waitServes(t, ctx)
	old := e.h.member().Incarnation()
	e.tap.mu.Lock()
	regs := len(e.tap.registers)
	e.tap.mu.Unlock()
	edited, _ := e.tap.editNext(t, ctx, edit{fn: func(r *pb.HeartbeatResponse) { *r = pb.HeartbeatResponse{Reregister: true} }})
	var reg, first *call
	e.tap.waitFor(t, ctx, "a register after the reregister reply and a heartbeat after it", func() error {
		if len(e.tap.registers) == regs {
			return errors.New("no register yet")
		}
		reg = e.tap.registers[regs]
		for _, b := range e.tap.beats {
			if b.at.After(reg.at) {
				first = b
				return nil
			}
		}
		return errors.New("no heartbeat after the register yet")
	})
	if reg.at.Before(edited.done) {
		t.Fatalf("registered %v before the reregister reply", edited.done.Sub(reg.at))
	}
	if reg.reg.Incarnation <= old {
		t.Fatalf("registered again as incarnation %d, not newer than %d", reg.reg.Incarnation, old)
	}
	if len(reg.host.serving) != 0 || !reg.host.leaseEnd.IsZero() {
		t.Fatalf("at its new register the host still serves %v (lease to %v)", reg.host.serving, reg.host.leaseEnd)
	}
	if first.req.Incarnation != reg.reg.Incarnation || first.req.Delta || len(first.req.Tablets) != 0 {
		t.Fatalf("first heartbeat of the new incarnation %d: incarnation %d, delta %v, %d tablets; want full and empty",
			reg.reg.Incarnation, first.req.Incarnation, first.req.Delta, len(first.req.Tablets))
	}
	after := e.waitServes(t, ctx)
	for id, ep := range after {
		if ep <= before[id] {
			t.Errorf("tablet %s served again at epoch %d, not newer than %d", id, ep, before[id])
		}
	}
}

// contractUnassign: an unassignment of a tablet naming an older epoch than
// the host serves it at changes nothing; one naming its epoch drops it at
// once: the next heartbeat no longer holds it.
func contractUnassign(t *testing.T, ctx context.Context, e *env) {
	held := e.waitServes(t, ctx)
	id := slices.Sorted(maps.Keys(held))[0]
	ep := held[id]
	if ep < 2 {
		t.Fatalf("tablet %s at epoch %d: the step needs an older epoch than it", id, ep)
	}
	unassign := func(epoch int64) edit {
		return edit{fn: func(r *pb.HeartbeatResponse) {
			r.Unassign = append(r.Unassign, &pb.TabletUnassignment{TabletId: id, Epoch: epoch})
		}}
	}
	_, next := e.tap.editNext(t, ctx, unassign(ep-1))
	if got, ok := next.host.serving[id]; !ok || got != ep || dropped(next.req, id) {
		t.Fatalf("unassigned at epoch %d, older than the %d it serves %s at: then serving it %v (at %d), its next heartbeat drops it %v",
			ep-1, ep, id, ok, got, dropped(next.req, id))
	}
	_, next = e.tap.editNext(t, ctx, unassign(ep))
	if got, ok := next.host.serving[id]; ok || !dropped(next.req, id) {
		t.Fatalf("unassigned at its epoch %d: then still serving %s %v (at %d), its next heartbeat drops it %v",
			ep, id, ok, got, dropped(next.req, id))
	}
	e.waitServes(t, ctx) // the master assigns it again
}

// dropped reports whether a heartbeat says the host no longer holds id:
// removed in a delta, or absent from a full one.
func dropped(req *pb.HeartbeatRequest, id string) bool {
	if req.Delta {
		return slices.Contains(req.RemovedTabletIds, id)
	}
	return !slices.Contains(reported(req), id)
}

// contractLogSplitTasks: a log-split task in a reply is run by the host,
// which reports it to the master (here a task that deletes a recovery
// file that does not exist: nothing to do but answer).
func contractLogSplitTasks(t *testing.T, ctx context.Context, e *env) {
	task := contractTask + e.h.uuid() + ".log"
	e.tap.editNext(t, ctx, edit{fn: func(r *pb.HeartbeatResponse) {
		r.LogSplitTasks = append(r.LogSplitTasks, &pb.LogSplitTask{TaskId: task})
	}})
	e.tap.waitFor(t, ctx, "the host's report of the log-split task", func() error {
		if u, ok := e.tap.splits[task]; !ok || u != e.h.uuid() {
			return fmt.Errorf("reported by %q (%v)", u, ok)
		}
		return nil
	})
}

// contractLeaseExpires: cut off from the master, the host serves until
// its lease ends and nothing from then on (at once: a watcher wakes at the
// end, no failed heartbeat is awaited); back in touch, it serves the table
// again.
func contractLeaseExpires(t *testing.T, ctx context.Context, e *env) {
	e.waitServes(t, ctx)
	end := e.sight().leaseEnd // the last lease end seen: a heartbeat in flight may still renew it
	e.tap.setCut(true)
	var stopped time.Time // when it served nothing
	wait.For(t, lease+2*time.Second, "the host to serve nothing", func() error {
		s := e.sight()
		if len(s.serving) != 0 {
			if s.leaseEnd.After(end) {
				end = s.leaseEnd
			}
			return fmt.Errorf("serves %v", s.serving)
		}
		stopped = time.Now()
		return nil
	})
	if stopped.Before(end) {
		t.Fatalf("the host stopped serving %v before its lease ended", end.Sub(stopped))
	}
	if late := stopped.Sub(end); late > interval/2 {
		t.Fatalf("the host served on %v after its lease ended", late)
	}
	if e.h.member().LeaseValid() {
		t.Fatal("serves nothing, yet holds a valid lease")
	}
	e.tap.setCut(false)
	e.waitServes(t, ctx)
}
