package tserver

import (
	"context"
	"fmt"
	"maps"
	"time"

	pb "bighive/proto/bighivepb"
	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/tserver/membership"
)

// maxConcurrentLoads bounds the tablet loads that open and replay at
// once. A heartbeat reply assigning 10 000 tablets used to start 10 000 of
// them at once, each ending in its own load report call, which kept the
// master so busy that the calls timed out and were retried (docs/scale.md,
// 'A tserver with 10 000 tablets'). The load report is made outside the
// slot: the reports are batched (loadReporter), one call in flight, so
// waiting for the master is no work to bound.
const maxConcurrentLoads = 64

// applyAssignments unloads the tablets the master took away and starts
// loading the newly assigned ones in the background, at most
// maxConcurrentLoads at a time. Opening a tablet happens in its load, not
// here: the heartbeat loop calls this, and opening 10 000 tablets in it
// held the next heartbeat back past the lease.
func (s *Server) applyAssignments(ctx context.Context, assign []*pb.TabletAssignment, unassign []*pb.TabletUnassignment) {
	s.assignMu.Lock() // see Server.assignMu; loads run in the background
	defer s.assignMu.Unlock()
	for _, u := range unassign {
		if r := s.tablets.get(u.TabletId); r != nil && membership.Unassigns(u, r.Epoch()) {
			if u.Handoff && r.Serving() {
				s.startHandoff(r)
			} else {
				s.unload(r, "unassigned by the master")
			}
		}
		// A load still waiting to open is cancelled too: the master takes
		// a heartbeat that no longer lists the tablet as the end of this
		// tserver's hold on it (a move's old owner let go), and a load that
		// went on would report and serve the old epoch beside the new
		// owner until the master noticed.
		if ep, ok := s.pendingLoads[u.TabletId]; ok && membership.Unassigns(u, ep) {
			s.setPending(u.TabletId, 0)
			s.log.Info("pending tablet load cancelled", "tablet", u.TabletId, "epoch", ep, "why", "unassigned by the master")
		}
	}
	for _, a := range assign {
		m := a.GetTablet()
		if m == nil {
			continue
		}
		if s.pendingLoads[m.TabletId] >= m.Epoch {
			continue // sent again while its load waits for a slot
		}
		if r := s.tablets.get(m.TabletId); r != nil {
			if r.Epoch() >= m.Epoch {
				continue // loaded or loading at this epoch already
			}
			// The old epoch stops now, not when the new one's load starts.
			s.unload(r, fmt.Sprintf("reassigned at epoch %d", m.Epoch))
		}
		s.setPending(m.TabletId, m.Epoch)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			r, rec := s.replayInSlot(ctx, a)
			if r == nil {
				return
			}
			if err := s.reportAndServe(ctx, r, a.Tablet, rec); err != nil && ctx.Err() == nil {
				s.log.Error("tablet load failed", "tablet", r.ID(), "epoch", r.Epoch(), "err", err)
			}
		}()
	}
}

// openAssigned opens an assigned tablet and registers it, unless its
// load is no longer pending at this epoch (the master unassigned it, or
// assigned a later epoch, while it waited for its slot) or a replica at
// this epoch or a later one is registered already; it replaces a replica
// of an older epoch. Under assignMu, as applyAssignments: a tablet the
// master unassigns meanwhile is cancelled before it opens, unloaded by it
// after, or, if its owner or epoch changed, refused by the master at its
// load report and unloaded, never served. The load stays pending until
// the replica is registered, so every heartbeat lists it (reports).
func (s *Server) openAssigned(a *pb.TabletAssignment) *rp.Replica {
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	m := a.Tablet
	if s.pendingLoads[m.TabletId] != m.Epoch {
		return nil // cancelled or superseded
	}
	defer s.clearPending(m)
	if r := s.tablets.get(m.TabletId); r != nil {
		if r.Epoch() >= m.Epoch {
			return nil
		}
		s.unload(r, fmt.Sprintf("reassigned at epoch %d", m.Epoch))
	}
	r, err := s.open(a)
	if err != nil {
		s.log.Error("tablet open failed", "tablet", m.TabletId, "epoch", m.Epoch, "err", err)
		return nil
	}
	s.tablets.put(r)
	s.refreshSchema(r)
	return r
}

// clearPending forgets the waiting load of m's epoch (a later epoch's
// stays). Under assignMu.
func (s *Server) clearPending(m *pb.TabletMeta) {
	if s.pendingLoads[m.TabletId] == m.Epoch {
		s.setPending(m.TabletId, 0)
	}
}

// setPending records a pending load of id at epoch (0: none). Under
// assignMu.
func (s *Server) setPending(id string, epoch int64) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	if epoch == 0 {
		delete(s.pendingLoads, id)
	} else {
		s.pendingLoads[id] = epoch
	}
}

// pendingSnapshot copies the pending loads (for the heartbeat).
func (s *Server) pendingSnapshot() map[string]int64 {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	return maps.Clone(s.pendingLoads)
}

// open opens an assigned tablet over its TSFiles (their footers only);
// it does not serve until recover returns.
func (s *Server) open(a *pb.TabletAssignment) (*rp.Replica, error) {
	m := a.Tablet
	files := make([]tablet.FileRef, 0, len(m.Tsfiles))
	for _, f := range m.Tsfiles {
		ref := footerOf(f, s.uuid)
		store, release, err := s.openStoreFor(ref)
		if err != nil {
			for _, f := range files {
				f.Release()
			}
			return nil, err
		}
		// The tablet releases the store when it stops reading the file
		// (unload, or a compaction replaced it): a read-only store closes
		// with its last reader.
		files = append(files, tablet.FileRef{Footer: ref, Store: store, Release: release})
	}
	t, err := tablet.Open(tablet.Options{
		ID: m.TabletId, Schema: s.schemaFor(a.Schema), Store: s.blocks, StoreUUID: s.uuid, Files: files,
		Cache: s.cache, CacheOwner: s.eng.owner(m.Table, a.CachePriority), Logger: s.log,
	})
	if err != nil { // Open released every file
		return nil, fmt.Errorf("tserver: open tablet %s: %w", m.TabletId, err)
	}
	r := rp.New(rp.Options{
		ID: m.TabletId, Table: m.Table, Start: m.GetRange().GetStartRow(), End: m.GetRange().GetEndRow(), Epoch: m.Epoch,
		Tablet: t, Log: s.wal, Admit: s.eng.coord,
		Lease: s.leaseValid, Throttle: s.admitWrite(m.TabletId), LogFailed: s.logFailed,
		Server: s.addr,
	})
	return r, nil
}

// replayed is what a load's replay did, for its log line.
type replayed struct {
	began, ended   time.Time // the replay's
	files, records int
}

// replayInSlot opens an assigned tablet and replays its logs in one of
// the load slots; nil if it was not opened (loaded already, failed, or ctx
// ended) or its replay failed (it is unloaded then).
func (s *Server) replayInSlot(ctx context.Context, a *pb.TabletAssignment) (*rp.Replica, replayed) {
	select {
	case s.loadSlots <- struct{}{}:
		defer func() { <-s.loadSlots }()
	case <-ctx.Done():
		s.assignMu.Lock()
		s.clearPending(a.Tablet)
		s.assignMu.Unlock()
		return nil, replayed{}
	}
	r := s.openAssigned(a)
	if r == nil {
		return nil, replayed{}
	}
	rec, err := s.replay(ctx, r, a.Tablet)
	if err != nil {
		s.failLoad(r, err)
		if ctx.Err() == nil {
			s.log.Error("tablet load failed", "tablet", r.ID(), "epoch", r.Epoch(), "err", err)
		}
		return nil, rec
	}
	return r, rec
}

// replay replays a tablet's logs: its recovery files, every listed log
// position, and a split child's logs.
func (s *Server) replay(ctx context.Context, r *rp.Replica, m *pb.TabletMeta) (replayed, error) {
	rec := replayed{began: time.Now()}
	if err := s.replayRecoveryFiles(ctx, r, m); err != nil {
		return rec, err
	}
	positions := positionsFromPB(m.LogPositions)
	rep, err := checkpoint.RecoverTablet(ctx, r, positions, s.fs, s.opts.Root)
	for _, f := range rep.Files {
		s.metrics.onRecoveryRead(readLogReplay, f.Size)
	}
	rec.files, rec.records = len(rep.Files), rep.Records
	if err != nil {
		return rec, fmt.Errorf("tserver: replay tablet %s: %w", r.ID(), err)
	}
	// A split child: the writes made while its parent split (split.go).
	err = s.replayChildLogs(r, m.ChildLogs)
	rec.ended = time.Now()
	return rec, err
}

// reportAndServe records this tserver's log position in a replayed
// tablet's metadata and only then serves it (docs/design.md 'Log
// positions'; invariant 9 there, 'metadata names every log a tablet
// needs'). The report goes with the other loads that finish meanwhile
// (loadReporter); a refusal of this tablet's load unloads it alone.
func (s *Server) reportAndServe(ctx context.Context, r *rp.Replica, m *pb.TabletMeta, rec replayed) error {
	// Before the first write: our own position joins the tablet's list.
	pos := s.wal.Position()
	err := s.loadReports.report(ctx, &pb.TabletLoadReport{
		TabletId: r.ID(), Epoch: r.Epoch(),
		Position: &pb.LogPosition{Prefix: pos.Prefix, FileTimestamp: pos.FileTS},
	})
	if err != nil {
		s.failLoad(r, err)
		return fmt.Errorf("tserver: report load of tablet %s: %w", r.ID(), err)
	}
	if !r.Serve() {
		return fmt.Errorf("tserver: tablet %s was unloaded during its load report: %w", r.ID(), rp.ErrNotServing)
	}
	since(s.metrics.recoveries, rec.began)
	s.log.Info("tablet serving", "tablet", r.ID(), "epoch", r.Epoch(), "tsfiles", len(m.Tsfiles),
		"log_files", rec.files, "records", rec.records, "took", time.Since(rec.began), "replay", rec.ended.Sub(rec.began))
	s.member.Nudge()
	return nil
}

// footerOf names a TSFile of the metadata by its store and footer. The
// metadata always names the store; an empty name is read as this
// tserver's own store (own is its UUID), as the store lookup always did.
func footerOf(f *pb.TSFileRef, own string) blockstore.BlockRef {
	store := f.BlockStoreUuid
	if store == "" {
		store = own
	}
	return blockstore.BlockRef{Store: store, ID: blockstore.BlockID(f.FooterBlock)}
}

// openStoreFor acquires the block store holding a TSFile (see
// stores.acquire; the caller calls release when it stops reading the
// file) and checks that it holds the file's footer. A read-only store
// reloads its view of the owner's directories itself when a block the file
// names is not in it: at this footer, and at every block read later.
func (s *Server) openStoreFor(footer blockstore.BlockRef) (blockstore.Manager, func(), error) {
	store, release, err := s.stores.acquire(footer.Store)
	if err != nil {
		return nil, nil, err
	}
	b, err := store.OpenBlock(footer.ID)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("tserver: TSFile footer %s: %w", footer, err)
	}
	b.Close()
	return store, release, nil
}

func (s *Server) failLoad(r *rp.Replica, err error) {
	s.metrics.recoveryFailed.Inc()
	s.unload(r, "load failed: "+err.Error())
}

// unload stops serving r, waits for its in-flight writes and drops it.
// Its unflushed writes stay in the log, which its metadata names, so the
// next owner replays them.
func (s *Server) unload(r *rp.Replica, why string) {
	if !r.Stop() { // in-flight writes finish; new ones see it not serving
		return
	}
	s.tablets.remove(r)
	r.Close()
	s.log.Info("tablet unloaded", "tablet", r.ID(), "epoch", r.Epoch(), "why", why)
	s.member.Nudge()
}

// reports describes the tablets held here for the heartbeat: the
// registered ones, and the loads still waiting to open (not serving, no
// size), which this tserver may yet serve at their epoch. The pending
// loads are read first: a load leaves them only after its tablet is
// registered, so none falls between the two reads.
func (s *Server) reports() []*pb.TabletReport {
	pending := s.pendingSnapshot()
	all := s.tablets.all()
	out := make([]*pb.TabletReport, 0, len(all)+len(pending))
	for _, r := range all {
		delete(pending, r.ID())
	}
	for id, ep := range pending {
		out = append(out, &pb.TabletReport{TabletId: id, Epoch: ep})
	}
	for _, r := range all {
		files := r.Files()
		space := tabletSpace(files, r.EstimateGarbage)
		mem := r.MemoryUsage()
		out = append(out, &pb.TabletReport{TabletId: r.ID(), Epoch: r.Epoch(), SizeBytes: space.FileBytes + mem, MemstoreBytes: mem,
			Serving: r.Serving(), Space: space})
	}
	return out
}

func (s *Server) loadReport() *pb.TServerLoad {
	return &pb.TServerLoad{MemstoreBytes: s.eng.coord.MemoryUsage()}
}
