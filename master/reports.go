package master

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// ReportTabletLoad appends the loader's log position to the tablet's list
// and marks it SERVING, if the reporter owns it at that epoch. It is a
// ReportTabletLoads of one load; its refusal is the call's error.
func (m *Master) ReportTabletLoad(ctx context.Context, req *pb.ReportTabletLoadRequest) (*pb.ReportTabletLoadResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if req.TabletId == "" || req.TserverUuid == "" {
		return nil, apierr.InvalidArgument("load report needs tablet_id and tserver_uuid")
	}
	res, err := ls.applyLoads(ctx, req.TserverUuid, []*pb.TabletLoadReport{{TabletId: req.TabletId, Epoch: req.Epoch, Position: req.Position}})
	if err != nil {
		return nil, err
	}
	if err := res.Statuses[0]; err != nil {
		return nil, err
	}
	return &pb.ReportTabletLoadResponse{Tablet: res.Tablets[0]}, nil
}

// ReportTabletLoads applies the loads of one tserver as one raft command
// (at most limits.MaxTabletLoads); each load is accepted or refused on its
// own, as ReportTabletLoad would (stale epoch or another owner:
// FailedPrecondition; no such tablet: NotFound). A malformed request is
// refused whole.
func (m *Master) ReportTabletLoads(ctx context.Context, req *pb.ReportTabletLoadsRequest) (*pb.ReportTabletLoadsResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if req.TserverUuid == "" {
		return nil, apierr.InvalidArgument("load reports need tserver_uuid")
	}
	if n := len(req.Loads); n == 0 || n > limits.MaxTabletLoads {
		return nil, apierr.InvalidArgument("load reports name %d loads; give 1 to %d", n, limits.MaxTabletLoads)
	}
	for i, l := range req.Loads {
		if l.GetTabletId() == "" {
			return nil, apierr.InvalidArgument("load report %d of %d needs tablet_id", i, len(req.Loads))
		}
		if err := meta.ValidPosition(l.Position); err != nil {
			return nil, apierr.Wrap(codes.InvalidArgument, err, "load report %d of %d (tablet %s)", i, len(req.Loads), l.TabletId)
		}
	}
	res, err := ls.applyLoads(ctx, req.TserverUuid, req.Loads)
	if err != nil {
		return nil, err
	}
	resp := &pb.ReportTabletLoadsResponse{Results: make([]*pb.TabletLoadResult, len(req.Loads))}
	for i, e := range res.Statuses {
		resp.Results[i] = &pb.TabletLoadResult{Status: apierr.RowStatus(e), Tablet: res.Tablets[i]}
	}
	return resp, nil
}

// applyLoads proposes one TabletLoads command of tserver's loads; the
// result has a tablet or a refusal per load, in order. An accepted load
// ends its tablet's unavailability (unavail.go).
func (ls *leaderState) applyLoads(ctx context.Context, tserver string, loads []*pb.TabletLoadReport) (*meta.Result, error) {
	c := &spb.MetaTabletLoads{Loads: make([]*spb.MetaTabletLoad, len(loads))}
	for i, l := range loads {
		c.Loads[i] = &spb.MetaTabletLoad{TabletId: l.TabletId, Epoch: l.Epoch, TserverUuid: tserver, Position: l.Position}
	}
	res, err := ls.m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_TabletLoads{TabletLoads: c}})
	if err != nil {
		return nil, err
	}
	var served []string
	for i, l := range loads {
		if i < len(res.Statuses) && res.Statuses[i] == nil {
			served = append(served, l.TabletId)
		}
	}
	ls.servingAgain(served, time.Now())
	return res, nil
}

// ReportCheckpoint applies a burst of checkpoint reports as one command;
// each report is accepted or refused on its own (stale epoch:
// FailedPrecondition).
func (m *Master) ReportCheckpoint(ctx context.Context, req *pb.ReportCheckpointRequest) (*pb.ReportCheckpointResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if req.TserverUuid == "" {
		return nil, apierr.InvalidArgument("checkpoint report needs tserver_uuid")
	}
	resp := &pb.ReportCheckpointResponse{}
	if len(req.Reports) == 0 {
		return resp, nil
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_Checkpoint{Checkpoint: &spb.MetaCheckpoint{
		TserverUuid: req.TserverUuid, Reports: req.Reports}}})
	if err != nil {
		return nil, err
	}
	for _, e := range res.Statuses {
		st := &pb.RowStatus{Code: int32(codeOf(e))}
		if e != nil {
			st.Message = e.Error()
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}

// AllocateTabletIds reserves fresh tablet ids (split step 2).
func (m *Master) AllocateTabletIds(ctx context.Context, req *pb.AllocateTabletIdsRequest) (*pb.AllocateTabletIdsResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if req.Count == 0 || req.Count > meta.MaxAllocateIDs {
		return nil, apierr.InvalidArgument("allocate %d tablet ids: ask for 1 to %d", req.Count, meta.MaxAllocateIDs)
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_AllocateIds{AllocateIds: &spb.MetaAllocateIds{Count: req.Count}}})
	if err != nil {
		return nil, err
	}
	return &pb.AllocateTabletIdsResponse{TabletIds: res.IDs}, nil
}

// ReportSplit replaces the parent by its children in one command (split
// step 6). The children stay with the reporting tserver (ASSIGNED, epoch
// 1), so no data moves.
func (m *Master) ReportSplit(ctx context.Context, req *pb.ReportSplitRequest) (*pb.ReportSplitResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if req.ParentTabletId == "" || req.TserverUuid == "" {
		return nil, apierr.InvalidArgument("split report needs parent_tablet_id and tserver_uuid")
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_Split{Split: &spb.MetaSplit{
		ParentTabletId: req.ParentTabletId, ParentEpoch: req.ParentEpoch, TserverUuid: req.TserverUuid, Children: req.Children}}})
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	delete(ls.moves, req.ParentTabletId)
	delete(ls.sizes, req.ParentTabletId)
	delete(ls.space, req.ParentTabletId)
	if l := ls.leases[req.TserverUuid]; l != nil {
		// The tserver serves the children already; no assignment to send
		// before it reports them.
		for _, c := range res.Tablets {
			l.sentAssign[c.TabletId] = time.Now()
		}
	}
	ls.mu.Unlock()
	ls.poke()
	m.log.Info("tablet split", "parent", req.ParentTabletId, "children", len(res.Tablets))
	m.events.add("split", "tablet %s split into %d children", req.ParentTabletId, len(res.Tablets))
	return &pb.ReportSplitResponse{Children: res.Tablets}, nil
}

// SplitTablet asks the tserver serving the tablet that holds split_row to
// split it there.
func (m *Master) SplitTablet(ctx context.Context, req *pb.SplitTabletRequest) (*pb.SplitTabletResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if err := limits.ValidateRowKey(req.SplitRow); err != nil {
		return nil, err
	}
	var t *pb.TabletMeta
	var addr string
	err := m.view(func(r *meta.Reader) error {
		if _, err := r.Table(req.Table); err != nil {
			return err
		}
		ts, err := r.TableTablets(req.Table, req.SplitRow, 1)
		if err != nil || len(ts) == 0 {
			return err
		}
		t = ts[0]
		if t.State == pb.TabletState_TABLET_STATE_SERVING {
			if s, err := r.TServer(t.TserverUuid); err == nil {
				addr = s.Address
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, apierr.NotFound("table %q has no tablets", req.Table)
	}
	if string(t.Range.GetStartRow()) == string(req.SplitRow) {
		return nil, apierr.FailedPrecondition("row %q already starts tablet %s", req.SplitRow, t.TabletId)
	}
	if addr == "" {
		return nil, apierr.Unavailable("tablet %s is not serving now (state %s); retry when it is", t.TabletId, t.State)
	}
	conn, err := grpc.NewClient(addr, limits.GRPCDialOptions(tlsconf.Credentials(m.cfg.TLS))...)
	if err != nil {
		return nil, apierr.Wrap(codes.Unavailable, err, "dial tserver %s", addr)
	}
	defer conn.Close()
	if _, err := pb.NewTServerClient(conn).Split(ctx, &pb.SplitRequest{TabletId: t.TabletId, SplitRow: req.SplitRow}); err != nil {
		return nil, err
	}
	return &pb.SplitTabletResponse{}, nil
}

// GetGCReferences answers which blocks of a block store and which log
// positions of a prefix any tablet still names (leader read).
func (m *Master) GetGCReferences(ctx context.Context, req *pb.GetGCReferencesRequest) (*pb.GetGCReferencesResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	if req.BlockStoreUuid == "" && req.WalPrefix == "" {
		return nil, apierr.InvalidArgument("name a block_store_uuid, a wal_prefix or both")
	}
	resp := &pb.GetGCReferencesResponse{}
	err := m.view(func(r *meta.Reader) (err error) {
		resp.Blocks, resp.LogPositions, err = r.GCReferences(req.BlockStoreUuid, req.WalPrefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
