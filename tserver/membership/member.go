package membership

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"bighive/internal/hbdelta"
	pb "bighive/proto/bighivepb"
)

// registerTimeout bounds one register call of the heartbeat loop.
const registerTimeout = 5 * time.Second

// Master is the way to the masters: a leader-following connection
// (internal/masterconn's Conn is one).
type Master interface {
	// Call runs fn at the leader, retrying other masters as the
	// connection does; fn must use the context it is given.
	Call(ctx context.Context, fn func(ctx context.Context, m pb.MasterClient) error) error
	// AttemptTimeout bounds one attempt at one master; SetAttemptTimeout
	// changes it (the membership sets AttemptTimeout(interval) once the
	// master told the heartbeat interval).
	AttemptTimeout() time.Duration
	SetAttemptTimeout(d time.Duration)
}

// Host is the tserver, real or simulated, that the membership keeps in the
// cluster: what it holds, and what it does with a heartbeat reply. The
// heartbeat loop calls Reports, Learn, Unassign, Assign, RunLogSplitTasks
// and DropAll one at a time; LeaseChanged comes from the loop and from the
// lease watcher, never two at once.
type Host interface {
	// Reports returns a report of every tablet the host holds for the
	// next heartbeat: the serving ones and the loads it may still finish
	// at their epoch (not serving). It also fills what else req carries
	// of the host (its load, its grants version).
	Reports(req *pb.HeartbeatRequest) []*pb.TabletReport
	// Learn takes what a reply says besides tablets (grants, schemas,
	// cache priorities, the leader's HTTP address), first.
	Learn(resp *pb.HeartbeatResponse)
	// Unassign stops serving the tablets the reply takes away (those held
	// at an epoch Unassigns gives up), and cancels such loads. It runs
	// before the lease is renewed, so a client holding an old epoch is
	// never served after the reassignment.
	Unassign(ctx context.Context, unassign []*pb.TabletUnassignment)
	// Assign starts loading the assigned tablets of a newer epoch than
	// the host holds, in the background: the loop waits for no load.
	Assign(ctx context.Context, assign []*pb.TabletAssignment)
	// RunLogSplitTasks starts the reply's log-split tasks in the
	// background, each once while it runs.
	RunLogSplitTasks(ctx context.Context, tasks []*pb.LogSplitTask)
	// LeaseChanged says the lease may have changed (renewed, revoked, or
	// run out with nobody renewing it); valid is whether it holds now.
	// While it does not, the host serves nothing.
	LeaseChanged(valid bool)
	// DropAll drops every tablet and load the host holds: the master
	// asked this process to register again (it declared it dead, or does
	// not know it), so what it held may be served elsewhere already.
	DropAll(why string)
}

// Config describes the process to the master.
type Config struct {
	// UUID, Address, WALPrefix, BlockStoreUUID and HTTPAddress are what
	// RegisterTServer announces (HTTPAddress "" without an HTTP port).
	UUID, Address, WALPrefix, BlockStoreUUID, HTTPAddress string
	// Incarnation is the first register call's; 0: NextIncarnation(0).
	Incarnation int64
	// Lease is the lease the membership renews and revokes; nil: one of
	// its own. A host that reads its lease before the membership exists
	// (a tserver's metrics, from its start) holds it itself.
	Lease *Lease
	// Interval is the heartbeat interval until the master tells its own
	// (default 1 s).
	Interval time.Duration
	// OnHeartbeat, if set, is called after each heartbeat call with when
	// it was sent and its error (nil: answered), for metrics.
	OnHeartbeat func(sent time.Time, err error)
	Logger      *slog.Logger
}

// Member is one process's membership: its incarnation, its lease and the
// heartbeat loop that keeps them. Its methods are safe for concurrent use,
// except Register and Run: Register, if called, comes before Run.
type Member struct {
	cfg    Config
	master Master
	host   Host
	log    *slog.Logger

	incarnation atomic.Int64
	every       atomic.Int64 // heartbeat interval, nanoseconds
	lease       *Lease
	nudge       chan struct{}
	notifyMu    sync.Mutex // orders the LeaseChanged calls with their reads of the lease

	// The heartbeat loop's own state.
	registered bool
	tried      bool            // a register call was made for this incarnation
	delta      hbdelta.Tracker // what the master acknowledged of this incarnation
}

// New returns the membership of a process; Register or Run registers it.
func New(cfg Config, master Master, host Host) *Member {
	if cfg.Incarnation == 0 {
		cfg.Incarnation = NextIncarnation(0)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Lease == nil {
		cfg.Lease = &Lease{}
	}
	m := &Member{cfg: cfg, master: master, host: host, log: cfg.Logger, lease: cfg.Lease, nudge: make(chan struct{}, 1)}
	m.incarnation.Store(cfg.Incarnation)
	m.every.Store(int64(cfg.Interval))
	return m
}

// AttemptTimeout bounds one attempt of a call to one master: two
// heartbeat intervals, at least 200 ms. A master that stopped answering
// costs the tserver that long before it asks the next one, well inside a
// lease (which spans several heartbeats). A heartbeat waits for three.
func AttemptTimeout(heartbeat time.Duration) time.Duration {
	return max(2*heartbeat, 200*time.Millisecond)
}

// NextIncarnation is a new incarnation number after old: the clock's
// microseconds, or old+1 if the clock stepped back.
func NextIncarnation(old int64) int64 { return max(time.Now().UnixMicro(), old+1) }

// Unassigns reports whether the unassignment u takes away a tablet held
// at epoch held: u ends its own epoch and every older one, or any epoch
// when it names none (0). A newer held epoch is a later assignment, which
// u must not undo.
func Unassigns(u *pb.TabletUnassignment, held int64) bool {
	return u.Epoch == 0 || held <= u.Epoch
}

// Incarnation is the current incarnation (the next register call's, once
// the master asked for a new one).
func (m *Member) Incarnation() int64 { return m.incarnation.Load() }

// Interval is the heartbeat interval: the master's once registered.
func (m *Member) Interval() time.Duration { return time.Duration(m.every.Load()) }

// Lease is the lease the heartbeat replies renew.
func (m *Member) Lease() *Lease { return m.lease }

// LeaseValid reports whether the lease holds now.
func (m *Member) LeaseValid() bool { return m.lease.Valid(time.Now()) }

// RevokeLease gives the lease up now (the process stops serving) and tells
// the host.
func (m *Member) RevokeLease() {
	m.lease.Revoke()
	m.leaseChanged()
}

// Nudge makes the next heartbeat go now instead of at the interval (what
// the host holds changed).
func (m *Member) Nudge() {
	select {
	case m.nudge <- struct{}{}:
	default:
	}
}

// Register makes one register call. A call after one that failed is a new
// incarnation: the failed one may have reached the master without its
// reply reaching us, and that incarnation may have been declared dead
// since; the master never revives a dead incarnation. No tablet was loaded
// under the old one: assignments come only in heartbeat replies, after a
// register succeeded. Once registered, the next heartbeat is full.
func (m *Member) Register(ctx context.Context) error {
	if m.tried {
		m.incarnation.Store(NextIncarnation(m.incarnation.Load()))
	}
	m.tried = true
	err := m.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) error {
		resp, err := mc.RegisterTServer(ctx, &pb.RegisterTServerRequest{
			Uuid:           m.cfg.UUID,
			Address:        m.cfg.Address,
			Incarnation:    m.Incarnation(),
			WalPrefix:      m.cfg.WALPrefix,
			BlockStoreUuid: m.cfg.BlockStoreUUID,
			HttpAddress:    m.cfg.HTTPAddress,
		})
		if err != nil {
			return err
		}
		if d := time.Duration(resp.HeartbeatIntervalMicros) * time.Microsecond; d > 0 {
			m.every.Store(int64(d))
			m.master.SetAttemptTimeout(AttemptTimeout(d))
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.registered = true
	m.delta.Reset() // a new incarnation starts with a full heartbeat
	m.log.Info("registered with the master", "uuid", m.cfg.UUID, "incarnation", m.Incarnation())
	return nil
}

// Run registers (unless Register did), then heartbeats every interval (or
// at once after a Nudge) until ctx ends, and watches the lease: the host
// hears when it runs out with nobody renewing it.
func (m *Member) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { m.watchLease(ctx) })
	defer wg.Wait()
	for {
		if !m.registered {
			rctx, cancel := context.WithTimeout(ctx, registerTimeout)
			err := m.Register(rctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				m.log.Warn("register failed", "err", err)
			}
		}
		if m.registered && m.heartbeat(ctx) {
			continue // told to register again: at once, as a new incarnation
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.Interval()):
		case <-m.nudge:
		}
	}
}

// heartbeat sends one heartbeat and applies the reply. It reports whether
// the master asked this process to register again.
func (m *Member) heartbeat(ctx context.Context) (reregister bool) {
	req := &pb.HeartbeatRequest{Uuid: m.cfg.UUID, Incarnation: m.Incarnation()}
	reports := m.delta.Fill(req, m.host.Reports(req)) // full or a delta (internal/hbdelta)
	sent := time.Now()
	hctx, cancel := context.WithTimeout(ctx, 3*m.master.AttemptTimeout())
	defer cancel()
	var resp *pb.HeartbeatResponse
	err := m.master.Call(hctx, func(ctx context.Context, mc pb.MasterClient) (err error) {
		resp, err = mc.Heartbeat(ctx, req)
		return err
	})
	if m.cfg.OnHeartbeat != nil {
		m.cfg.OnHeartbeat(sent, err)
	}
	// A lease that ran out while the heartbeat was on its way (or the
	// process was stopped) is reported before the reply renews it.
	m.leaseChanged()
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("heartbeat failed", "err", err, "lease_left", m.lease.Remaining(time.Now()))
		}
		return false
	}
	if resp.Reregister {
		// The master no longer knows this process, or declared it dead (its
		// tablets went elsewhere, or are going): serve nothing from before,
		// and start over as a new incarnation, which the master gives new
		// tablets only.
		m.RevokeLease()
		m.host.DropAll("the master asked this tserver to register again")
		m.log.Warn("the master asked this tserver to register again; dropped every tablet", "incarnation", m.Incarnation())
		m.incarnation.Store(NextIncarnation(m.Incarnation()))
		m.registered, m.tried = false, false // this call chose the new incarnation
		return true
	}
	if m.delta.Ack(reports, resp) {
		m.Nudge() // the master has no base: a full heartbeat now
	}
	m.host.Learn(resp)
	// Tablets the master moved away go before the lease is renewed, so a
	// client holding an old epoch is never served after the reassignment.
	m.host.Unassign(ctx, resp.Unassign)
	if d := time.Duration(resp.LeaseDurationMicros) * time.Microsecond; d > 0 {
		m.lease.Renew(sent, d)
		m.leaseChanged()
	}
	m.host.Assign(ctx, resp.Assign)
	m.host.RunLogSplitTasks(ctx, resp.LogSplitTasks)
	return false
}

// leaseChanged tells the host whether the lease holds now. The read and the
// call are under one lock, so the host hears the reads in their order.
func (m *Member) leaseChanged() {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.host.LeaseChanged(m.lease.Valid(time.Now()))
}

// watchLease tells the host of a lease that runs out with nobody renewing
// it (the master unreachable, the process stopped): it wakes at the
// expiry, and at least every second. Renewals and revocations tell the
// host themselves.
func (m *Member) watchLease(ctx context.Context) {
	for {
		m.leaseChanged()
		wait := time.Second
		if left := m.lease.Remaining(time.Now()); left > 0 && left < wait {
			wait = left + time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
