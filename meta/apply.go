package meta

import (
	"bytes"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

const (
	apierrInternal    = codes.Internal
	apierrNotFound    = codes.NotFound
	apierrUnavailable = codes.Unavailable
)

// MaxAllocateIDs bounds one AllocateIds command.
const MaxAllocateIDs = 1000

// writer applies commands inside one read-write transaction.
type writer struct {
	Reader
	touched map[string]struct{} // owners whose owned tablets change (ownergen.go)
}

func (w *writer) apply(cmd *spb.MetaCommand) *Result {
	res, err := w.dispatch(cmd)
	if err != nil {
		return &Result{Err: err}
	}
	return res
}

func (w *writer) dispatch(cmd *spb.MetaCommand) (*Result, error) {
	switch c := cmd.Cmd.(type) {
	case *spb.MetaCommand_CreateTable:
		return w.createTable(c.CreateTable)
	case *spb.MetaCommand_DeleteTable:
		return w.deleteTable(c.DeleteTable)
	case *spb.MetaCommand_AddFamily:
		return w.addFamily(c.AddFamily)
	case *spb.MetaCommand_DeleteFamily:
		return w.deleteFamily(c.DeleteFamily)
	case *spb.MetaCommand_SetGcRule:
		return w.setGCRule(c.SetGcRule)
	case *spb.MetaCommand_FamilyPurged:
		return w.familyPurged(c.FamilyPurged)
	case *spb.MetaCommand_SetCompression:
		return w.setCompression(c.SetCompression)
	case *spb.MetaCommand_RegisterTserver:
		return w.registerTServer(c.RegisterTserver)
	case *spb.MetaCommand_Assign:
		return w.assign(c.Assign)
	case *spb.MetaCommand_Unassign:
		return w.unassign(c.Unassign)
	case *spb.MetaCommand_TabletLoad:
		return w.tabletLoad(c.TabletLoad)
	case *spb.MetaCommand_TabletLoads:
		return w.tabletLoads(c.TabletLoads)
	case *spb.MetaCommand_Checkpoint:
		return w.checkpoint(c.Checkpoint)
	case *spb.MetaCommand_AllocateIds:
		return w.allocateIDs(c.AllocateIds)
	case *spb.MetaCommand_Split:
		return w.split(c.Split)
	case *spb.MetaCommand_LogSplitDone:
		return w.logSplitDone(c.LogSplitDone)
	case *spb.MetaCommand_LogSplitsDone:
		return w.logSplitsDone(c.LogSplitsDone)
	case *spb.MetaCommand_RecoveryFilesDeleted:
		return w.recoveryFilesDeleted(c.RecoveryFilesDeleted)
	case *spb.MetaCommand_Grant:
		return w.grant(c.Grant.GetGrant())
	case *spb.MetaCommand_Revoke:
		return w.revoke(c.Revoke.GetGrant())
	case *spb.MetaCommand_BootstrapAdmin:
		return w.bootstrapAdmin(c.BootstrapAdmin.GetPrincipal())
	case *spb.MetaCommand_Merge:
		return w.merge(c.Merge)
	case *spb.MetaCommand_CreateTablets:
		return w.createTablets(c.CreateTablets)
	case *spb.MetaCommand_DeleteTablets:
		return w.deleteTablets(c.DeleteTablets)
	case *spb.MetaCommand_CreateBackup:
		return w.createBackup(c.CreateBackup)
	case *spb.MetaCommand_UpdateBackup:
		return w.updateBackup(c.UpdateBackup)
	case *spb.MetaCommand_DeleteBackup:
		return w.deleteBackup(c.DeleteBackup)
	case *spb.MetaCommand_RestoreTable:
		return w.restoreTable(c.RestoreTable)
	case *spb.MetaCommand_RecordBackup:
		return w.recordBackup(c.RecordBackup)
	case *spb.MetaCommand_AddBackupFiles:
		return w.addBackupFiles(c.AddBackupFiles)
	default:
		return nil, apierr.InvalidArgument("meta: command has no known kind")
	}
}

// putTablet stores t, keeping the owners index in step with old (nil for
// a new tablet).
func (w *writer) putTablet(old, t *pb.TabletMeta) error {
	v, err := proto.Marshal(t)
	if err != nil {
		return err
	}
	w.touchTablet(old, t)
	owners := w.tx.Bucket(bucketOwners)
	if old != nil {
		if err := owners.Delete(ownerKey(ownerOf(old), old.TabletId)); err != nil {
			return err
		}
	} else {
		if err := w.tx.Bucket(bucketRanges).Put(rangeKey(t.Table, t.Range.GetStartRow()), []byte(t.TabletId)); err != nil {
			return err
		}
	}
	if err := owners.Put(ownerKey(ownerOf(t), t.TabletId), nil); err != nil {
		return err
	}
	return w.tx.Bucket(bucketTablets).Put([]byte(t.TabletId), v)
}

func (w *writer) deleteTablet(t *pb.TabletMeta) error {
	w.touch(ownerOf(t))
	if err := w.tx.Bucket(bucketOwners).Delete(ownerKey(ownerOf(t), t.TabletId)); err != nil {
		return err
	}
	if err := w.tx.Bucket(bucketRanges).Delete(rangeKey(t.Table, t.Range.GetStartRow())); err != nil {
		return err
	}
	return w.tx.Bucket(bucketTablets).Delete([]byte(t.TabletId))
}

func ownerOf(t *pb.TabletMeta) string {
	if t.State == pb.TabletState_TABLET_STATE_UNASSIGNED {
		return ""
	}
	return t.TserverUuid
}

func (w *writer) nextIDs(n int) ([]string, error) {
	next := w.NextTabletID()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = FormatTabletID(next + uint64(i))
	}
	return ids, w.tx.Bucket(bucketMeta).Put(keyNextTabletID, u64(next+uint64(n)))
}

// ValidateSchema checks a table schema: the name, a known timestamp
// granularity, valid and distinct family names, non-negative policies. A table may have no family (as in
// Cloud Bigtable, whose clients create a table and then its families).
func ValidateSchema(s *pb.TableSchema) error {
	if s == nil {
		return apierr.InvalidArgument("table schema is missing")
	}
	if err := limits.ValidateTableName(s.Name); err != nil {
		return err
	}
	if _, ok := pb.TimestampGranularity_name[int32(s.Granularity)]; !ok {
		return apierr.InvalidArgument("table %q: unknown timestamp granularity %d (use micros or millis)", s.Name, s.Granularity)
	}
	seen := map[string]bool{}
	for _, f := range s.Families {
		if err := ValidateFamily(f); err != nil {
			return err
		}
		if seen[f.Name] {
			return apierr.InvalidArgument("table %q declares column family %q twice", s.Name, f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// ValidateFamily checks one family spec.
func ValidateFamily(f *pb.FamilySpec) error {
	if f == nil {
		return apierr.InvalidArgument("column family spec is missing")
	}
	if err := limits.ValidateFamilyName(f.Name); err != nil {
		return err
	}
	if f.MaxAgeMicros < 0 {
		return apierr.InvalidArgument("column family %q has negative max age %d µs; use 0 to keep cells forever", f.Name, f.MaxAgeMicros)
	}
	if f.GcRule != nil {
		if err := ValidateGCRule(f.Name, f.GcRule); err != nil {
			return err
		}
	}
	if err := ValidateCompression(f.Name, f.Compression); err != nil {
		return err
	}
	if _, ok := pb.Aggregate_name[int32(f.Aggregate)]; !ok {
		return apierr.InvalidArgument("column family %q: unknown aggregate %d (use int64 sum, min or max)", f.Name, f.Aggregate)
	}
	return limits.ValidateFamilyMaxAge(f.Name, f.MaxAgeMicros)
}

// ValidateCompression checks a family's compression is one of the enum's
// values (unspecified is the default, snappy).
func ValidateCompression(family string, c pb.Compression) error {
	if _, ok := pb.Compression_name[int32(c)]; !ok {
		return apierr.InvalidArgument("column family %q: unknown compression %d (use none, snappy or zstd)", family, c)
	}
	return nil
}

// ValidateGCRule checks a family's GC rule: max versions >= 1, max age > 0
// and within the limit, nesting at most limits.MaxGCRuleDepth deep. An unset rule
// and empty unions and intersections are valid (they keep every cell).
func ValidateGCRule(family string, r *pb.GcRule) error {
	return validateGCRule(family, r, 1)
}

func validateGCRule(family string, r *pb.GcRule, depth int) error {
	if depth > limits.MaxGCRuleDepth {
		return apierr.InvalidArgument("column family %q: GC rule nests deeper than %d levels", family, limits.MaxGCRuleDepth)
	}
	var subs []*pb.GcRule
	switch x := r.GetRule().(type) {
	case nil:
		return nil
	case *pb.GcRule_MaxNumVersions:
		if x.MaxNumVersions < 1 {
			return apierr.InvalidArgument("column family %q: GC rule max versions %d; give at least 1", family, x.MaxNumVersions)
		}
		return nil
	case *pb.GcRule_MaxAgeMicros:
		if x.MaxAgeMicros <= 0 {
			return apierr.InvalidArgument("column family %q: GC rule max age %d µs; give a positive age", family, x.MaxAgeMicros)
		}
		return limits.ValidateFamilyMaxAge(family, x.MaxAgeMicros)
	case *pb.GcRule_Union_:
		subs = x.Union.GetRules()
	case *pb.GcRule_Intersection_:
		subs = x.Intersection.GetRules()
	}
	for _, sub := range subs {
		if sub == nil {
			return apierr.InvalidArgument("column family %q: GC rule has an empty sub-rule", family)
		}
		if err := validateGCRule(family, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// ValidateSplitKeys checks CreateTable's split keys: non-empty, within the
// row key limit, strictly increasing.
func ValidateSplitKeys(keys [][]byte) error {
	if len(keys) > limits.MaxSplitKeys {
		return apierr.InvalidArgument("%d split keys, over the limit of %d", len(keys), limits.MaxSplitKeys)
	}
	for i, k := range keys {
		if len(k) == 0 {
			return apierr.InvalidArgument("split key %d is empty; the first tablet already starts at the empty row", i)
		}
		if err := limits.ValidateRowKey(k); err != nil {
			return apierr.Wrap(codes.InvalidArgument, err, "split key %d", i)
		}
		if i > 0 {
			switch c := bytes.Compare(keys[i-1], k); {
			case c == 0:
				return apierr.InvalidArgument("split key %d (%q) repeats split key %d; split keys must be distinct", i, k, i-1)
			case c > 0:
				return apierr.InvalidArgument("split key %d (%q) sorts before split key %d (%q); split keys must be sorted", i, k, i-1, keys[i-1])
			}
		}
	}
	return nil
}

func (w *writer) createTable(c *spb.MetaCreateTable) (*Result, error) {
	if err := ValidateSchema(c.Schema); err != nil {
		return nil, err
	}
	if err := ValidateSplitKeys(c.SplitKeys); err != nil {
		return nil, err
	}
	name := c.Schema.Name
	if w.tx.Bucket(bucketTables).Get([]byte(name)) != nil {
		return nil, apierr.AlreadyExists("table %q already exists", name)
	}
	if _, pending, err := w.PendingTable(name); err != nil || pending {
		if err == nil {
			err = apierr.Unavailable("table %q is being created or deleted; retry when that finished", name)
		}
		return nil, err
	}
	if err := w.publishSchema(c.Schema); err != nil {
		return nil, err
	}
	tablets, err := w.addTablets(name, nil, c.SplitKeys, true)
	if err != nil {
		return nil, err
	}
	return &Result{Tablets: tablets}, nil
}

func (w *writer) deleteTable(c *spb.MetaDeleteTable) (*Result, error) {
	if _, err := w.Table(c.Name); err != nil {
		return nil, err
	}
	tablets, err := w.TableTablets(c.Name, nil, 0)
	if err != nil {
		return nil, err
	}
	for _, t := range tablets {
		if err := w.deleteTablet(t); err != nil {
			return nil, err
		}
		if err := w.dropRecoveryFiles(t); err != nil {
			return nil, err
		}
	}
	if err := w.tx.Bucket(bucketTables).Delete([]byte(c.Name)); err != nil {
		return nil, err
	}
	return &Result{Tablets: tablets}, nil
}

func (w *writer) addFamily(c *spb.MetaAddFamily) (*Result, error) {
	if err := ValidateFamily(c.Family); err != nil {
		return nil, err
	}
	s, err := w.Table(c.Table)
	if err != nil {
		return nil, err
	}
	for _, f := range s.Families {
		if f.Name == c.Family.Name {
			return nil, apierr.AlreadyExists("table %q already has column family %q", c.Table, f.Name)
		}
	}
	if slices.Contains(s.PurgingFamilies, c.Family.Name) {
		return nil, apierr.FailedPrecondition("column family %q of table %q was deleted and its old cells are not yet masked on every tablet; call DeleteColumnFamily again to finish", c.Family.Name, c.Table)
	}
	s.Families = append(s.Families, c.Family)
	return w.putSchema(s)
}

func (w *writer) registerTServer(c *spb.MetaRegisterTServer) (*Result, error) {
	ts := c.Tserver
	if ts.GetUuid() == "" || ts.Address == "" {
		return nil, apierr.InvalidArgument("tserver registration needs a uuid and an address")
	}
	res := &Result{}
	if old, err := w.TServer(ts.Uuid); err == nil && old.Incarnation != ts.Incarnation {
		// The old process is gone; what it served must be recovered.
		tablets, err := w.TabletsOf(ts.Uuid)
		if err != nil {
			return nil, err
		}
		for _, t := range tablets {
			nt := proto.Clone(t).(*pb.TabletMeta)
			nt.State = pb.TabletState_TABLET_STATE_UNASSIGNED
			nt.TserverUuid = ""
			if err := w.putTablet(t, nt); err != nil {
				return nil, err
			}
			res.IDs = append(res.IDs, t.TabletId)
		}
	}
	v, err := proto.Marshal(ts)
	if err != nil {
		return nil, err
	}
	return res, w.tx.Bucket(bucketTServers).Put([]byte(ts.Uuid), v)
}

func (w *writer) assign(c *spb.MetaAssign) (*Result, error) {
	res := &Result{}
	for _, it := range c.Items {
		t, err := w.Tablet(it.TabletId)
		if err != nil || t.Epoch != it.ExpectedEpoch {
			continue // split, deleted or reassigned meanwhile
		}
		if w.tx.Bucket(bucketTServers).Get([]byte(it.TserverUuid)) == nil {
			continue
		}
		nt := proto.Clone(t).(*pb.TabletMeta)
		nt.State = pb.TabletState_TABLET_STATE_ASSIGNED
		nt.TserverUuid = it.TserverUuid
		nt.Epoch = t.Epoch + 1
		if err := w.putTablet(t, nt); err != nil {
			return nil, err
		}
		res.Applied++
		res.Tablets = append(res.Tablets, nt)
	}
	return res, nil
}

func (w *writer) unassign(c *spb.MetaUnassign) (*Result, error) {
	res := &Result{}
	for _, it := range c.Items {
		t, err := w.Tablet(it.TabletId)
		if err != nil || t.Epoch != it.ExpectedEpoch || t.TserverUuid != it.ExpectedTserver ||
			t.State == pb.TabletState_TABLET_STATE_UNASSIGNED {
			continue
		}
		nt := proto.Clone(t).(*pb.TabletMeta)
		nt.State = pb.TabletState_TABLET_STATE_UNASSIGNED
		nt.TserverUuid = ""
		if err := w.putTablet(t, nt); err != nil {
			return nil, err
		}
		res.Applied++
	}
	return res, nil
}

// owned returns the tablet if tserver owns it at epoch, else a
// NotFound / FailedPrecondition error.
func (w *writer) owned(id string, epoch int64, tserver string) (*pb.TabletMeta, error) {
	t, err := w.Tablet(id)
	if err != nil {
		return nil, err
	}
	if t.State == pb.TabletState_TABLET_STATE_UNASSIGNED || t.TserverUuid != tserver {
		return nil, apierr.FailedPrecondition("tablet %s is not assigned to tserver %s (owner %q, epoch %d); stop serving it",
			id, tserver, t.TserverUuid, t.Epoch)
	}
	if t.Epoch != epoch {
		return nil, apierr.FailedPrecondition("tablet %s: stale epoch %d, the current epoch is %d; stop serving it",
			id, epoch, t.Epoch)
	}
	return t, nil
}

// ValidPosition is the check the FSM makes of a reported log position,
// for callers that validate a request before they propose it.
func ValidPosition(p *pb.LogPosition) error { return validPosition(p) }

func validPosition(p *pb.LogPosition) error {
	if p == nil || p.Prefix == "" {
		return apierr.InvalidArgument("log position needs a prefix")
	}
	if p.FileTimestamp < 0 {
		return apierr.InvalidArgument("log position %s has negative file timestamp %d", p.Prefix, p.FileTimestamp)
	}
	return nil
}

func (w *writer) tabletLoad(c *spb.MetaTabletLoad) (*Result, error) {
	if err := validPosition(c.Position); err != nil {
		return nil, err
	}
	t, err := w.owned(c.TabletId, c.Epoch, c.TserverUuid)
	if err != nil {
		return nil, err
	}
	nt := proto.Clone(t).(*pb.TabletMeta)
	if !slices.ContainsFunc(nt.LogPositions, func(p *pb.LogPosition) bool { return proto.Equal(p, c.Position) }) {
		nt.LogPositions = append(nt.LogPositions, c.Position)
	}
	nt.State = pb.TabletState_TABLET_STATE_SERVING
	if err := w.putTablet(t, nt); err != nil {
		return nil, err
	}
	return &Result{Tablets: []*pb.TabletMeta{nt}}, nil
}

// tabletLoads applies each load as tabletLoad does. A load refused for
// its own reasons (stale epoch, another owner, no such tablet, a bad
// position) is refused alone and changed nothing (tabletLoad checks before
// it writes); an internal error (a corrupt record, a failed write) fails
// the whole command, whose transaction is then rolled back.
func (w *writer) tabletLoads(c *spb.MetaTabletLoads) (*Result, error) {
	if len(c.Loads) == 0 || len(c.Loads) > limits.MaxTabletLoads {
		return nil, apierr.InvalidArgument("tablet loads command has %d loads; give 1 to %d", len(c.Loads), limits.MaxTabletLoads)
	}
	res := &Result{Tablets: make([]*pb.TabletMeta, len(c.Loads)), Statuses: make([]error, len(c.Loads))}
	for i, l := range c.Loads {
		one, err := w.tabletLoad(l)
		if err != nil {
			if apierr.CodeOf(err) == apierrInternal {
				return nil, err
			}
			res.Statuses[i] = err
			continue
		}
		res.Tablets[i] = one.Tablets[0]
	}
	return res, nil
}

func (w *writer) checkpoint(c *spb.MetaCheckpoint) (*Result, error) {
	res := &Result{Statuses: make([]error, len(c.Reports))}
	for i, r := range c.Reports {
		res.Statuses[i] = w.checkpointOne(c.TserverUuid, r)
	}
	return res, nil
}

func (w *writer) checkpointOne(tserver string, r *pb.CheckpointReport) error {
	for _, p := range r.LogPositions {
		if err := validPosition(p); err != nil {
			return err
		}
	}
	t, err := w.owned(r.TabletId, r.Epoch, tserver)
	if err != nil {
		return err
	}
	if r.FenceFiles {
		if err := dropsUnreplaced(t, r); err != nil {
			return err
		}
	}
	nt := proto.Clone(t).(*pb.TabletMeta)
	// An empty list leaves the positions unchanged: a compaction reports
	// new files but no new position (a checkpoint always names one, or
	// says the tablet needs no log at all).
	if r.LogClean || len(r.LogPositions) > 0 {
		nt.LogPositions = r.LogPositions
		if r.LogClean {
			nt.LogPositions = nil
		}
		// The checkpoint flushed what the recovery files held.
		if err := w.dropRecoveryFiles(nt); err != nil {
			return err
		}
	}
	nt.Tsfiles = r.Tsfiles
	if r.DataDirGroup != nil {
		nt.DataDirGroup = r.DataDirGroup
	}
	return w.putTablet(t, nt)
}

// dropsUnreplaced is the compare-and-swap of a fenced report: every file
// t's list names must be in the report's list or its replaced run.
func dropsUnreplaced(t *pb.TabletMeta, r *pb.CheckpointReport) error {
	type fileKey struct {
		store  string
		footer uint64
	}
	keep := make(map[fileKey]bool, len(r.Tsfiles)+len(r.Replaced))
	for _, f := range r.Tsfiles {
		keep[fileKey{f.BlockStoreUuid, f.FooterBlock}] = true
	}
	for _, f := range r.Replaced {
		keep[fileKey{f.BlockStoreUuid, f.FooterBlock}] = true
	}
	for _, f := range t.Tsfiles {
		if !keep[fileKey{f.BlockStoreUuid, f.FooterBlock}] {
			return apierr.Aborted("tablet %s: the report leaves out TSFile %s/%d, which it does not replace: it was computed from another list than the tablet's",
				t.TabletId, f.BlockStoreUuid, f.FooterBlock)
		}
	}
	return nil
}

func (w *writer) allocateIDs(c *spb.MetaAllocateIds) (*Result, error) {
	if c.Count == 0 || c.Count > MaxAllocateIDs {
		return nil, apierr.InvalidArgument("allocate %d tablet ids: ask for 1 to %d", c.Count, MaxAllocateIDs)
	}
	ids, err := w.nextIDs(int(c.Count))
	if err != nil {
		return nil, err
	}
	return &Result{IDs: ids}, nil
}

func (w *writer) split(c *spb.MetaSplit) (*Result, error) {
	parent, err := w.Tablet(c.ParentTabletId)
	if err != nil {
		// A retried report whose first attempt committed: answer the same.
		if kids, ok := w.splitDone(c); ok {
			return &Result{Tablets: kids}, nil
		}
		return nil, err
	}
	if _, err := w.owned(parent.TabletId, c.ParentEpoch, c.TserverUuid); err != nil {
		return nil, err
	}
	if err := w.checkChildren(parent, c.Children); err != nil {
		return nil, err
	}
	if err := w.deleteTablet(parent); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, ch := range c.Children {
		t := &pb.TabletMeta{
			TabletId:     ch.TabletId,
			Table:        parent.Table,
			Range:        ch.Range,
			State:        pb.TabletState_TABLET_STATE_ASSIGNED,
			TserverUuid:  c.TserverUuid,
			Epoch:        1,
			LogPositions: ch.LogPositions,
			Tsfiles:      ch.Tsfiles,
			DataDirGroup: parent.DataDirGroup,
			ChildLogs:    ch.ChildLogs,
			// The parent's recovery files may hold writes the children
			// still need; each child drops them at its first checkpoint.
			RecoveryFiles: parent.RecoveryFiles,
		}
		if err := w.putTablet(nil, t); err != nil {
			return nil, err
		}
		res.Tablets = append(res.Tablets, t)
	}
	return res, nil
}

// checkChildren: at least two, fresh allocated ids, ranges that tile the
// parent's range in order, each non-empty.
func (w *writer) checkChildren(parent *pb.TabletMeta, kids []*pb.SplitChild) error {
	if len(kids) < 2 {
		return apierr.InvalidArgument("split of tablet %s names %d children; give at least 2", parent.TabletId, len(kids))
	}
	next := w.NextTabletID()
	seen := map[string]bool{}
	want := parent.Range.GetStartRow()
	for i, k := range kids {
		n, err := ParseTabletID(k.TabletId)
		if err != nil || n >= next || n == 0 {
			return apierr.InvalidArgument("split child %d: tablet id %q was not allocated by AllocateTabletIds", i, k.TabletId)
		}
		if seen[k.TabletId] || w.tx.Bucket(bucketTablets).Get([]byte(k.TabletId)) != nil {
			return apierr.AlreadyExists("split child %d: tablet %s already exists", i, k.TabletId)
		}
		seen[k.TabletId] = true
		start, end := k.Range.GetStartRow(), k.Range.GetEndRow()
		if !bytes.Equal(start, want) {
			return apierr.InvalidArgument("split child %d starts at %q, want %q: children must tile the parent's range in order", i, start, want)
		}
		last := i == len(kids)-1
		if last && !bytes.Equal(end, parent.Range.GetEndRow()) {
			return apierr.InvalidArgument("last split child ends at %q, the parent ends at %q", end, parent.Range.GetEndRow())
		}
		if !last && (len(end) == 0 || bytes.Compare(start, end) >= 0) {
			return apierr.InvalidArgument("split child %d has empty range [%q, %q)", i, start, end)
		}
		want = end
	}
	return nil
}

// splitDone reports whether the children of c exist exactly as that split
// would have made them (the parent being gone), and returns them.
func (w *writer) splitDone(c *spb.MetaSplit) ([]*pb.TabletMeta, bool) {
	if len(c.Children) == 0 {
		return nil, false
	}
	var out []*pb.TabletMeta
	for _, ch := range c.Children {
		t, err := w.Tablet(ch.TabletId)
		if err != nil || !proto.Equal(t.Range, ch.Range) {
			return nil, false
		}
		out = append(out, t)
	}
	return out, true
}

// nextSchemaVersion hands out the next schema version (from 1).
func (w *writer) nextSchemaVersion() (int64, error) {
	last, _ := getU64(w.tx.Bucket(bucketMeta).Get(keySchemaVersion))
	return int64(last + 1), w.tx.Bucket(bucketMeta).Put(keySchemaVersion, u64(last+1))
}

// putSchema stores a changed schema under a new version.
func (w *writer) putSchema(s *pb.TableSchema) (*Result, error) {
	var err error
	if s.Version, err = w.nextSchemaVersion(); err != nil {
		return nil, err
	}
	v, err := proto.Marshal(s)
	if err != nil {
		return nil, err
	}
	return &Result{}, w.tx.Bucket(bucketTables).Put([]byte(s.Name), v)
}

func (w *writer) deleteFamily(c *spb.MetaDeleteFamily) (*Result, error) {
	s, err := w.Table(c.Table)
	if err != nil {
		return nil, err
	}
	for i, f := range s.Families {
		if f.Name != c.Family {
			continue
		}
		s.Families = append(s.Families[:i], s.Families[i+1:]...)
		if !slices.Contains(s.PurgingFamilies, c.Family) {
			s.PurgingFamilies = append(s.PurgingFamilies, c.Family)
		}
		return w.putSchema(s)
	}
	return nil, apierr.NotFound("table %q has no column family %q", c.Table, c.Family)
}

// familyPurged ends the deletion of a family: every tablet masks its old
// cells, so the name may be created again.
func (w *writer) familyPurged(c *spb.MetaFamilyPurged) (*Result, error) {
	s, err := w.Table(c.Table)
	if err != nil {
		return nil, err
	}
	i := slices.Index(s.PurgingFamilies, c.Family)
	if i < 0 {
		return &Result{}, nil // an earlier attempt recorded it
	}
	s.PurgingFamilies = slices.Delete(s.PurgingFamilies, i, i+1)
	return w.putSchema(s)
}

func (w *writer) setGCRule(c *spb.MetaSetGCRule) (*Result, error) {
	if err := ValidateGCRule(c.Family, c.GcRule); err != nil {
		return nil, err
	}
	s, err := w.Table(c.Table)
	if err != nil {
		return nil, err
	}
	for _, f := range s.Families {
		if f.Name != c.Family {
			continue
		}
		f.MaxVersions, f.MaxAgeMicros = 0, 0
		f.GcRule = c.GcRule
		if f.GcRule == nil {
			f.GcRule = &pb.GcRule{}
		}
		return w.putSchema(s)
	}
	return nil, apierr.InvalidArgument("table %q has no column family %q", c.Table, c.Family)
}

func (w *writer) setCompression(c *spb.MetaSetCompression) (*Result, error) {
	if err := ValidateCompression(c.Family, c.Compression); err != nil {
		return nil, err
	}
	s, err := w.Table(c.Table)
	if err != nil {
		return nil, err
	}
	for _, f := range s.Families {
		if f.Name == c.Family {
			f.Compression = c.Compression
			return w.putSchema(s)
		}
	}
	return nil, apierr.InvalidArgument("table %q has no column family %q", c.Table, c.Family)
}
