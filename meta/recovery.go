package meta

import (
	"slices"

	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// Recovery files (docs/design.md 'Log splitting'): when the master has
// split a dead tserver's log by tablet, LogSplitDone replaces each
// tablet's positions of that prefix by its recovery files. A checkpoint
// that replaces the positions (or the table's deletion) moves them to the
// recoverygc bucket, from which the master has them deleted;
// RecoveryFilesDeleted removes them from it.

// logSplitDone applies the items that still match: the tablet UNASSIGNED
// at the expected epoch, its oldest position of the prefix the one the
// split started from.
func (w *writer) logSplitDone(c *spb.MetaLogSplitDone) (*Result, error) {
	res := &Result{}
	if c.Prefix == "" {
		return res, nil
	}
	for _, it := range c.Items {
		t, err := w.Tablet(it.TabletId)
		if err != nil || t.State != pb.TabletState_TABLET_STATE_UNASSIGNED || t.Epoch != it.ExpectedEpoch {
			continue
		}
		oldest, ok := OldestPosition(t, c.Prefix)
		if !ok || oldest != it.FromFileTimestamp {
			continue
		}
		nt := proto.Clone(t).(*pb.TabletMeta)
		nt.LogPositions = slices.DeleteFunc(nt.LogPositions, func(p *pb.LogPosition) bool { return p.Prefix == c.Prefix })
		for _, f := range it.RecoveryFiles {
			if f != "" && !slices.Contains(nt.RecoveryFiles, f) {
				nt.RecoveryFiles = append(nt.RecoveryFiles, f)
			}
		}
		if err := w.putTablet(t, nt); err != nil {
			return nil, err
		}
		res.Applied++
		res.Tablets = append(res.Tablets, nt)
	}
	return res, nil
}

// logSplitsDone applies several prefixes' splits in this one transaction,
// each as logSplitDone alone; the result sums them.
func (w *writer) logSplitsDone(c *spb.MetaLogSplitsDone) (*Result, error) {
	res := &Result{}
	for _, s := range c.Splits {
		r, err := w.logSplitDone(s)
		if err != nil {
			return nil, err
		}
		res.Applied += r.Applied
		res.Tablets = append(res.Tablets, r.Tablets...)
	}
	return res, nil
}

// dropRecoveryFiles moves t's recovery files and child logs (both paths
// relative to the shared root, both flushed by the checkpoint that calls
// this) to the garbage list and clears them from t (the caller stores t).
func (w *writer) dropRecoveryFiles(t *pb.TabletMeta) error {
	gc := w.tx.Bucket(bucketRecoveryGC)
	for _, f := range append(t.RecoveryFiles, t.ChildLogs...) {
		if err := gc.Put([]byte(f), nil); err != nil {
			return err
		}
	}
	t.RecoveryFiles, t.ChildLogs = nil, nil
	return nil
}

func (w *writer) recoveryFilesDeleted(c *spb.MetaRecoveryFilesDeleted) (*Result, error) {
	gc := w.tx.Bucket(bucketRecoveryGC)
	res := &Result{}
	for _, p := range c.Paths {
		if gc.Get([]byte(p)) == nil {
			continue
		}
		if err := gc.Delete([]byte(p)); err != nil {
			return nil, err
		}
		res.Applied++
	}
	return res, nil
}

// RecoveryGarbage lists at most limit recovery files that some tablet
// stopped naming and that are not yet deleted, in path order. A split's
// children share their parent's files, so a listed file may still be
// named by another tablet: callers check with RecoveryFilesInUse.
func (r *Reader) RecoveryGarbage(limit int) []string {
	var out []string
	c := r.tx.Bucket(bucketRecoveryGC).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		out = append(out, string(k))
	}
	return out
}

// OldestPosition is the smallest file timestamp among t's positions of
// prefix.
func OldestPosition(t *pb.TabletMeta, prefix string) (int64, bool) {
	var oldest int64
	found := false
	for _, p := range t.LogPositions {
		if p.Prefix == prefix && (!found || p.FileTimestamp < oldest) {
			oldest, found = p.FileTimestamp, true
		}
	}
	return oldest, found
}

// RecoveryFilesInUse is the set of recovery files and child logs some
// tablet names.
func (r *Reader) RecoveryFilesInUse() (map[string]bool, error) {
	out := map[string]bool{}
	err := r.ForEachTablet(func(t *pb.TabletMeta) error {
		for _, f := range append(t.RecoveryFiles, t.ChildLogs...) {
			out[f] = true
		}
		return nil
	})
	return out, err
}
