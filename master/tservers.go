package master

import (
	"context"
	"strings"
	"time"

	"bighive/internal/apierr"
	"bighive/internal/obs"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func validUUID(what, s string) error {
	if s == "" {
		return apierr.InvalidArgument("%s is empty", what)
	}
	if len(s) > 128 || strings.ContainsAny(s, "\x00/") {
		return apierr.InvalidArgument("%s %q must be 1-128 bytes without NUL or '/'", what, s)
	}
	return nil
}

// RegisterTServer records a tserver (one command). A new incarnation of a
// known uuid frees the tablets of the old process in the same command;
// the leader loop assigns them again.
func (m *Master) RegisterTServer(ctx context.Context, req *pb.RegisterTServerRequest) (*pb.RegisterTServerResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := ls.mayGrant(time.Now()); err != nil {
		return nil, err
	}
	if err := validUUID("tserver uuid", req.Uuid); err != nil {
		return nil, err
	}
	if req.Address == "" {
		return nil, apierr.InvalidArgument("tserver %s registers without an address", req.Uuid)
	}
	if ls.deadIncarnation(req.Uuid, req.Incarnation) {
		return nil, apierr.FailedPrecondition("tserver %s incarnation %d was declared dead and its tablets were taken away; register as a new incarnation", req.Uuid, req.Incarnation)
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_RegisterTserver{RegisterTserver: &spb.MetaRegisterTServer{
		Tserver: &spb.MetaTServer{Uuid: req.Uuid, Address: req.Address, Incarnation: req.Incarnation,
			WalPrefix: req.WalPrefix, BlockStoreUuid: req.BlockStoreUuid, HttpAddress: req.HttpAddress}}}})
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	old := ls.leases[req.Uuid]
	if old != nil && old.dead && old.incarnation == req.Incarnation {
		// Declared dead while the command committed: no lease.
		ls.mu.Unlock()
		return nil, apierr.FailedPrecondition("tserver %s incarnation %d was declared dead and its tablets were taken away; register as a new incarnation", req.Uuid, req.Incarnation)
	}
	now := time.Now()
	l := newLease(req.Uuid, req.Incarnation, now)
	l.heard, l.registered = true, now
	if old != nil && old.incarnation == req.Incarnation {
		l.sentAssign, l.sentPrio, l.sentSchema = old.sentAssign, old.sentPrio, old.sentSchema
	}
	ls.leases[req.Uuid] = l
	if old != nil {
		for _, id := range res.IDs { // the old process's tablets, freed for recovery
			ls.unavailableLocked(id, old.last, causeRecovery)
		}
	}
	for id, mv := range ls.moves {
		if len(res.IDs) > 0 && (mv.from == req.Uuid || mv.to == req.Uuid) {
			delete(ls.moves, id)
		}
	}
	ls.mu.Unlock()
	ls.poke()
	m.events.add("tserver", "tserver %s registered at %s (incarnation %d, %d tablets freed for recovery)", req.Uuid, req.Address,
		req.Incarnation, len(res.IDs))
	m.log.Info("tserver registered", "tserver", req.Uuid, "address", req.Address, "incarnation", req.Incarnation,
		"freed_tablets", len(res.IDs))
	return &pb.RegisterTServerResponse{
		LeaseDurationMicros:     m.cfg.Lease.Microseconds(),
		HeartbeatIntervalMicros: m.cfg.Heartbeat.Microseconds(),
	}, nil
}

// Heartbeat renews a tserver's lease (leader memory only) and answers what
// it must load and unload. A tserver the leader declared dead is never
// renewed: it is told to register again (Reregister), as a new incarnation.
// A delta heartbeat updates the held set the lease keeps, and a heartbeat
// that changes neither it nor the tserver's ownership reuses the last
// reconciliation (heldset.go).
func (m *Master) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := ls.mayGrant(time.Now()); err != nil {
		return nil, err
	}
	defer func(began time.Time) { m.metrics.heartbeat.Observe(time.Since(began).Seconds()) }(time.Now())
	if err := validUUID("tserver uuid", req.Uuid); err != nil {
		return nil, err
	}
	if err := validDelta(req); err != nil {
		return nil, err
	}
	defer ls.lockTServer(req.Uuid)()
	now := time.Now()
	gen := m.node.FSM.OwnerGeneration(req.Uuid) // before the view (meta.FSM.OwnerGeneration)
	ls.mu.Lock()
	base := ls.leases[req.Uuid]
	if base != nil && (base.incarnation != req.Incarnation || base.dead) {
		base = nil
	}
	plan := planHeartbeat(base, req, gen, now, ls.movesFromLocked(req.Uuid))
	ls.mu.Unlock()
	ok := false
	// held is guarded by the tserver's heartbeat lock, not ls.mu
	// (heldset.go): this runs before the deferred unlock above.
	defer func() {
		if !ok && base != nil && req.Delta && !plan.sendFull {
			base.held = nil // applied in place, not acknowledged: no base
		}
	}()
	v, err := m.heartbeatView(req, &plan)
	if err != nil {
		return nil, err
	}
	if !v.known {
		return &pb.HeartbeatResponse{Reregister: true}, nil
	}
	if m.cfg.heartbeatHook != nil {
		m.cfg.heartbeatHook(req)
	}
	resp := &pb.HeartbeatResponse{LeaseDurationMicros: m.cfg.Lease.Microseconds(), MasterHttpAddress: obs.AdvertisedHTTPAddr(m.HTTPAddr(), m.grpcAddr),
		Grants: v.grants}

	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.leases[req.Uuid]
	if l == nil || l.incarnation != req.Incarnation {
		l = newLease(req.Uuid, req.Incarnation, now)
		ls.leases[req.Uuid] = l
	}
	if l.dead {
		// Declared dead (under ls.mu, before its tablets' Unassign was even
		// read): what this heartbeat read of the metadata may predate that
		// Unassign, and the log split of its logs may be under way. A lease
		// now would let it acknowledge writes the split never reads, so it
		// gets none and must come back as a new incarnation, which drops
		// every tablet it holds.
		m.log.Warn("tserver declared dead heartbeats again; telling it to register as a new incarnation",
			"tserver", req.Uuid, "incarnation", req.Incarnation)
		return &pb.HeartbeatResponse{Reregister: true}, nil
	}
	l.last, l.heard, l.load = now, true, req.Load
	ok = true
	if plan.sendFull {
		m.log.Debug("delta heartbeat without its base; asking for a full one", "tserver", req.Uuid,
			"seq", req.Seq, "base_seq", req.BaseSeq, "acked_seq", l.ackSeq, "has_base", l.held != nil)
		l.held = nil
		resp.SendFull = true
		resp.LogSplitTasks = ls.splitTasksForLocked(req.Uuid, now) // they do not depend on the tablets held
		m.metrics.hbKinds.WithLabelValues("send_full").Inc()
		return resp, nil
	}
	ls.answerHeartbeatLocked(l, req, &plan, v, gen, now, resp)
	return resp, nil
}

// hbView is what a heartbeat's answer needs from the metadata.
type hbView struct {
	known   bool // the tserver is registered at this incarnation
	owned   []ownedTablet
	full    map[string]*pb.TabletMeta // owned tablets not held at their epoch, decoded whole
	missing map[string]bool           // held tablets that do not exist
	schemas map[string]*pb.TableSchema
	grants  *pb.GrantList
}

// heartbeatView reads what the heartbeat's plan needs, in one view.
// Briefs (meta.Reader.TabletBrief) suffice for the reconciliation; only
// owned tablets the tserver does not hold at their epoch, which may be
// (re)sent, are decoded whole.
func (m *Master) heartbeatView(req *pb.HeartbeatRequest, plan *heartbeatPlan) (*hbView, error) {
	v := &hbView{full: map[string]*pb.TabletMeta{}, missing: map[string]bool{}, schemas: map[string]*pb.TableSchema{}}
	err := m.view(func(r *meta.Reader) error {
		ts, err := r.TServer(req.Uuid)
		if err != nil || ts.Incarnation != req.Incarnation {
			return nil
		}
		v.known = true
		if v.grants, err = grantsFor(r, req.GrantsVersion); err != nil {
			return err
		}
		if plan.sendFull {
			return nil
		}
		if !plan.reconcile {
			for _, table := range plan.recon.tables {
				if v.schemas[table], err = r.Table(table); err != nil {
					return err
				}
			}
			return nil
		}
		pending := pendingSet(r) // tables being deleted: their tablets go at once
		ownedEpoch := map[string]int64{}
		for _, id := range r.TabletIDsOf(req.Uuid) {
			b, ok, err := r.TabletBrief(id)
			if err != nil {
				return err
			}
			if !ok || pending[b.Table] {
				// !ok cannot happen (the owners index and the tablet are
				// written in one transaction); a pending table's tablets
				// are not the tserver's any more.
				continue
			}
			v.owned = append(v.owned, ownedTablet{id: id, Brief: b})
			ownedEpoch[id] = b.Epoch
			if h, ok := plan.held[id]; !ok || h.epoch != b.Epoch {
				if v.full[id], err = r.Tablet(id); err != nil {
					return err
				}
			}
			if v.schemas[b.Table] == nil {
				if v.schemas[b.Table], err = r.Table(b.Table); err != nil {
					return err
				}
			}
		}
		for id, h := range plan.held {
			if ep, ok := ownedEpoch[id]; ok && ep == h.epoch {
				continue
			}
			if b, ok, err := r.TabletBrief(id); err != nil {
				return err
			} else if !ok || pending[b.Table] {
				v.missing[id] = true
			}
		}
		return nil
	})
	return v, err
}

// answerHeartbeatLocked fills the answer to a heartbeat that renewed l:
// the reconciliation's assignments and unassignments, the moves away from
// the tserver, its log split tasks, and changed cache priorities and
// schemas. ls.mu is held.
func (ls *leaderState) answerHeartbeatLocked(l *lease, req *pb.HeartbeatRequest, plan *heartbeatPlan, v *hbView, gen uint64, now time.Time, resp *pb.HeartbeatResponse) {
	l.held, l.ackSeq, l.recon = plan.held, req.Seq, plan.recon
	ls.m.metrics.hbKinds.WithLabelValues(plan.kind(req)).Inc()
	resp.AckedSeq = req.Seq
	// Sizes change only by what is reported: a delta lists the tablets
	// whose size moved (internal/hbdelta), a full heartbeat all.
	for _, rep := range req.Tablets {
		ls.sizes[rep.TabletId] = rep.SizeBytes
		ls.merge.noteReport(rep)
		ls.space[rep.TabletId] = rep.Space
	}
	if plan.reconcile {
		ls.reconcileLocked(l, v.owned, gen, v.missing)
	}
	// Held tablets that are not this tserver's at that epoch go, in every
	// reply until the tserver no longer reports them.
	resp.Unassign = append(resp.Unassign, l.recon.stray...)
	// Moves away from this tserver: tell it, then wait for a later
	// heartbeat that no longer lists the tablet.
	for id, mv := range ls.moves {
		if mv.from != req.Uuid {
			continue
		}
		h, listed := l.held[id]
		switch {
		case listed || !mv.told:
			if !listed || h.epoch == mv.epoch {
				resp.Unassign = append(resp.Unassign, &pb.TabletUnassignment{TabletId: id, Epoch: mv.epoch, Handoff: true})
			}
			mv.told = true
		default:
			// The old owner let go: it flushed the tablet, with its writes
			// fenced for the last flush only, while this heartbeat was due
			// (tserver's handoff), and serves it no more.
			ls.unavailableLocked(id, now, causeMove)
			mv.stopped = true
			ls.poke()
		}
	}
	if plan.reconcile {
		resp.Assign = ls.assignmentsLocked(l, v.owned, v.full, v.schemas, now)
	}
	resp.LogSplitTasks = ls.splitTasksForLocked(req.Uuid, now)
	for _, table := range l.recon.tables {
		p := effective(ls.prio[table])
		if sent, ok := l.sentPrio[table]; (ok || p != pb.CachePriority_CACHE_PRIORITY_MEDIUM) && sent != p {
			resp.CachePriorities = append(resp.CachePriorities, &pb.TableCachePriority{Table: table, Priority: p})
			l.sentPrio[table] = p
		}
		// Changed schemas, in case the push of the change did not reach
		// this tserver (it keeps the highest version it sees).
		if sch := v.schemas[table]; sch != nil && sch.Version > 0 && l.sentSchema[table] != sch.Version {
			resp.Schemas = append(resp.Schemas, sch)
			l.sentSchema[table] = sch.Version
		}
	}
}

// ownedTablet is a tablet the heartbeating tserver owns, by its brief.
type ownedTablet struct {
	id string
	meta.Brief
}

// deadIncarnation reports whether the leader declared this incarnation of
// the tserver dead.
func (ls *leaderState) deadIncarnation(uuid string, inc int64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.leases[uuid]
	return l != nil && l.dead && l.incarnation == inc
}

// ListTServers lists registered tservers with the leader's view of their
// leases.
func (m *Master) ListTServers(ctx context.Context, req *pb.ListTServersRequest) (*pb.ListTServersResponse, error) {
	ls, err := m.readyRead()
	if err != nil {
		return nil, err
	}
	resp := &pb.ListTServersResponse{}
	counts := map[string]int{}
	err = m.view(func(r *meta.Reader) error {
		all, err := r.TServers()
		if err != nil {
			return err
		}
		for _, ts := range all {
			counts[ts.Uuid] = len(r.TabletIDsOf(ts.Uuid))
			resp.Tservers = append(resp.Tservers, &pb.TServerInfo{Uuid: ts.Uuid, Address: ts.Address,
				Incarnation: ts.Incarnation, WalPrefix: ts.WalPrefix, TabletCount: int32(counts[ts.Uuid]), HttpAddress: ts.HttpAddress})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, info := range resp.Tservers {
		if l := ls.leases[info.Uuid]; l != nil {
			info.Live = !l.dead && !ls.expired(l, now) && l.incarnation == info.Incarnation
			if l.heard {
				info.LastHeartbeatUnixMicros = l.last.UnixMicro()
			}
		}
	}
	return resp, nil
}
