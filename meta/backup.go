package meta

import (
	"bytes"
	"slices"

	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// Backups (docs/design.md 'Backups'). A backup is one record in the
// backups bucket: the source table's schema and, per tablet at the cut,
// its range and TSFile list as this metadata held them when the backup
// was recorded. Its files stay shared with the tablets that name them: GCReferences
// counts a backup's blocks as live, and every file a backup names goes
// into the sharedfiles bucket (never removed: a marker of a few bytes), so
// a tserver asks SharedFiles before it deletes a compaction's replaced
// file itself and leaves a shared one to the orphan pass. A copy
// (recordBackup with CopyOf) names the same files as its source; an
// import is recorded CREATING, without files, and gets them one command at
// a time as the tservers write them (addBackupFiles), so every imported
// file is named (kept by GC) moments after it is written, and it is
// restorable only once READY.

// Backup returns one backup, or a NotFound error.
func (r *Reader) Backup(name string) (*pb.BackupMeta, error) {
	var v []byte
	if b := r.tx.Bucket(bucketBackups); b != nil {
		v = b.Get([]byte(name))
	}
	if v == nil {
		return nil, apierr.NotFound("backup %q does not exist", name)
	}
	m := &pb.BackupMeta{}
	if err := r.decode(bucketBackups, []byte(name), v, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Backups returns every backup in name order.
func (r *Reader) Backups() ([]*pb.BackupMeta, error) {
	b := r.tx.Bucket(bucketBackups)
	if b == nil {
		return nil, nil
	}
	var out []*pb.BackupMeta
	err := b.ForEach(func(k, v []byte) error {
		m := &pb.BackupMeta{}
		if err := r.decode(bucketBackups, k, v, m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// SharedFiles returns those of footers (footer blocks of TSFiles of the
// block store store) that some backup names or once named.
func (r *Reader) SharedFiles(store string, footers []uint64) []uint64 {
	b := r.tx.Bucket(bucketSharedFiles)
	if b == nil {
		return nil
	}
	var out []uint64
	for _, f := range footers {
		if b.Get(sharedKey(store, f)) != nil {
			out = append(out, f)
		}
	}
	return out
}

func (w *writer) putBackup(m *pb.BackupMeta) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return w.tx.Bucket(bucketBackups).Put([]byte(m.Name), v)
}

// createBackup records a backup of a table whose every tablet is in
// c.Flushed (the tablets the leader's flushes committed after the backup
// was asked for): their file lists, as this metadata holds them now, hold
// every write acknowledged before that. A tablet not flushed (split or
// merged since, or not serving when the flushes ran) refuses the command
// with Aborted, and the leader flushes again.
func (w *writer) createBackup(c *spb.MetaCreateBackup) (*Result, error) {
	if retry, err := w.checkNewBackup(c.Name, c.CreateTimeMicros, c.ExpireTimeMicros, c.RequestId); err != nil {
		return nil, err
	} else if retry != nil {
		return &Result{Backup: retry}, nil // a retry of the call that made it
	}
	schema, err := w.Table(c.Table)
	if err != nil {
		return nil, err
	}
	tablets, err := w.TableTablets(c.Table, nil, 0)
	if err != nil {
		return nil, err
	}
	flushed := make(map[string]bool, len(c.Flushed))
	for _, id := range c.Flushed {
		flushed[id] = true
	}
	m := &pb.BackupMeta{
		Name:             c.Name,
		SourceTable:      c.Table,
		Schema:           schema,
		CreateTimeMicros: c.CreateTimeMicros,
		ExpireTimeMicros: c.ExpireTimeMicros,
		State:            pb.BackupState_BACKUP_STATE_READY,
		RequestId:        c.RequestId,
	}
	for _, t := range tablets {
		if !flushed[t.TabletId] {
			return nil, apierr.Aborted("backup %q of table %q: tablet %s was not flushed for it (split, merged or not serving meanwhile); flush again", c.Name, c.Table, t.TabletId)
		}
		m.Tablets = append(m.Tablets, &pb.BackupTablet{Range: t.Range, Tsfiles: t.Tsfiles})
	}
	return w.saveBackup(m, m.Tablets)
}

// checkNewBackup checks a new backup's name and times. A backup of that
// name made by the same call (requestID, not empty) is returned: the
// command is a retry and answers it.
func (w *writer) checkNewBackup(name string, create, expire int64, requestID string) (retry *pb.BackupMeta, err error) {
	if err := limits.ValidateBackupName(name); err != nil {
		return nil, err
	}
	if expire <= create {
		return nil, apierr.InvalidArgument("backup %q: expire time %d µs is not after its creation time %d µs", name, expire, create)
	}
	if old, err := w.Backup(name); err == nil {
		if requestID != "" && old.RequestId == requestID {
			return old, nil
		}
		return nil, apierr.AlreadyExists("backup %q already exists", name)
	}
	return nil, nil
}

// saveBackup marks every file of named (the files the command gave m) in
// sharedfiles and stores m.
func (w *writer) saveBackup(m *pb.BackupMeta, named []*pb.BackupTablet) (*Result, error) {
	shared := w.tx.Bucket(bucketSharedFiles)
	for _, bt := range named {
		for _, f := range bt.Tsfiles {
			if err := shared.Put(sharedKey(f.BlockStoreUuid, f.FooterBlock), nil); err != nil {
				return nil, err
			}
		}
	}
	if err := w.putBackup(m); err != nil {
		return nil, err
	}
	return &Result{Backup: m}, nil
}

// recordBackup records a copy of a READY backup (c.CopyOf: its schema,
// tablets and files, read in this transaction, so no deletion of the
// source can come between) or the start of an import (a CREATING backup
// with c.Backup's schema and tablet ranges, without files).
func (w *writer) recordBackup(c *spb.MetaRecordBackup) (*Result, error) {
	in := c.GetBackup()
	if retry, err := w.checkNewBackup(in.GetName(), in.GetCreateTimeMicros(), in.GetExpireTimeMicros(), in.GetRequestId()); err != nil {
		return nil, err
	} else if retry != nil {
		return &Result{Backup: retry}, nil // a retry of the call that made it
	}
	m := &pb.BackupMeta{Name: in.Name, CreateTimeMicros: in.CreateTimeMicros, ExpireTimeMicros: in.ExpireTimeMicros, RequestId: in.RequestId}
	if c.CopyOf != "" {
		src, err := w.Backup(c.CopyOf)
		if err != nil {
			return nil, err
		}
		if src.State != pb.BackupState_BACKUP_STATE_READY {
			return nil, apierr.FailedPrecondition("backup %q is still being imported; copy it once it is ready", c.CopyOf)
		}
		m.SourceTable, m.Schema, m.Tablets, m.State = src.SourceTable, src.Schema, src.Tablets, pb.BackupState_BACKUP_STATE_READY
	} else {
		if in.Schema == nil {
			return nil, apierr.InvalidArgument("backup %q: an import needs the table's schema", in.Name)
		}
		if err := ValidateSchema(in.Schema); err != nil {
			return nil, err
		}
		m.SourceTable, m.Schema, m.State = in.SourceTable, in.Schema, pb.BackupState_BACKUP_STATE_CREATING
		for _, t := range in.Tablets {
			m.Tablets = append(m.Tablets, &pb.BackupTablet{Range: t.Range})
		}
		if err := checkTiling(m); err != nil {
			return nil, apierr.InvalidArgument("%v", err)
		}
	}
	return w.saveBackup(m, m.Tablets)
}

// addBackupFiles adds imported files to a CREATING backup's tablets and,
// with c.Ready, makes it READY. It is idempotent, so a retried call is
// harmless: a file the tablet names already is not added again, and a
// READY backup answers a command that only marks it ready.
func (w *writer) addBackupFiles(c *spb.MetaAddBackupFiles) (*Result, error) {
	m, err := w.Backup(c.Name)
	if err != nil {
		return nil, err
	}
	if m.State == pb.BackupState_BACKUP_STATE_READY && c.Ready && len(c.Tablets) == 0 {
		return &Result{Backup: m}, nil
	}
	if m.State != pb.BackupState_BACKUP_STATE_CREATING {
		return nil, apierr.FailedPrecondition("backup %q is not being imported", c.Name)
	}
	added := make([]*pb.BackupTablet, 0, len(c.Tablets))
	for _, t := range c.Tablets {
		if t.Index < 0 || int(t.Index) >= len(m.Tablets) {
			return nil, apierr.InvalidArgument("backup %q has %d tablets, not a tablet %d", c.Name, len(m.Tablets), t.Index)
		}
		bt := m.Tablets[t.Index]
		for _, f := range t.Tsfiles {
			if !slices.ContainsFunc(bt.Tsfiles, func(g *pb.TSFileRef) bool {
				return g.BlockStoreUuid == f.BlockStoreUuid && g.FooterBlock == f.FooterBlock
			}) {
				bt.Tsfiles = append(bt.Tsfiles, f)
			}
		}
		added = append(added, &pb.BackupTablet{Tsfiles: t.Tsfiles})
	}
	if c.Ready {
		m.State = pb.BackupState_BACKUP_STATE_READY
	}
	return w.saveBackup(m, added)
}

func (w *writer) updateBackup(c *spb.MetaUpdateBackup) (*Result, error) {
	m, err := w.Backup(c.Name)
	if err != nil {
		return nil, err
	}
	if c.ExpireTimeMicros <= m.CreateTimeMicros {
		return nil, apierr.InvalidArgument("backup %q: expire time %d µs is not after its creation time %d µs", c.Name, c.ExpireTimeMicros, m.CreateTimeMicros)
	}
	m.ExpireTimeMicros = c.ExpireTimeMicros
	if err := w.putBackup(m); err != nil {
		return nil, err
	}
	return &Result{Backup: m}, nil
}

// deleteBackup removes a backup; with ExpiredAtMicros set, only one that
// expired by then (otherwise it changes nothing and answers
// FailedPrecondition). Its files stay in sharedfiles: a table restored
// from it may still name them.
func (w *writer) deleteBackup(c *spb.MetaDeleteBackup) (*Result, error) {
	m, err := w.Backup(c.Name)
	if err != nil {
		return nil, err
	}
	if c.ExpiredAtMicros != 0 && m.ExpireTimeMicros > c.ExpiredAtMicros {
		return nil, apierr.FailedPrecondition("backup %q expires at %d µs, after %d µs", c.Name, m.ExpireTimeMicros, c.ExpiredAtMicros)
	}
	return &Result{}, w.tx.Bucket(bucketBackups).Delete([]byte(c.Name))
}

// restoreTable creates c.Table from a backup: the backup's schema under the
// new name (a new version) and one UNASSIGNED tablet per backup tablet,
// with its range and TSFiles, so the new table and the backup share the
// files.
func (w *writer) restoreTable(c *spb.MetaRestoreTable) (*Result, error) {
	m, err := w.Backup(c.Backup)
	if err != nil {
		return nil, err
	}
	if m.State != pb.BackupState_BACKUP_STATE_READY {
		return nil, apierr.FailedPrecondition("backup %q is still being imported; restore it once it is ready", c.Backup)
	}
	schema := proto.Clone(m.Schema).(*pb.TableSchema)
	schema.Name = c.Table
	schema.PurgingFamilies = nil
	if err := ValidateSchema(schema); err != nil {
		return nil, err
	}
	if w.tx.Bucket(bucketTables).Get([]byte(c.Table)) != nil {
		if c.RequestId != "" && string(w.tx.Bucket(bucketRestores).Get([]byte(c.Table))) == c.RequestId {
			// A retry of the restore that made it: its tablets, no change.
			tablets, err := w.TableTablets(c.Table, nil, 0)
			return &Result{Tablets: tablets}, err
		}
		return nil, apierr.AlreadyExists("table %q already exists", c.Table)
	}
	if _, pending, err := w.PendingTable(c.Table); err != nil || pending {
		if err == nil {
			err = apierr.Unavailable("table %q is being created or deleted; retry when that finished", c.Table)
		}
		return nil, err
	}
	if err := checkTiling(m); err != nil {
		return nil, err
	}
	if err := w.publishSchema(schema); err != nil {
		return nil, err
	}
	ids, err := w.nextIDs(len(m.Tablets))
	if err != nil {
		return nil, err
	}
	out := make([]*pb.TabletMeta, 0, len(m.Tablets))
	for i, bt := range m.Tablets {
		t := &pb.TabletMeta{
			TabletId: ids[i],
			Table:    c.Table,
			Range:    proto.Clone(bt.Range).(*pb.RowRange),
			State:    pb.TabletState_TABLET_STATE_UNASSIGNED,
			Tsfiles:  bt.Tsfiles,
		}
		if err := w.putTablet(nil, t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	restores := w.tx.Bucket(bucketRestores)
	if c.RequestId != "" {
		if err := restores.Put([]byte(c.Table), []byte(c.RequestId)); err != nil {
			return nil, err
		}
	} else if err := restores.Delete([]byte(c.Table)); err != nil {
		return nil, err // an id of an earlier table of this name
	}
	return &Result{Tablets: out}, nil
}

// checkTiling refuses a backup whose tablets do not tile the row space in
// order (a corrupt record: restoring it would lose or overlap rows).
func checkTiling(m *pb.BackupMeta) error {
	var prev []byte
	for i, bt := range m.Tablets {
		start, end := bt.Range.GetStartRow(), bt.Range.GetEndRow()
		last := i == len(m.Tablets)-1
		if !bytes.Equal(start, prev) || (i > 0 && len(start) == 0) || (len(end) == 0) != last {
			return apierr.FailedPrecondition("backup %q: its tablets do not tile the row space (tablet %d is [%q, %q))", m.Name, i, start, end)
		}
		prev = end
	}
	if len(m.Tablets) == 0 {
		return apierr.FailedPrecondition("backup %q has no tablets", m.Name)
	}
	return nil
}

// backupBlocks adds to blocks every block of store that a backup names.
func (r *Reader) backupBlocks(store string, add func(uint64)) error {
	ms, err := r.Backups()
	if err != nil {
		return err
	}
	for _, m := range ms {
		for _, bt := range m.Tablets {
			for _, f := range bt.Tsfiles {
				if f.BlockStoreUuid != store {
					continue
				}
				add(f.FooterBlock)
				for _, b := range f.Blocks {
					add(b)
				}
			}
		}
	}
	return nil
}
