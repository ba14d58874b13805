package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// BackupInfo describes a backup (docs/design.md 'Backups').
type BackupInfo struct {
	Name        string
	SourceTable string
	Created     time.Time
	Expires     time.Time
	// Ready is true once recorded: CreateBackup returns only then. An
	// import in progress (ImportBackup) is not ready: it cannot be
	// restored or copied yet.
	Ready bool
	// SplitKeys are the source table's tablet boundaries at the cut; a
	// restored table starts with these tablets.
	SplitKeys []string
	// Files is the number of TSFiles the backup names (0 in ListBackups).
	Files int
	// Bytes is the size of those files (0 in ListBackups).
	Bytes int64
	// ExclusiveBytes is the size of the files only this backup keeps
	// alive (no table and no other backup names them): what deleting it
	// frees. SharedBytes is the size of its other files. Both are set in
	// every answer, ListBackups' included.
	ExclusiveBytes int64
	SharedBytes    int64
}

// requestID names one call over its retries.
func requestID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

func backupInfo(b *pb.BackupMeta) BackupInfo {
	info := BackupInfo{
		Name:        b.Name,
		SourceTable: b.SourceTable,
		Created:     time.UnixMicro(b.CreateTimeMicros),
		Expires:     time.UnixMicro(b.ExpireTimeMicros),
		Ready:       b.State == pb.BackupState_BACKUP_STATE_READY,

		ExclusiveBytes: b.ExclusiveBytes,
		SharedBytes:    b.SharedBytes,
	}
	for i, t := range b.Tablets {
		if i > 0 {
			info.SplitKeys = append(info.SplitKeys, string(t.Range.GetStartRow()))
		}
		for _, f := range t.Tsfiles {
			info.Files++
			info.Bytes += f.SizeBytes
		}
	}
	return info
}

// CreateBackup backs table up as backup name, kept until expires: every
// write acknowledged before the call is in it. It flushes the table's
// tablets and records their files, which the backup shares with the table
// (no data is copied). AlreadyExists if the name is taken.
func (c *Client) CreateBackup(ctx context.Context, table, name string, expires time.Time) (BackupInfo, error) {
	prefix := errorPrefix("create backup %q of table %q", name, table)
	if err := limits.ValidateBackupName(name); err != nil {
		return BackupInfo{}, statusError(err, prefix)
	}
	// One request id for every attempt: a retry whose first attempt
	// recorded the backup (its answer lost) gets it, not AlreadyExists.
	req := &pb.CreateBackupRequest{Name: name, Table: table, ExpireTimeMicros: expires.UnixMicro(), RequestId: requestID()}
	var resp *pb.CreateBackupResponse
	err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.CreateBackup(ctx, req)
		return err
	})
	if err != nil {
		return BackupInfo{}, err
	}
	return backupInfo(resp.Backup), nil
}

// GetBackup describes one backup. NotFound if there is none.
func (c *Client) GetBackup(ctx context.Context, name string) (BackupInfo, error) {
	var resp *pb.GetBackupResponse
	err := c.callMaster(ctx, errorPrefix("get backup %q", name), func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.GetBackup(ctx, &pb.GetBackupRequest{Name: name})
		return err
	})
	if err != nil {
		return BackupInfo{}, err
	}
	return backupInfo(resp.Backup), nil
}

// ListBackups lists the backups of table ("" for every table) in name order.
func (c *Client) ListBackups(ctx context.Context, table string) ([]BackupInfo, error) {
	var resp *pb.ListBackupsResponse
	err := c.callMaster(ctx, errorPrefix("list backups"), func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.ListBackups(ctx, &pb.ListBackupsRequest{SourceTable: table})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]BackupInfo, 0, len(resp.Backups))
	for _, b := range resp.Backups {
		out = append(out, backupInfo(b))
	}
	return out, nil
}

// UpdateBackup sets when a backup expires (in the future).
func (c *Client) UpdateBackup(ctx context.Context, name string, expires time.Time) (BackupInfo, error) {
	var resp *pb.UpdateBackupResponse
	err := c.callMaster(ctx, errorPrefix("update backup %q", name), func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.UpdateBackup(ctx, &pb.UpdateBackupRequest{Name: name, ExpireTimeMicros: expires.UnixMicro()})
		return err
	})
	if err != nil {
		return BackupInfo{}, err
	}
	return backupInfo(resp.Backup), nil
}

// DeleteBackup deletes a backup; tables restored from it keep their data.
func (c *Client) DeleteBackup(ctx context.Context, name string) error {
	return c.callMaster(ctx, errorPrefix("delete backup %q", name), func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.DeleteBackup(ctx, &pb.DeleteBackupRequest{Name: name})
		return err
	})
}

// RestoreTable creates table (which must not exist) from a backup: its
// tablets start at the backup's split points with the backup's files. It
// returns once the table exists; its tablets serve as soon as the master
// assigns them (WaitServing in the test harnesses). Every attempt carries
// one request id, so a retry whose earlier attempt restored the table (its
// answer lost, by this client or by a master forwarding the call) is
// answered the table, not AlreadyExists.
func (c *Client) RestoreTable(ctx context.Context, backup, table string) (TableInfo, error) {
	prefix := errorPrefix("restore backup %q as table %q", backup, table)
	if err := limits.ValidateTableName(table); err != nil {
		return TableInfo{}, statusError(err, prefix)
	}
	req := &pb.RestoreTableRequest{Backup: backup, Table: table, RequestId: requestID()}
	var resp *pb.RestoreTableResponse
	err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.RestoreTable(ctx, req)
		return err
	})
	if err != nil {
		return TableInfo{}, err
	}
	return tableInfo(resp.Table), nil
}

// CopyBackup makes backup name a copy of backup source, kept until
// expires. The copy names the same files (nothing is copied) and outlives
// the source.
func (c *Client) CopyBackup(ctx context.Context, source, name string, expires time.Time) (BackupInfo, error) {
	prefix := errorPrefix("copy backup %q as %q", source, name)
	if err := limits.ValidateBackupName(name); err != nil {
		return BackupInfo{}, statusError(err, prefix)
	}
	var resp *pb.CopyBackupResponse
	err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.CopyBackup(ctx, &pb.CopyBackupRequest{Source: source, Name: name, ExpireTimeMicros: expires.UnixMicro()})
		return err
	})
	if err != nil {
		return BackupInfo{}, err
	}
	return backupInfo(resp.Backup), nil
}
