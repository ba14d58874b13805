package meta

import (
	"bytes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// merge replaces two adjacent tablets by one (docs/design.md 'Merge'). Both
// parents must be owned by the reporting tserver at the reported epochs;
// the merged tablet takes the union of their ranges, ASSIGNED to that
// tserver at epoch 1, and the TSFile list: the report's flushed files
// first, then the left parent's and the right parent's lists as this
// metadata holds them (a compaction that committed during the merge is
// included; its replaced files are not). The parents' log positions,
// child logs and recovery files are not carried over: the report's files
// hold everything the parents' buffers held when they were fenced.
func (w *writer) merge(c *spb.MetaMerge) (*Result, error) {
	r := c.GetReport()
	if r.GetLeftTabletId() == "" || r.RightTabletId == "" || r.MergedTabletId == "" || r.TserverUuid == "" {
		return nil, apierr.InvalidArgument("merge report needs left_tablet_id, right_tablet_id, merged_tablet_id and tserver_uuid")
	}
	if r.LeftTabletId == r.RightTabletId {
		return nil, apierr.InvalidArgument("merge of tablet %s with itself", r.LeftTabletId)
	}
	left, err := w.Tablet(r.LeftTabletId)
	if err != nil {
		// A retried report whose first attempt committed: answer the same.
		if t, ok := w.mergeDone(r); ok {
			return &Result{Tablets: []*pb.TabletMeta{t}}, nil
		}
		return nil, err
	}
	if _, err := w.owned(left.TabletId, r.LeftEpoch, r.TserverUuid); err != nil {
		return nil, err
	}
	right, err := w.owned(r.RightTabletId, r.RightEpoch, r.TserverUuid)
	if err != nil {
		return nil, err
	}
	if left.Table != right.Table {
		return nil, apierr.InvalidArgument("merge: tablet %s is of table %q, tablet %s of table %q", left.TabletId, left.Table, right.TabletId, right.Table)
	}
	if le := left.Range.GetEndRow(); len(le) == 0 || !bytes.Equal(le, right.Range.GetStartRow()) {
		return nil, apierr.InvalidArgument("merge: tablet %s ends at %q, tablet %s starts at %q: not adjacent", left.TabletId, le, right.TabletId, right.Range.GetStartRow())
	}
	n, err := ParseTabletID(r.MergedTabletId)
	if err != nil || n >= w.NextTabletID() || n == 0 {
		return nil, apierr.InvalidArgument("merge: tablet id %q was not allocated by AllocateTabletIds", r.MergedTabletId)
	}
	if w.tx.Bucket(bucketTablets).Get([]byte(r.MergedTabletId)) != nil {
		return nil, apierr.AlreadyExists("merge: tablet %s already exists", r.MergedTabletId)
	}
	if err := w.deleteTablet(left); err != nil {
		return nil, err
	}
	if err := w.deleteTablet(right); err != nil {
		return nil, err
	}
	files := make([]*pb.TSFileRef, 0, len(r.Tsfiles)+len(left.Tsfiles)+len(right.Tsfiles))
	files = append(append(append(files, r.Tsfiles...), left.Tsfiles...), right.Tsfiles...)
	t := &pb.TabletMeta{
		TabletId:     r.MergedTabletId,
		Table:        left.Table,
		Range:        &pb.RowRange{StartRow: left.Range.GetStartRow(), EndRow: right.Range.GetEndRow()},
		State:        pb.TabletState_TABLET_STATE_ASSIGNED,
		TserverUuid:  r.TserverUuid,
		Epoch:        1,
		Tsfiles:      files,
		DataDirGroup: left.DataDirGroup,
	}
	if err := w.putTablet(nil, t); err != nil {
		return nil, err
	}
	return &Result{Tablets: []*pb.TabletMeta{t}}, nil
}

// mergeDone reports whether the merge of r committed already: both parents
// gone and the merged tablet present, owned by the reporter.
func (w *writer) mergeDone(r *pb.ReportMergeRequest) (*pb.TabletMeta, bool) {
	if _, err := w.Tablet(r.RightTabletId); err == nil {
		return nil, false
	}
	t, err := w.Tablet(r.MergedTabletId)
	if err != nil || t.TserverUuid != r.TserverUuid {
		return nil, false
	}
	return t, true
}
