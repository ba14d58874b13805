package frontend

import (
	"context"
	"strings"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"bighive/client"
)

// Backups (docs/design.md 'Backups', docs/bigtable-api.md 'Backups'). A
// backup's resource name is projects/{p}/instances/{i}/clusters/{c}/backups/{b};
// as for tables any project and instance are accepted, and any cluster:
// Bighive has one cluster, so a backup is found under every cluster name,
// and an answer names it under the cluster the request named ("-" in
// ListBackups: every cluster, and the answers say "-" too).

// backupName is a parsed backup resource name.
type backupName struct {
	project, instance, cluster, backup string
}

func (n backupName) clusterPath() string {
	return "projects/" + n.project + "/instances/" + n.instance + "/clusters/" + n.cluster
}

func (n backupName) String() string { return n.clusterPath() + "/backups/" + n.backup }

// parseCluster parses projects/{p}/instances/{i}/clusters/{c}.
func parseCluster(name string) (backupName, error) {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[2] != "instances" || p[4] != "clusters" || p[1] == "" || p[3] == "" || p[5] == "" {
		return backupName{}, reqErr(codes.InvalidArgument, "malformed cluster name %q: want projects/{project}/instances/{instance}/clusters/{cluster}", name)
	}
	return backupName{project: p[1], instance: p[3], cluster: p[5]}, nil
}

// parseBackup parses projects/{p}/instances/{i}/clusters/{c}/backups/{b}.
func parseBackup(name string) (backupName, error) {
	i := strings.LastIndex(name, "/backups/")
	if i < 0 {
		return backupName{}, reqErr(codes.InvalidArgument, "malformed backup name %q: want projects/{project}/instances/{instance}/clusters/{cluster}/backups/{backup}", name)
	}
	n, err := parseCluster(name[:i])
	if err != nil || name[i+len("/backups/"):] == "" || strings.Contains(name[i+len("/backups/"):], "/") {
		return backupName{}, reqErr(codes.InvalidArgument, "malformed backup name %q: want projects/{project}/instances/{instance}/clusters/{cluster}/backups/{backup}", name)
	}
	n.backup = name[i+len("/backups/"):]
	return n, nil
}

// backupCall is a call on the backup named name.
func backupCall(method, name string) call {
	c := call{method: method, entry: -1}
	if _, err := parseBackup(name); err == nil {
		c.kind, c.name = "backup", name
	}
	return c
}

// backupProto is the API's view of a backup, named under n's cluster.
func backupProto(n backupName, b client.BackupInfo) *adminpb.Backup {
	state := adminpb.Backup_CREATING
	if b.Ready {
		state = adminpb.Backup_READY
	}
	n.backup = b.Name
	return &adminpb.Backup{
		Name:        n.String(),
		SourceTable: tableName{project: n.project, instance: n.instance, table: b.SourceTable}.String(),
		// The cut is taken at once: the backup starts and ends when it
		// is recorded.
		StartTime:  timestamppb.New(b.Created),
		EndTime:    timestamppb.New(b.Created),
		ExpireTime: timestamppb.New(b.Expires),
		State:      state,
		BackupType: adminpb.Backup_STANDARD,
		// The size of the files it names, those it shares with tables or
		// other backups included (Bighive keeps no copy of its own).
		SizeBytes: b.ExclusiveBytes + b.SharedBytes,
		// Bighive does not encrypt at rest; the official client needs the
		// field set.
		EncryptionInfo: &adminpb.EncryptionInfo{EncryptionType: adminpb.EncryptionInfo_ENCRYPTION_TYPE_UNSPECIFIED},
	}
}

// CreateBackup backs up a table as a long-running operation: the tablets
// are flushed and their files recorded (no data is copied), usually well
// within the request, whose Operation is then already done.
func (a *adminServer) CreateBackup(ctx context.Context, req *adminpb.CreateBackupRequest) (*longrunningpb.Operation, error) {
	c := backupCall("CreateBackup", req.GetParent()+"/backups/"+req.GetBackupId())
	n, err := parseCluster(req.GetParent())
	if err == nil && req.GetBackupId() == "" {
		err = reqErr(codes.InvalidArgument, "backup_id is empty")
	}
	var src tableName
	if err == nil {
		src, err = parseTable(req.GetBackup().GetSourceTable())
	}
	if err == nil && !req.GetBackup().GetExpireTime().IsValid() {
		err = reqErr(codes.InvalidArgument, "backup.expire_time is missing or invalid")
	}
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	n.backup = req.GetBackupId()
	expires := req.GetBackup().GetExpireTime().AsTime()
	meta := &adminpb.CreateBackupMetadata{Name: n.String(), SourceTable: src.String(), StartTime: timestamppb.Now()}
	op, err := a.s.ops.start(ctx, a.s.opWait, n.String(), meta, func(ctx context.Context) (proto.Message, error) {
		b, err := a.s.c.CreateBackup(ctx, src.table, n.backup, expires)
		if err != nil {
			return nil, err
		}
		a.s.log.Info("frontend: created backup", "backup", n.backup, "table", src.table)
		return backupProto(n, b), nil
	}, a.s, c)
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	return op, nil
}

// GetBackup describes a backup.
func (a *adminServer) GetBackup(ctx context.Context, req *adminpb.GetBackupRequest) (*adminpb.Backup, error) {
	c := backupCall("GetBackup", req.GetName())
	n, err := parseBackup(req.GetName())
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	b, err := a.s.c.GetBackup(ctx, n.backup)
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	return backupProto(n, b), nil
}

// ListBackups lists every backup, in name order, in one page; filter and
// order_by are refused (Unimplemented).
func (a *adminServer) ListBackups(ctx context.Context, req *adminpb.ListBackupsRequest) (*adminpb.ListBackupsResponse, error) {
	c := call{method: "ListBackups", entry: -1}
	n, err := parseCluster(req.GetParent())
	if err == nil && (req.GetFilter() != "" || req.GetOrderBy() != "") {
		err = reqErr(codes.Unimplemented, "filter and order_by are not supported; list every backup")
	}
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	all, err := a.s.c.ListBackups(ctx, "")
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	resp := &adminpb.ListBackupsResponse{}
	for _, b := range all {
		resp.Backups = append(resp.Backups, backupProto(n, b))
	}
	return resp, nil
}

// UpdateBackup changes a backup's expire_time, the one field the API lets
// change.
func (a *adminServer) UpdateBackup(ctx context.Context, req *adminpb.UpdateBackupRequest) (*adminpb.Backup, error) {
	c := backupCall("UpdateBackup", req.GetBackup().GetName())
	n, err := parseBackup(req.GetBackup().GetName())
	if err == nil {
		paths := req.GetUpdateMask().GetPaths()
		if len(paths) != 1 || paths[0] != "expire_time" {
			err = reqErr(codes.InvalidArgument, "update_mask %v: only expire_time can be updated", paths)
		} else if !req.GetBackup().GetExpireTime().IsValid() {
			err = reqErr(codes.InvalidArgument, "backup.expire_time is missing or invalid")
		}
	}
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	b, err := a.s.c.UpdateBackup(ctx, n.backup, req.GetBackup().GetExpireTime().AsTime())
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	return backupProto(n, b), nil
}

// DeleteBackup deletes a backup; tables restored from it keep their data.
func (a *adminServer) DeleteBackup(ctx context.Context, req *adminpb.DeleteBackupRequest) (*emptypb.Empty, error) {
	c := backupCall("DeleteBackup", req.GetName())
	n, err := parseBackup(req.GetName())
	if err == nil {
		err = a.s.c.DeleteBackup(ctx, n.backup)
	}
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	a.s.log.Info("frontend: deleted backup", "backup", n.backup)
	return &emptypb.Empty{}, nil
}

// RestoreTable creates a table from a backup as a long-running operation,
// done once the table exists (its tablets serve as soon as they are
// assigned, and the data calls wait for that).
func (a *adminServer) RestoreTable(ctx context.Context, req *adminpb.RestoreTableRequest) (*longrunningpb.Operation, error) {
	c := backupCall("RestoreTable", req.GetBackup())
	parent, err := parseInstance(req.GetParent())
	var bn backupName
	if err == nil {
		bn, err = parseBackup(req.GetBackup())
	}
	if err == nil && req.GetTableId() == "" {
		err = reqErr(codes.InvalidArgument, "table_id is empty")
	}
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	tn := tableName{project: parent.project, instance: parent.instance, table: req.GetTableId()}
	// The API names a second operation, the optimization of the restored
	// table after the restore; a restored Bighive table is served from the
	// backup's files as they are and needs none, so that operation is
	// done, at 100 %, as soon as it is named.
	now := timestamppb.Now()
	optimize, err := a.s.ops.start(ctx, a.s.opWait, tn.String(), &adminpb.OptimizeRestoredTableMetadata{Name: tn.String(),
		Progress: &adminpb.OperationProgress{ProgressPercent: 100, StartTime: now, EndTime: now}},
		func(context.Context) (proto.Message, error) { return &emptypb.Empty{}, nil }, a.s, c)
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	meta := &adminpb.RestoreTableMetadata{Name: tn.String(), SourceType: adminpb.RestoreSourceType_BACKUP,
		SourceInfo:                 &adminpb.RestoreTableMetadata_BackupInfo{BackupInfo: &adminpb.BackupInfo{Backup: bn.backup}},
		OptimizeTableOperationName: optimize.Name}
	op, err := a.s.ops.start(ctx, a.s.opWait, tn.String(), meta, func(ctx context.Context) (proto.Message, error) {
		info, err := a.s.c.RestoreTable(ctx, bn.backup, tn.table)
		if err != nil {
			return nil, err
		}
		a.s.log.Info("frontend: restored table", "table", tn.table, "backup", bn.backup)
		t := tableProto(tn, info, adminpb.Table_SCHEMA_VIEW)
		t.RestoreInfo = &adminpb.RestoreInfo{SourceType: adminpb.RestoreSourceType_BACKUP,
			SourceInfo: &adminpb.RestoreInfo_BackupInfo{BackupInfo: &adminpb.BackupInfo{Backup: bn.backup}}}
		return t, nil
	}, a.s, c)
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	return op, nil
}

// CopyBackup copies a backup as a long-running operation: the copy names
// the source's files (nothing is copied), so it is done at once. The
// source may be named under any cluster, project and instance (Bighive
// has one cluster); the copy is named under the request's parent.
func (a *adminServer) CopyBackup(ctx context.Context, req *adminpb.CopyBackupRequest) (*longrunningpb.Operation, error) {
	c := backupCall("CopyBackup", req.GetParent()+"/backups/"+req.GetBackupId())
	n, err := parseCluster(req.GetParent())
	if err == nil && req.GetBackupId() == "" {
		err = reqErr(codes.InvalidArgument, "backup_id is empty")
	}
	var src backupName
	if err == nil {
		src, err = parseBackup(req.GetSourceBackup())
	}
	if err == nil && !req.GetExpireTime().IsValid() {
		err = reqErr(codes.InvalidArgument, "expire_time is missing or invalid")
	}
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	n.backup = req.GetBackupId()
	expires := req.GetExpireTime().AsTime()
	meta := &adminpb.CopyBackupMetadata{Name: n.String(), SourceBackupInfo: &adminpb.BackupInfo{Backup: src.String()},
		Progress: &adminpb.OperationProgress{StartTime: timestamppb.Now()}}
	op, err := a.s.ops.start(ctx, a.s.opWait, n.String(), meta, func(ctx context.Context) (proto.Message, error) {
		b, err := a.s.c.CopyBackup(ctx, src.backup, n.backup, expires)
		if err != nil {
			return nil, err
		}
		a.s.log.Info("frontend: copied backup", "backup", n.backup, "source", src.backup)
		return backupProto(n, b), nil
	}, a.s, c)
	if err != nil {
		return nil, a.s.apiErr(ctx, c, err)
	}
	return op, nil
}
