package master

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// defaultBackupExpiry is how often the leader deletes expired backups.
const defaultBackupExpiry = time.Minute

// backupTimeout bounds a CreateBackup whose caller set no deadline.
const backupTimeout = 2 * time.Minute

// BackupStep names a point of a backup or a restore at which
// Config.BackupHook is called: the points between its flushes and raft
// commands, where a crash leaves a backup (or restored table) whole or
// absent (docs/design.md 'Backups').
type BackupStep int

// The backup and restore steps.
const (
	// BackupStepFlush: CreateBackup about to flush the table's tablets
	// (each attempt).
	BackupStepFlush BackupStep = 1
	// BackupStepRecord: the flushes done, the MetaCreateBackup command
	// not yet proposed.
	BackupStepRecord BackupStep = 2
	// BackupStepRecorded: the backup recorded, the call not yet answered.
	BackupStepRecorded BackupStep = 3
	// RestoreStepRecorded: the MetaRestoreTable command committed (the new
	// table's tablets unassigned), the call not yet answered.
	RestoreStepRecorded BackupStep = 4
)

func (s BackupStep) String() string {
	return [...]string{"?", "flush", "record", "recorded", "restore recorded"}[max(0, min(int(s), 4))]
}

// backupHook runs Config.BackupHook at step s.
func (m *Master) backupHook(s BackupStep) error { return stepHook(m.cfg.BackupHook, "backup:", s) }

// CreateBackup backs a table up by reference (docs/design.md 'Backups'):
// every tserver serving a tablet of the table checkpoints (each checkpoint
// begins after this call did, so its files hold every write acknowledged
// before it), then one raft command records the file lists the metadata
// holds for the table's tablets, refused unless every tablet is one such a
// checkpoint covered. A refusal (a tablet split, merged or not serving
// meanwhile) flushes again, until ctx ends.
func (m *Master) CreateBackup(ctx context.Context, req *pb.CreateBackupRequest) (*pb.CreateBackupResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateBackupName(req.Name); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if req.ExpireTimeMicros <= time.Now().UnixMicro() {
		return nil, apierr.InvalidArgument("backup %q: expire time %s is not in the future", req.Name, time.UnixMicro(req.ExpireTimeMicros).UTC().Format(time.RFC3339))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, backupTimeout)
		defer cancel()
	}
	var existing *pb.BackupMeta
	if err := m.view(func(r *meta.Reader) error {
		existing, _ = r.Backup(req.Name)
		if existing != nil {
			return nil
		}
		_, terr := r.Table(req.Table)
		return terr
	}); err != nil {
		return nil, err
	}
	if existing != nil {
		if req.RequestId != "" && existing.RequestId == req.RequestId {
			m.setSpace(existing)
			return &pb.CreateBackupResponse{Backup: existing}, nil // a retry of the call that made it
		}
		return nil, apierr.AlreadyExists("backup %q already exists", req.Name)
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if err := m.backupHook(BackupStepFlush); err != nil {
			return nil, err
		}
		flushed, ferr := m.flushTable(ctx, req.Table)
		if ferr == nil && m.cfg.BackupFlushedHook != nil {
			m.cfg.BackupFlushedHook(req.Table)
		}
		if ferr == nil {
			if err := m.backupHook(BackupStepRecord); err != nil {
				return nil, err
			}
			res, err := m.apply(ctx, &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_CreateBackup{CreateBackup: &spb.MetaCreateBackup{
				Name: req.Name, Table: req.Table, CreateTimeMicros: time.Now().UnixMicro(), ExpireTimeMicros: req.ExpireTimeMicros, Flushed: flushed, RequestId: req.RequestId}}})
			if err == nil {
				if err := m.backupHook(BackupStepRecorded); err != nil {
					return nil, err
				}
				m.log.Info("backup created", "backup", req.Name, "table", req.Table, "tablets", len(res.Backup.Tablets))
				m.events.add("backup", "backup %s of table %s created (%d tablets)", req.Name, req.Table, len(res.Backup.Tablets))
				m.setSpace(res.Backup)
				return &pb.CreateBackupResponse{Backup: res.Backup}, nil
			}
			if apierr.CodeOf(err) != codes.Aborted {
				return nil, err
			}
			m.log.Info("backup: a tablet changed or was not covered after the flushes; flushing again", "backup", req.Name, "table", req.Table, "err", err)
			ferr = err
		}
		if ctx.Err() == nil && !retryable(ferr) {
			return nil, ferr
		}
		select {
		case <-ctx.Done():
			return nil, apierr.Wrap(codes.Unavailable, ctx.Err(), "backup %q of table %q: the table's tablets could not all be flushed (last error: %v); retry", req.Name, req.Table, ferr)
		case <-time.After(wait):
		}
	}
}

// flushTable checkpoints every tserver serving a tablet of table, all at
// once, and returns the tablets those checkpoints covered. A tablet that is not
// serving makes it Unavailable (retryable): its writes may be in logs only.
func (m *Master) flushTable(ctx context.Context, table string) ([]string, error) {
	var addrs []string
	err := m.view(func(r *meta.Reader) error {
		ts, err := r.TableTablets(table, nil, 0)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, t := range ts {
			if t.State != pb.TabletState_TABLET_STATE_SERVING {
				return apierr.Unavailable("tablet %s of table %q is not serving", t.TabletId, table)
			}
			s, err := r.TServer(t.TserverUuid)
			if err != nil {
				return err
			}
			if !seen[s.Address] {
				seen[s.Address] = true
				addrs = append(addrs, s.Address)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The tservers checkpoint at once: a backup takes about one
	// checkpoint, not one per tserver.
	resps := make([]*pb.CheckpointResponse, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.callTServerOnce(ctx, addr, func(ctx context.Context, c pb.TServerClient) (err error) {
				resps[i], err = c.Checkpoint(ctx, &pb.CheckpointRequest{})
				return err
			})
		}()
	}
	wg.Wait()
	var covered []string
	for i, err := range errs {
		if err != nil {
			if ctx.Err() == nil {
				return nil, apierr.Wrap(codes.Unavailable, err, "checkpoint of tserver %s", addrs[i])
			}
			return nil, err
		}
		covered = append(covered, resps[i].TabletsCovered...)
	}
	return covered, nil
}

// GetBackup returns one backup with its tablets' files and its space.
func (m *Master) GetBackup(ctx context.Context, req *pb.GetBackupRequest) (*pb.GetBackupResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	var b *pb.BackupMeta
	if err := m.view(func(r *meta.Reader) (err error) {
		if b, err = r.Backup(req.Name); err != nil {
			return err
		}
		return backupSpace(r, b)
	}); err != nil {
		return nil, err
	}
	return &pb.GetBackupResponse{Backup: b}, nil
}

// ListBackups lists the backups (of one source table, or all) in name
// order, each with its tablets' ranges and its space but not its files.
func (m *Master) ListBackups(ctx context.Context, req *pb.ListBackupsRequest) (*pb.ListBackupsResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	var all []*pb.BackupMeta
	if err := m.view(func(r *meta.Reader) (err error) {
		if all, err = r.Backups(); err != nil {
			return err
		}
		live, err := liveFiles(r)
		setBackupSpace(all, live, nil)
		return err
	}); err != nil {
		return nil, err
	}
	resp := &pb.ListBackupsResponse{}
	for _, b := range all {
		if req.SourceTable != "" && b.SourceTable != req.SourceTable {
			continue
		}
		for _, t := range b.Tablets {
			t.Tsfiles = nil
		}
		resp.Backups = append(resp.Backups, b)
	}
	return resp, nil
}

// UpdateBackup sets a backup's expiry time.
func (m *Master) UpdateBackup(ctx context.Context, req *pb.UpdateBackupRequest) (*pb.UpdateBackupResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if req.ExpireTimeMicros <= time.Now().UnixMicro() {
		return nil, apierr.InvalidArgument("backup %q: expire time %s is not in the future", req.Name, time.UnixMicro(req.ExpireTimeMicros).UTC().Format(time.RFC3339))
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_UpdateBackup{UpdateBackup: &spb.MetaUpdateBackup{
		Name: req.Name, ExpireTimeMicros: req.ExpireTimeMicros}}})
	if err != nil {
		return nil, err
	}
	m.setSpace(res.Backup)
	return &pb.UpdateBackupResponse{Backup: res.Backup}, nil
}

// DeleteBackup deletes a backup; the blocks only it named are collected by
// their stores' orphan passes.
func (m *Master) DeleteBackup(ctx context.Context, req *pb.DeleteBackupRequest) (*pb.DeleteBackupResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if _, err := m.apply(ctx, &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_DeleteBackup{DeleteBackup: &spb.MetaDeleteBackup{Name: req.Name}}}); err != nil {
		return nil, err
	}
	m.log.Info("backup deleted", "backup", req.Name)
	m.events.add("backup", "backup %s deleted", req.Name)
	return &pb.DeleteBackupResponse{}, nil
}

// RestoreTable creates a table from a backup in one command; the leader
// loop assigns its tablets, which open the backup's files.
func (m *Master) RestoreTable(ctx context.Context, req *pb.RestoreTableRequest) (*pb.RestoreTableResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_RestoreTable{RestoreTable: &spb.MetaRestoreTable{
		Backup: req.Backup, Table: req.Table, RequestId: req.RequestId}}})
	if err != nil {
		return nil, err
	}
	if err := m.backupHook(RestoreStepRecorded); err != nil {
		return nil, err
	}
	ls.poke()
	var schema *pb.TableSchema
	if err := m.view(func(r *meta.Reader) (err error) { schema, err = r.Table(req.Table); return err }); err != nil {
		return nil, err
	}
	m.log.Info("table restored", "table", req.Table, "backup", req.Backup, "tablets", len(res.Tablets))
	m.events.add("table", "table %s restored from backup %s (%d tablets)", req.Table, req.Backup, len(res.Tablets))
	return &pb.RestoreTableResponse{Table: &pb.TableInfo{Schema: schema, TabletCount: int32(len(res.Tablets)),
		CachePriority: pb.CachePriority_CACHE_PRIORITY_MEDIUM}}, nil
}

// setSpace sets the space of a backup just recorded or changed
// (backupSpace); if the metadata cannot be read, it leaves it unset: the
// call that made the change succeeded.
func (m *Master) setSpace(b *pb.BackupMeta) {
	if err := m.view(func(r *meta.Reader) error { return backupSpace(r, b) }); err != nil {
		m.log.Warn("backup: computing its space", "backup", b.Name, "err", err)
	}
}

// SharedTSFiles answers which of a store's TSFiles a backup names or once
// named (leader read, so a compaction's commit this leader answered is
// applied).
func (m *Master) SharedTSFiles(ctx context.Context, req *pb.SharedTSFilesRequest) (*pb.SharedTSFilesResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	if req.BlockStoreUuid == "" {
		return nil, apierr.InvalidArgument("name a block_store_uuid")
	}
	resp := &pb.SharedTSFilesResponse{}
	err := m.view(func(r *meta.Reader) error {
		resp.FooterBlocks = r.SharedFiles(req.BlockStoreUuid, req.FooterBlocks)
		return nil
	})
	return resp, err
}

// runBackupExpiry deletes expired backups every Config.BackupExpiryInterval
// while this master is the ready leader, until Close.
func (m *Master) runBackupExpiry() {
	m.leaderPasses(m.cfg.BackupExpiryInterval, func(ctx context.Context, _ *leaderState) {
		m.expireBackups(ctx, time.Now())
	})
}

// expireBackups deletes every backup whose expiry time is at or before
// now, each in its own command, which deletes nothing if an UpdateBackup
// moved the time past now meanwhile.
func (m *Master) expireBackups(ctx context.Context, now time.Time) {
	var all []*pb.BackupMeta
	if err := m.view(func(r *meta.Reader) (err error) { all, err = r.Backups(); return err }); err != nil {
		m.log.Warn("backup expiry: reading the backups", "err", err)
		return
	}
	for _, b := range all {
		if b.ExpireTimeMicros > now.UnixMicro() {
			continue
		}
		_, err := m.apply(ctx, &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_DeleteBackup{DeleteBackup: &spb.MetaDeleteBackup{
			Name: b.Name, ExpiredAtMicros: now.UnixMicro()}}})
		switch {
		case err == nil:
			m.log.Info("backup expired and deleted", "backup", b.Name)
			m.events.add("backup", "backup %s expired and was deleted", b.Name)
		case apierr.CodeOf(err) == codes.FailedPrecondition, apierr.CodeOf(err) == codes.NotFound, errors.Is(err, context.Canceled):
		default:
			m.log.Warn("backup expiry: deleting", "backup", b.Name, "err", err)
		}
	}
}

// CopyBackup records a new backup naming the same files as another (a
// backup by reference is copied by reference: no byte moves), with its own
// expiry time. The copy is one command that reads the source in its own
// transaction.
func (m *Master) CopyBackup(ctx context.Context, req *pb.CopyBackupRequest) (*pb.CopyBackupResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateBackupName(req.Name); err != nil {
		return nil, err
	}
	now := time.Now().UnixMicro()
	if req.ExpireTimeMicros <= now {
		return nil, apierr.InvalidArgument("backup %q: expire time %s is not in the future", req.Name, time.UnixMicro(req.ExpireTimeMicros).UTC().Format(time.RFC3339))
	}
	res, err := m.apply(ctx, &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_RecordBackup{RecordBackup: &spb.MetaRecordBackup{
		CopyOf: req.Source, Backup: &pb.BackupMeta{Name: req.Name, CreateTimeMicros: now, ExpireTimeMicros: req.ExpireTimeMicros}}}})
	if err != nil {
		return nil, err
	}
	m.log.Info("backup copied", "backup", req.Name, "source", req.Source)
	m.events.add("backup", "backup %s copied from backup %s", req.Name, req.Source)
	m.setSpace(res.Backup)
	return &pb.CopyBackupResponse{Backup: res.Backup}, nil
}

// ImportBackup records an imported backup (docs/backup-format.md): Begin
// records it CREATING with its schema and ranges; each later call adds the
// files tservers wrote for it (TServer.ImportTSFile) and the last marks it
// READY.
func (m *Master) ImportBackup(ctx context.Context, req *pb.ImportBackupRequest) (*pb.ImportBackupResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	var cmd *spb.MetaCommand
	if b := req.Begin; b != nil {
		if err := limits.ValidateBackupName(b.Name); err != nil {
			return nil, err
		}
		if b.ExpireTimeMicros <= time.Now().UnixMicro() {
			return nil, apierr.InvalidArgument("backup %q: expire time %s is not in the future", b.Name, time.UnixMicro(b.ExpireTimeMicros).UTC().Format(time.RFC3339))
		}
		in := &pb.BackupMeta{Name: b.Name, SourceTable: b.SourceTable, Schema: b.Schema, CreateTimeMicros: b.CreateTimeMicros,
			ExpireTimeMicros: b.ExpireTimeMicros, RequestId: b.RequestId}
		for _, t := range b.Tablets {
			in.Tablets = append(in.Tablets, &pb.BackupTablet{Range: t.Range})
		}
		cmd = &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_RecordBackup{RecordBackup: &spb.MetaRecordBackup{Backup: in}}}
	} else {
		add := &spb.MetaAddBackupFiles{Name: req.Name, Ready: req.Ready}
		for _, t := range req.Tablets {
			add.Tablets = append(add.Tablets, &spb.MetaAddBackupFiles_Tablet{Index: t.Index, Tsfiles: t.Tsfiles})
		}
		cmd = &spb.MetaCommand{Version: meta.CommandVersion, Cmd: &spb.MetaCommand_AddBackupFiles{AddBackupFiles: add}}
	}
	res, err := m.apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Begin != nil:
		m.log.Info("backup import begun", "backup", req.Begin.Name, "tablets", len(req.Begin.Tablets))
	case req.Ready:
		m.log.Info("backup imported", "backup", req.Name)
		m.events.add("backup", "backup %s imported (%d tablets)", req.Name, len(res.Backup.Tablets))
		m.setSpace(res.Backup)
	}
	return &pb.ImportBackupResponse{Backup: res.Backup}, nil
}
