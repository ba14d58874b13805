package master

import (
	"context"
	"slices"
	"sync"
	"time"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// lease is the leader's in-memory view of one tserver.
type lease struct {
	uuid        string
	incarnation int64
	last        time.Time // last heartbeat received (or the leader's start); a time.Now() reading, compared on the monotonic clock, never as Unix time
	heard       bool      // heartbeated or registered with this leader
	registered  time.Time // when it registered with this leader (zero: before this leader session); starts the rebalancing warm-up
	dead        bool      // declared dead; its tablets were unassigned
	load        *pb.TServerLoad
	sentAssign  map[string]time.Time // tablet id → last time its assignment was sent
	sentPrio    map[string]pb.CachePriority
	sentSchema  map[string]int64 // table → schema version last sent in a reply
	// Incremental heartbeats (heldset.go), under the tserver's heartbeat
	// lock: the held set as of heartbeat ackSeq (nil: no base, a delta
	// gets send_full), and the last reconciliation.
	held   map[string]heldTablet
	ackSeq uint64
	recon  reconciliation
}

// move is a rebalancing move in flight.
type move struct {
	tablet   string
	epoch    int64 // the tablet's epoch when the move began
	from, to string
	told     bool // the unassignment went out in a heartbeat reply
	merge    bool // started to bring a pair together for a merge
	stopped  bool // a later heartbeat of from no longer lists the tablet
}

// leaderState is what only the leader keeps, in memory.
type leaderState struct {
	m     *Master
	since time.Time
	kick  chan struct{}

	// confirmed is when the last ask to a quorum that confirmed this
	// leadership was issued; leases are granted only shortly after it
	// (confirm.go).
	confirmMu sync.Mutex
	confirmed time.Time
	// verifyMu lets one grant at a time ask a quorum itself, when the
	// background asks are late (mayGrant).
	verifyMu sync.Mutex

	mu     sync.Mutex
	leases map[string]*lease
	moves  map[string]*move // by tablet id
	prio   map[string]pb.CachePriority
	sizes  map[string]int64           // reported tablet sizes by tablet id
	space  map[string]*pb.TabletSpace // reported TSFile space by tablet id (with sizes)
	splits logSplits                  // log splits of dead tservers' logs (logsplit.go)
	merge  mergeState                 // merge.go
	grace  startupGrace               // grace.go
	ddl    map[string]bool            // tables a call on this leader is creating or deleting (ddlchunk.go)

	hbLocks sync.Map // tserver uuid → *sync.Mutex (heldset.go)

	moveStarts []time.Time             // rebalancing moves started in the last Config.MoveInterval, oldest first (under mu)
	news       map[string]bool         // tservers this tick has something new for, nudged at its end (nudge.go; under mu)
	nudges     chan struct{}           // a slot per nudge in flight (nudge.go; made under mu)
	unavail    map[string]unavailStart // tablets not served since, until a load commits (unavail.go; under mu)
}

func newLease(uuid string, inc int64, now time.Time) *lease {
	return &lease{uuid: uuid, incarnation: inc, last: now,
		sentAssign: map[string]time.Time{}, sentPrio: map[string]pb.CachePriority{},
		sentSchema: map[string]int64{}}
}

// runLeader is one leader session: catch up with a barrier, give every
// tserver a fresh lease, then run the assignment loop until ctx ends.
func (m *Master) runLeader(ctx context.Context) {
	began := time.Now()
	var barrier time.Time // when the barrier that succeeded was issued
	for {
		barrier = time.Now()
		if err := m.node.Raft.Barrier(5 * time.Second).Error(); err == nil {
			break
		} else if ctx.Err() != nil {
			return
		} else {
			m.log.Warn("leader barrier failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	now := time.Now()
	ls := &leaderState{m: m, since: now, kick: make(chan struct{}, 1),
		leases: map[string]*lease{}, moves: map[string]*move{}, prio: map[string]pb.CachePriority{}, sizes: map[string]int64{}, space: map[string]*pb.TabletSpace{},
		splits: newLogSplits(), ddl: map[string]bool{}}
	var tservers []*spb.MetaTServer
	if err := m.view(func(r *meta.Reader) (err error) { tservers, err = r.TServers(); return err }); err != nil {
		m.log.Error("leader cannot read tservers", "err", err)
		return
	}
	for _, ts := range tservers {
		ls.leases[ts.Uuid] = newLease(ts.Uuid, ts.Incarnation, now)
	}
	ls.grace = newStartupGrace(now, m.cfg.StartupGrace, m.cfg.Heartbeat, tservers)
	// The barrier's commit was a quorum's confirmation of this term.
	ls.noteConfirmed(barrier)
	go ls.confirmLeadership(ctx)
	m.setLeader(ls)
	defer m.setLeader(nil)
	m.bootstrapAdmin(ctx)
	m.log.Info("leader ready", "catch_up", time.Since(began), "tservers", len(tservers))
	m.events.add("leader", "%s became the ready leader (catch-up %s, %d tservers)", m.cfg.ID, time.Since(began).Round(time.Millisecond), len(tservers))

	t := time.NewTicker(m.cfg.TickInterval)
	defer t.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		ls.tick(ctx)
		// The next lease to run out ends the wait too, so a dead tserver
		// is declared as its lease plus the margin ends, not up to a tick
		// later.
		expiry.Reset(ls.untilNextExpiry(time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-ls.kick:
		case <-expiry.C:
		}
	}
}

// untilNextExpiry is the time from now until the first live lease's end
// plus the margin has passed (expired), or an hour when no lease will run
// out or one already has (the next tick declares it).
func (ls *leaderState) untilNextExpiry(now time.Time) time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	wait := time.Hour
	for _, l := range ls.leases {
		if l.dead {
			continue
		}
		// expired wants more than deadAfter: a microsecond past it.
		if d := l.last.Add(ls.deadAfter(l)).Sub(now) + time.Microsecond; d > 0 {
			wait = min(wait, d)
		}
	}
	return wait
}

// poke asks the leader loop to run a tick soon.
func (ls *leaderState) poke() {
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

// expired reports whether l's lease plus the margin has run out.
func (ls *leaderState) expired(l *lease, now time.Time) bool {
	return now.Sub(l.last) > ls.deadAfter(l)
}

// deadAfter is how long after l.last the tserver is dead: Lease +
// DeadMargin after a heartbeat this leader received, Lease +
// ConfirmWindow after this leader's start for a tserver it never heard
// from, whose last lease an earlier leader granted within ConfirmWindow
// of a confirmation that came before this leader's election (confirm.go).
func (ls *leaderState) deadAfter(l *lease) time.Duration {
	if l.heard {
		return ls.m.cfg.Lease + ls.m.cfg.DeadMargin
	}
	return ls.m.cfg.Lease + ls.m.cfg.ConfirmWindow
}

// liveLocked lists the tservers new tablets may go to, in uuid order.
func (ls *leaderState) liveLocked(now time.Time) []string {
	var out []string
	for u, l := range ls.leases {
		if l.heard && !l.dead && !ls.expired(l, now) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// tick: declare dead tservers and free their tablets, finish moves,
// assign unassigned tablets, start rebalancing moves. Each step is a
// function; a step that returns false ends the tick (a failed command, or
// work the next tick does against the committed state).
func (ls *leaderState) tick(ctx context.Context) {
	defer ls.nudgeNews(ctx)
	now := time.Now()
	if ls.inStartupGrace(now) {
		return
	}
	if !ls.freeDeadTablets(ctx, now) {
		return
	}
	live, ok := ls.finishMoves(ctx, now)
	if !ok {
		return
	}
	// Tables left half created or half deleted (ddlchunk.go).
	ls.finishPending(ctx)
	owned, counts, ok := ls.assignUnassigned(ctx, now, live)
	if !ok {
		return
	}
	ls.rebalance(now, live, owned, counts)
}

// freeDeadTablets is step 1: tservers whose lease ran out are declared
// dead, and their tablets become UNASSIGNED (one command).
func (ls *leaderState) freeDeadTablets(ctx context.Context, now time.Time) bool {
	m := ls.m
	ls.mu.Lock()
	ls.forgetUnavailableLocked(now)
	var dead []string
	for u, l := range ls.leases {
		if !l.dead && ls.expired(l, now) {
			l.dead = true
			m.log.Warn("tserver lease expired; declaring it dead", "tserver", u, "last_heartbeat", l.last)
			m.events.add("tserver", "tserver %s declared dead: lease expired (last heartbeat %s)", u, l.last.UTC().Format(time.RFC3339Nano))
		}
		if l.dead {
			dead = append(dead, u)
		}
	}
	ls.mu.Unlock()
	var un []*spb.MetaUnassign_Item
	_ = m.view(func(r *meta.Reader) error {
		for _, u := range dead {
			ts, err := r.TabletsOf(u)
			if err != nil {
				return err
			}
			for _, t := range ts {
				un = append(un, &spb.MetaUnassign_Item{TabletId: t.TabletId, ExpectedEpoch: t.Epoch, ExpectedTserver: u})
			}
		}
		return nil
	})
	if len(un) > 0 {
		res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_Unassign{Unassign: &spb.MetaUnassign{Items: un}}})
		if err != nil {
			m.log.Warn("unassigning dead tservers' tablets failed", "err", err)
			return false
		}
		ls.mu.Lock()
		for _, it := range un {
			if l := ls.leases[it.ExpectedTserver]; l != nil {
				ls.unavailableLocked(it.TabletId, l.last, causeRecovery)
			}
		}
		ls.mu.Unlock()
		m.log.Info("unassigned tablets of dead tservers", "tablets", res.Applied, "tservers", dead)
		m.events.add("recovery", "%d tablets of dead tservers %v unassigned for recovery", res.Applied, dead)
	}
	return true
}

// finishMoves is step 2: a move whose old owner stopped serving the
// tablet is finished by assigning the tablet to the new owner. It returns
// the live tservers.
func (ls *leaderState) finishMoves(ctx context.Context, now time.Time) (live []string, ok bool) {
	m := ls.m
	ls.mu.Lock()
	live = ls.liveLocked(now)
	var items []*spb.MetaAssign_Item
	forMerge := false
	for id, mv := range ls.moves {
		from := ls.leases[mv.from]
		if !mv.stopped && (from != nil && !from.dead) {
			continue
		}
		delete(ls.moves, id)
		if !mv.stopped {
			// The old owner died holding the tablet: step 1 unassigned
			// it, and step 3 recovers it with the others, after the log
			// split, instead of a whole-log replay of its own.
			continue
		}
		if slices.Contains(live, mv.to) {
			items = append(items, &spb.MetaAssign_Item{TabletId: id, ExpectedEpoch: mv.epoch, TserverUuid: mv.to})
			forMerge = forMerge || mv.merge
		}
	}
	ls.mu.Unlock()
	if forMerge {
		if err := m.mergeHook(MergeStepMoving); err != nil {
			m.log.Warn("finishing moves failed", "err", err) // the old owners are sent the tablets again
			return nil, false
		}
	}
	if len(items) > 0 {
		res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_Assign{Assign: &spb.MetaAssign{Items: items}}})
		if err != nil {
			m.log.Warn("finishing moves failed", "err", err)
			return nil, false
		}
		m.log.Info("moved tablets", "tablets", res.Applied)
		ls.mu.Lock()
		for _, it := range items {
			ls.noteNewsLocked(it.TserverUuid)
		}
		ls.mu.Unlock()
		for _, it := range items {
			m.events.add("move", "tablet %s assigned to %s (end of a move)", it.TabletId, it.TserverUuid)
		}
	}
	return live, true
}

// assignUnassigned is step 3: unassigned tablets go to the least loaded
// live tservers, once their owners' logs are split by tablet
// (logsplit.go); log splits whose tasks all answered are committed first,
// so their tablets go now. It returns each live tserver's tablets and
// their counts with the moves in flight, for step 4, and false when step
// 4 waits for the next tick (nothing live, a failed command, or tablets
// assigned or held now: rebalancing plans against the committed state).
func (ls *leaderState) assignUnassigned(ctx context.Context, now time.Time, live []string) (owned map[string][]string, counts map[string]int, ok bool) {
	m := ls.m
	ls.commitSplits(ctx)
	if len(live) == 0 {
		return nil, nil, false
	}
	ls.collectRecoveryGarbage(now)
	var unassigned []*pb.TabletMeta
	counts = map[string]int{}
	owned = map[string][]string{} // ids only: decoding every tablet each tick was most of the leader's CPU
	err := m.view(func(r *meta.Reader) (err error) {
		if unassigned, err = unassignedTablets(r); err != nil {
			return err
		}
		for _, u := range live {
			owned[u] = r.TabletIDsOf(u)
			counts[u] = len(owned[u])
		}
		return nil
	})
	if err != nil {
		m.log.Error("leader cannot read tablets", "err", err)
		return nil, nil, false
	}
	ls.mu.Lock()
	for _, mv := range ls.moves {
		counts[mv.from]--
		counts[mv.to]++
	}
	var ids []string
	epoch := map[string]int64{}
	held := ls.holdForSplitLocked(now, live, unassigned)
	ls.noteSplitNewsLocked()
	// At most one command of DDLChunk tablets per tick, so neither ls.mu
	// (planning) nor bbolt's writer (the command) is held for long after
	// a big CreateTable; the rest goes in the next ticks, which come at
	// once.
	more := false
	for _, t := range unassigned {
		if ls.moves[t.TabletId] == nil && !held[t.TabletId] {
			if len(ids) == m.cfg.DDLChunk {
				more = true
				break
			}
			ids = append(ids, t.TabletId)
			epoch[t.TabletId] = t.Epoch
		}
	}
	plan := planAssign(ids, live, counts)
	ls.mu.Unlock()
	var items []*spb.MetaAssign_Item
	for _, id := range ids {
		items = append(items, &spb.MetaAssign_Item{TabletId: id, ExpectedEpoch: epoch[id], TserverUuid: plan[id]})
	}
	if len(items) > 0 {
		res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_Assign{Assign: &spb.MetaAssign{Items: items}}})
		if err != nil {
			m.log.Warn("assigning tablets failed", "err", err)
			return nil, nil, false
		}
		m.log.Info("assigned tablets", "tablets", res.Applied, "live_tservers", len(live))
		ls.mu.Lock()
		for _, it := range items {
			ls.noteNewsLocked(it.TserverUuid)
		}
		ls.mu.Unlock()
	}
	if more {
		ls.poke()
	}
	if len(ids) > 0 || len(held) > 0 {
		return nil, nil, false // rebalance on the next tick, against the committed state
	}
	return owned, counts, true
}

// rebalance is step 4: moves from the most loaded live tservers to the
// least loaded warm ones (rebalanceTargetsLocked), within the move budget
// (moveBudgetLocked).
func (ls *leaderState) rebalance(now time.Time, live []string, owned map[string][]string, counts map[string]int) {
	m := ls.m
	ls.mu.Lock()
	budget := ls.moveBudgetLocked(now)
	if budget <= 0 {
		ls.mu.Unlock()
		return
	}
	movable := map[string][]string{}
	for _, u := range live {
		for _, id := range owned[u] {
			if ls.moves[id] == nil && !ls.mergeHeldLocked(id, now) {
				movable[u] = append(movable[u], id)
			}
		}
	}
	moves := planMoves(movable, live, ls.rebalanceTargetsLocked(live, now), counts, budget)
	ls.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	// The moving tablets' epochs, read now: a tablet that changed since the
	// count (split, deleted, moved) is skipped, and the move's assignment
	// checks its epoch anyway.
	tabEpoch := map[string]int64{}
	_ = m.view(func(r *meta.Reader) error {
		for _, pm := range moves {
			if b, ok, err := r.TabletBrief(pm.tablet); err == nil && ok && b.Tserver == pm.from &&
				b.State != pb.TabletState_TABLET_STATE_UNASSIGNED {
				tabEpoch[pm.tablet] = b.Epoch
			}
		}
		return nil
	})
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, pm := range moves {
		ep, ok := tabEpoch[pm.tablet]
		if !ok || ls.moves[pm.tablet] != nil {
			continue
		}
		ls.startMoveLocked(pm, ep, now)
		m.log.Info("rebalancing: moving tablet", "tablet", pm.tablet, "from", pm.from, "to", pm.to)
		m.events.add("move", "tablet %s moving from %s to %s (rebalancing)", pm.tablet, pm.from, pm.to)
	}
}

// moveBudgetLocked is how many rebalancing moves may start at now:
// Config.MaxMoves less the moves in flight (merges' too), and at most
// Config.MovesPerInterval less the rebalancing moves started in the last
// Config.MoveInterval. It forgets the starts older than that.
func (ls *leaderState) moveBudgetLocked(now time.Time) int {
	cfg := &ls.m.cfg
	budget := cfg.MaxMoves - len(ls.moves)
	if cfg.MovesPerInterval < 0 {
		return budget
	}
	i := 0
	for i < len(ls.moveStarts) && now.Sub(ls.moveStarts[i]) >= cfg.MoveInterval {
		i++
	}
	ls.moveStarts = ls.moveStarts[i:]
	return min(budget, cfg.MovesPerInterval-len(ls.moveStarts))
}

// rebalanceTargetsLocked lists the live tservers rebalancing may move
// tablets to: all but those that registered with this leader less than
// Config.RebalanceWarmup ago.
func (ls *leaderState) rebalanceTargetsLocked(live []string, now time.Time) []string {
	var out []string
	for _, u := range live {
		if l := ls.leases[u]; l == nil || l.registered.IsZero() || now.Sub(l.registered) >= ls.m.cfg.RebalanceWarmup {
			out = append(out, u)
		}
	}
	return out
}

// startMoveLocked records a rebalancing move planned at now, its tablet
// at epoch, charges it to the move budget and notes the old owner, which
// is told to let go in its next heartbeat's reply (nudge.go).
func (ls *leaderState) startMoveLocked(pm plannedMove, epoch int64, now time.Time) {
	ls.moves[pm.tablet] = &move{tablet: pm.tablet, epoch: epoch, from: pm.from, to: pm.to}
	ls.moveStarts = append(ls.moveStarts, now)
	ls.noteNewsLocked(pm.from)
}

// leaderPasses calls pass every interval while this master is the ready
// leader, until Close; the goroutine running it was counted in m.wg.
func (m *Master) leaderPasses(every time.Duration, pass func(ctx context.Context, ls *leaderState)) {
	defer m.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-m.stop; cancel() }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ls, err := m.ready(); err == nil {
			pass(ctx, ls)
		}
	}
}
