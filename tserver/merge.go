package tserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/storage/merge"
	rp "bighive/storage/replica"
)

// reportMergeTimeout bounds a merge's report; past it the outcome is unknown.
const reportMergeTimeout = 30 * time.Second

// Merge is the admin RPC the master's MergeTablets forwards: merge two
// adjacent tablets served here (package merge). Both are claimed from the
// splitter, so neither splits or merges twice at once.
func (s *Server) Merge(ctx context.Context, req *pb.MergeRequest) (*pb.MergeResponse, error) {
	if req.LeftTabletId == "" || req.RightTabletId == "" || req.LeftTabletId == req.RightTabletId {
		return nil, apierr.InvalidArgument("merge needs two different tablets, left_tablet_id and right_tablet_id")
	}
	left, err := s.serving(req.LeftTabletId, 0)
	if err != nil {
		return nil, err
	}
	right, err := s.serving(req.RightTabletId, 0)
	if err != nil {
		return nil, err
	}
	for _, r := range []*rp.Replica{left, right} {
		if !r.Serving() {
			return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, r.ID(), r.Epoch(), "tablet %s is not serving on %s", r.ID(), s.addr)
		}
	}
	sp := s.split
	// Refusals before the merge begins are ResourceExhausted (busy) or
	// carry a TabletError (not serving): the master tells them from a
	// merge whose outcome it does not know.
	if !sp.claim(left.ID(), true) {
		return nil, apierr.ResourceExhausted("tablet %s is splitting or merging already; retry later", left.ID())
	}
	if !sp.claim(right.ID(), true) {
		sp.release(left.ID())
		return nil, apierr.ResourceExhausted("tablet %s is splitting or merging already; retry later", right.ID())
	}
	defer sp.release(left.ID())
	defer sp.release(right.ID())
	res, err := s.runMerge(s.ctx, left, right)
	switch {
	case err == nil:
		return &pb.MergeResponse{MergedTabletId: res.Report.MergedID}, nil
	case errors.Is(err, merge.ErrNotAdjacent):
		return nil, apierr.Wrap(codes.InvalidArgument, err, "merge %s+%s", left.ID(), right.ID())
	case errors.Is(err, merge.ErrRefused):
		return nil, apierr.Wrap(codes.FailedPrecondition, err, "merge %s+%s", left.ID(), right.ID())
	case errors.Is(err, merge.ErrBusy):
		return nil, apierr.Wrap(codes.ResourceExhausted, err, "tserver %s: merge %s+%s", s.addr, left.ID(), right.ID())
	case errors.Is(err, merge.ErrOutcomeUnknown):
		return nil, apierr.Wrap(codes.Aborted, err, "tserver %s: merge %s+%s may have committed; both unloaded here, the master's metadata decides", s.addr, left.ID(), right.ID())
	}
	return nil, apierr.Wrap(codes.Aborted, err, "tserver %s: merge %s+%s failed; nothing changed", s.addr, left.ID(), right.ID())
}

// runMerge merges left and right. On success both are unloaded and the
// merged tablet is loading here; when the outcome is unknown both are
// unloaded.
func (s *Server) runMerge(ctx context.Context, left, right *rp.Replica) (*merge.Result, error) {
	var committed *pb.TabletMeta
	opts := merge.Options{
		Blocks: s.blocks, Store: s.uuid, Exclusive: s.eng.coord.Exclusive, BeginSplit: s.eng.coord.BeginSplit,
		Checkpoint: s.checkpointFirst,
		Master:     mergeMaster{s: s, committed: &committed, left: left, right: right},
		Hook:       s.opts.MergeHook,
		Logger:     s.log,
	}
	parent := func(r *rp.Replica) merge.Parent {
		p := merge.Parent{ID: r.ID(), Epoch: r.Epoch(), Start: r.Start(), End: r.End(), Tablet: r, Route: r.Route}
		if len(p.End) == 0 {
			p.End = nil
		}
		return p
	}
	res, err := merge.Run(ctx, opts, parent(left), parent(right))
	if errors.Is(err, merge.ErrOutcomeUnknown) {
		s.unload(left, "merge outcome unknown")
		s.unload(right, "merge outcome unknown")
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	schema := s.schemaToPB(left)
	why := fmt.Sprintf("merged into %s", res.Report.MergedID)
	s.unload(left, why)
	s.unload(right, why)
	s.applyAssignments(s.ctx, []*pb.TabletAssignment{{Tablet: committed, Schema: schema}}, nil)
	return res, nil
}

// mergeMaster is merge.Master over the master's RPCs.
type mergeMaster struct {
	s           *Server
	committed   **pb.TabletMeta
	left, right *rp.Replica // the loads the merge was computed for
}

func (m mergeMaster) AllocateTabletIDs(ctx context.Context, n int) ([]string, error) {
	return splitMaster{s: m.s}.AllocateTabletIDs(ctx, n)
}

func (m mergeMaster) ReportMerge(ctx context.Context, rep merge.Report) error {
	req := &pb.ReportMergeRequest{
		LeftTabletId: rep.Left.ID, LeftEpoch: rep.Left.Epoch, RightTabletId: rep.Right.ID, RightEpoch: rep.Right.Epoch,
		TserverUuid: m.s.uuid, MergedTabletId: rep.MergedID, Tsfiles: m.s.tsfileRefs(rep.Flushed),
	}
	ctx, cancel := context.WithTimeout(ctx, reportMergeTimeout)
	defer cancel()
	return m.s.report(ctx, merge.ErrRefused, []*rp.Replica{m.left, m.right}, func(ctx context.Context, mc pb.MasterClient) error {
		resp, err := mc.ReportMerge(ctx, req)
		if err == nil {
			*m.committed = resp.Merged
		}
		return err
	})
}
