package tserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/tablet/blockcache"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// engineState is the storage side of the tserver: the checkpoint
// coordinator over the served tablets, and the cache owners of tables.
type engineState struct {
	s     *Server
	coord *checkpoint.Coordinator
	wg    sync.WaitGroup

	mu     sync.Mutex
	owners map[string]*blockcache.Owner // by table
}

func newEngineState(s *Server) *engineState {
	e := &engineState{s: s, owners: map[string]*blockcache.Owner{}}
	e.coord = checkpoint.New(checkpoint.Options{
		Log:      s.wal,
		Meta:     masterMeta{s},
		MemLimit: s.opts.MemLimit,
		Tablets:  s.servingEngines,
		Blocks:   s.blocks,
		Store:    s.uuid,
		Refs:     masterRefs{s},
		LogGC:    s.wal,
		Logger:   s.log,
		Lease:    s.leaseValid,

		OnCheckpoint:   s.metrics.onCheckpoint,
		OnCompaction:   s.metrics.onCompaction,
		MajorEvery:     s.opts.CompactionMajorEvery,
		MaxTSFiles:     s.opts.CompactionMaxFiles,
		MergeWidth:     s.opts.CompactionMergeWidth,
		CompactionRate: s.opts.CompactionRate,
		GarbageShare:   s.opts.CompactionGarbageShare,
		CompactionDuty: s.opts.CompactionDuty,
		BacklogFiles:   s.opts.CompactionBacklogFiles,
		StopFiles:      s.opts.CompactionStopFiles,
		MaxWriteDelay:  s.opts.CompactionMaxWriteDelay,
		OrphanEvery:    s.opts.OrphanEvery,
		OrphanGrace:    s.opts.OrphanGrace,
	})
	return e
}

func (e *engineState) start(ctx context.Context) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.coord.Run(ctx)
	}()
}

func (e *engineState) stop() { e.wg.Wait() }

// owner returns the cache owner of a table, creating it at priority p.
func (e *engineState) owner(table string, p pb.CachePriority) *blockcache.Owner {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.owners[table]
	if !ok {
		o = e.s.cache.NewOwner(table, priorityOf(p))
		e.owners[table] = o
	}
	return o
}

func (s *Server) setCachePriority(table string, p pb.CachePriority) {
	s.eng.owner(table, p).SetPriority(priorityOf(p))
}

// servingEngines lists the engines the checkpoint may touch: the serving
// ones only (a tablet still replaying must not be swapped).
func (s *Server) servingEngines() []checkpoint.Tablet {
	all := s.tablets.all()
	out := make([]checkpoint.Tablet, 0, len(all))
	for _, r := range all {
		if r.Serving() {
			out = append(out, r)
		}
	}
	return out
}

// tsfileRefs converts a tablet's TSFile list for the master, naming the
// block store of each file (its blocks' IDs mean something only there).
func (s *Server) tsfileRefs(files []tsfile.Info) []*pb.TSFileRef {
	out := make([]*pb.TSFileRef, 0, len(files))
	for _, f := range files {
		ref := &pb.TSFileRef{
			BlockStoreUuid:     s.storeName(f.Store),
			FooterBlock:        uint64(f.Footer),
			SizeBytes:          f.Size,
			FirstRow:           f.MinRow,
			LastRow:            f.MaxRow,
			CellCount:          f.Entries,
			MaxTimestampMicros: f.MaxTimestamp,
		}
		for _, b := range f.Blocks {
			ref.Blocks = append(ref.Blocks, uint64(b))
		}
		out = append(out, ref)
	}
	return out
}

// storeName is the block store a file names for the master: its own, or
// this tserver's when it names none (only this tserver's store is written
// here).
func (s *Server) storeName(store string) string {
	if store == "" {
		return s.uuid
	}
	return store
}

func positionsToPB(ps []wal.Position) []*pb.LogPosition {
	out := make([]*pb.LogPosition, len(ps))
	for i, p := range ps {
		out[i] = &pb.LogPosition{Prefix: p.Prefix, FileTimestamp: p.FileTS}
	}
	return out
}

func positionsFromPB(ps []*pb.LogPosition) []wal.Position {
	out := make([]wal.Position, len(ps))
	for i, p := range ps {
		out[i] = wal.Position{Prefix: p.Prefix, FileTS: p.FileTimestamp}
	}
	return out
}

// masterMeta is the checkpoint's Metadata seam backed by the master: one
// ReportCheckpoint (one raft command) for every tablet of a checkpoint.
// It is the tserver's side of the fencing rule (docs/design.md
// 'Fencing'): nothing is sent without a valid lease, and the call ends
// when the lease does; an update of a tablet not registered here, or
// whose load is not the registered one, is refused, not skipped; every
// report is a compare-and-swap of the file list (fence_files).
type masterMeta struct{ s *Server }

func (m masterMeta) Commit(ctx context.Context, updates []checkpoint.Update) error {
	now := time.Now()
	if !m.s.leaseValid() {
		return checkpoint.ErrNoLease
	}
	// Past the lease the master may give the tablets to another tserver:
	// a report still in flight then is abandoned, its outcome unknown.
	ctx, cancel := context.WithTimeout(ctx, m.s.lease.Remaining(now))
	defer cancel()
	req := &pb.ReportCheckpointRequest{TserverUuid: m.s.uuid}
	refused := map[string]error{}
	for _, u := range updates {
		r := m.s.tablets.get(u.TabletID)
		switch {
		case r == nil:
			refused[u.TabletID] = fmt.Errorf("tablet %s is not registered on this tserver: %w", u.TabletID, checkpoint.ErrUnknownTablet)
			continue
		case u.Load != nil && u.Load != checkpoint.Tablet(r):
			refused[u.TabletID] = fmt.Errorf("tablet %s is served by another load: %w", u.TabletID, checkpoint.ErrLoadEnded)
			continue
		}
		rep := &pb.CheckpointReport{TabletId: u.TabletID, Epoch: u.Epoch, Tsfiles: m.s.tsfileRefs(u.TSFiles), FenceFiles: true}
		for _, ref := range u.Replaced {
			rep.Replaced = append(rep.Replaced, &pb.TSFileRef{BlockStoreUuid: m.s.storeName(ref.Store), FooterBlock: uint64(ref.ID)})
		}
		switch {
		case u.LogClean: // a handoff's flush: no log to replay
			rep.LogClean = true
		case u.LogPositions != nil: // nil: a compaction, the list stays
			rep.LogPositions = positionsToPB(u.LogPositions)
		}
		req.Reports = append(req.Reports, rep)
	}
	if len(refused) > 0 {
		// The batch is all or nothing for the caller: send none of it.
		return &checkpoint.RefusedError{Tablets: refused}
	}
	var resp *pb.ReportCheckpointResponse
	err := m.s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) (err error) {
		resp, err = mc.ReportCheckpoint(ctx, req)
		return err
	})
	if err != nil {
		return fmt.Errorf("tserver: report checkpoint: %w", err)
	}
	if n := len(resp.GetStatuses()); n != len(req.Reports) {
		return fmt.Errorf("tserver: report checkpoint: %d statuses for %d reports; outcome unknown", n, len(req.Reports))
	}
	for i, st := range resp.GetStatuses() {
		code := codes.Code(st.Code)
		if code == codes.OK {
			continue
		}
		id := req.Reports[i].TabletId
		var cause error
		switch code {
		case codes.FailedPrecondition:
			cause = checkpoint.ErrStaleEpoch
		case codes.NotFound:
			cause = checkpoint.ErrUnknownTablet
		case codes.Aborted:
			cause = checkpoint.ErrFilesChanged
		default:
			cause = apierr.FromRowStatus(st)
		}
		refused[id] = fmt.Errorf("tablet %s: %s: %w", id, st.Message, cause)
	}
	if len(refused) > 0 {
		return &checkpoint.RefusedError{Tablets: refused}
	}
	return nil
}

// masterRefs answers garbage collection from the master, which knows every
// tablet's metadata, including tablets that moved away from here.
type masterRefs struct{ s *Server }

func (m masterRefs) refs(ctx context.Context) (*pb.GetGCReferencesResponse, error) {
	var resp *pb.GetGCReferencesResponse
	err := m.s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) (err error) {
		resp, err = mc.GetGCReferences(ctx, &pb.GetGCReferencesRequest{BlockStoreUuid: m.s.uuid, WalPrefix: m.s.prefix})
		return err
	})
	return resp, err
}

func (m masterRefs) LogPositions(ctx context.Context, prefix string) ([]wal.Position, error) {
	resp, err := m.refs(ctx)
	if err != nil {
		return nil, err
	}
	ps := positionsFromPB(resp.LogPositions)
	// Tablets loading here have reported our position already; tablets
	// whose metadata this tserver has not yet committed keep the current
	// file, which the log never deletes.
	return ps, nil
}

// SharedFiles asks the master which of this store's TSFiles a backup names
// or once named (checkpoint.SharedFiles): a compaction leaves those to the
// orphan pass.
func (m masterRefs) SharedFiles(ctx context.Context, footers []blockstore.BlockID) (map[blockstore.BlockID]bool, error) {
	req := &pb.SharedTSFilesRequest{BlockStoreUuid: m.s.uuid, FooterBlocks: make([]uint64, len(footers))}
	for i, f := range footers {
		req.FooterBlocks[i] = uint64(f)
	}
	var resp *pb.SharedTSFilesResponse
	err := m.s.master.Call(ctx, func(ctx context.Context, mc pb.MasterClient) (err error) {
		resp, err = mc.SharedTSFiles(ctx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tserver: shared TSFiles: %w", err)
	}
	out := make(map[blockstore.BlockID]bool, len(resp.FooterBlocks))
	for _, f := range resp.FooterBlocks {
		out[blockstore.BlockID(f)] = true
	}
	return out, nil
}

// ReferencedBlocks returns the blocks of this tserver's store that any
// tablet's metadata names (the master answers for our store UUID only), and
// every block of the read sets here, of any store.
func (m masterRefs) ReferencedBlocks(ctx context.Context) (map[blockstore.BlockRef]struct{}, error) {
	resp, err := m.refs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[blockstore.BlockRef]struct{}, len(resp.Blocks))
	for _, b := range resp.Blocks {
		out[blockstore.BlockRef{Store: m.s.uuid, ID: blockstore.BlockID(b)}] = struct{}{}
	}
	// Blocks of files in the tablets' read sets here count too: a flush
	// whose step 7 has not committed yet is not an orphan.
	for _, r := range m.s.tablets.all() {
		for _, f := range r.Files() {
			for _, b := range f.BlockRefs() {
				out[b] = struct{}{}
			}
		}
	}
	// So do the files a backup import wrote here lately: their backup names
	// them one master call after.
	m.s.imports.addTo(out, m.s.uuid, time.Now())
	return out, nil
}
