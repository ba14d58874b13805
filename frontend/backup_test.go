package frontend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// backupValues reads every row of table through the official client as
// key → value of cf:v.
func backupValues(t *testing.T, ctx context.Context, bt *bigtable.Client, table string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := bt.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, it := range r["cf"] {
			got[r.Key()] = string(it.Value)
		}
		return true
	})
	if err != nil {
		t.Fatalf("ReadRows(%s): %v", table, err)
	}
	return got
}

// TestBackupsOfficialClient: the official Go admin client's backup calls
// against the frontend, CreateBackup and RestoreTable through the
// long-running operations (done at once, and polled with GetOperation).
func TestBackupsOfficialClient(t *testing.T) {
	t.Parallel()
	f := startAdmin(t)
	ctx := testCtx(t)
	if err := f.adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", SplitKeys: []string{"k5"},
		Families: map[string]bigtable.GCPolicy{"cf": bigtable.MaxVersionsPolicy(1)}}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	bt, err := bigtable.NewClient(ctx, "proj", "inst", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 10 {
		m := bigtable.NewMutation()
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		m.Set("cf", "v", bigtable.Now(), []byte(v))
		if err := bt.Open("t").Apply(ctx, k, m); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	expire := time.Now().Add(24 * time.Hour).Truncate(time.Microsecond)
	if err := f.adm.CreateBackup(ctx, "t", "c1", "b1", expire); err != nil {
		t.Fatalf("CreateBackup: %v", err)
	}
	// A write after the backup is not in it.
	m := bigtable.NewMutation()
	m.Set("cf", "v", bigtable.Now(), []byte("after"))
	if err := bt.Open("t").Apply(ctx, "k0", m); err != nil {
		t.Fatal(err)
	}
	// Operations still running when the request returns (a frontend over
	// the same cluster that answers at once): a caller polls GetOperation,
	// as the official client does.
	srv := New(f.c, nil)
	srv.opWait = 0
	noWait, err := grpc.NewClient(listenAPI(t, srv), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noWait.Close() })
	admNoWait, err := bigtable.NewAdminClient(ctx, "proj", "inst", option.WithGRPCConn(noWait))
	if err != nil {
		t.Fatal(err)
	}
	op, err := adminpb.NewBigtableTableAdminClient(noWait).CreateBackup(ctx, &adminpb.CreateBackupRequest{Parent: "projects/proj/instances/inst/clusters/c1", BackupId: "b2",
		Backup: &adminpb.Backup{SourceTable: "projects/proj/instances/inst/tables/t", ExpireTime: timestamppb.New(expire)}})
	if err != nil || op.Done {
		t.Fatalf("CreateBackup with no wait = %v, %v; want an operation not done", op, err)
	}
	ops := longrunningpb.NewOperationsClient(noWait)
	op = pollOperation(t, ctx, ops, op)
	var b2 adminpb.Backup
	if err := op.GetResponse().UnmarshalTo(&b2); err != nil || b2.Name != "projects/proj/instances/inst/clusters/c1/backups/b2" || b2.State != adminpb.Backup_READY {
		t.Fatalf("operation's response %v %v", &b2, err)
	}
	// A restore names its optimization operation, done at once.
	op, err = adminpb.NewBigtableTableAdminClient(noWait).RestoreTable(ctx, &adminpb.RestoreTableRequest{Parent: "projects/proj/instances/inst",
		TableId: "r0", Source: &adminpb.RestoreTableRequest_Backup{Backup: "projects/proj/instances/inst/clusters/c1/backups/b2"}})
	if err != nil {
		t.Fatalf("RestoreTable: %v", err)
	}
	var rmeta adminpb.RestoreTableMetadata
	if err := op.GetMetadata().UnmarshalTo(&rmeta); err != nil || rmeta.OptimizeTableOperationName == "" {
		t.Fatalf("RestoreTable's metadata %v (%v): no optimize_table_operation_name", &rmeta, err)
	}
	op = pollOperation(t, ctx, ops, op)
	if op.GetError() != nil {
		t.Fatalf("RestoreTable's operation failed: %v", op.GetError())
	}
	opt, err := ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: rmeta.OptimizeTableOperationName})
	if err != nil {
		t.Fatalf("GetOperation of the optimization: %v", err)
	}
	var ometa adminpb.OptimizeRestoredTableMetadata
	if err := opt.GetMetadata().UnmarshalTo(&ometa); err != nil || !opt.Done || opt.GetError() != nil ||
		ometa.Name != "projects/proj/instances/inst/tables/r0" || ometa.GetProgress().GetProgressPercent() != 100 {
		t.Fatalf("the optimization operation = %v, metadata %v (%v); want done at 100 %% for table r0", opt, &ometa, err)
	}
	if err := admNoWait.CreateBackup(ctx, "t", "other-cluster", "b3", expire); err != nil {
		t.Fatalf("CreateBackup answered before it ended: %v", err)
	}

	info, err := f.adm.BackupInfo(ctx, "c1", "b1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "b1" || info.SourceTable != "t" || info.State != "READY" || !info.ExpireTime.Equal(expire) ||
		info.StartTime.IsZero() || info.EndTime.Before(info.StartTime) || info.SizeBytes <= 0 {
		t.Fatalf("BackupInfo = %+v", info)
	}
	var names []string
	it := f.adm.Backups(ctx, "-")
	for {
		b, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, b.Name+"<"+b.SourceTable)
	}
	if !slices.Equal(names, []string{"b1<t", "b2<t", "b3<t"}) {
		t.Fatalf("Backups = %v", names)
	}
	later := expire.Add(time.Hour)
	if err := f.adm.UpdateBackup(ctx, "c1", "b1", later); err != nil {
		t.Fatal(err)
	}
	if info, err := f.adm.BackupInfo(ctx, "c1", "b1"); err != nil || !info.ExpireTime.Equal(later) {
		t.Fatalf("BackupInfo after UpdateBackup = %+v %v", info, err)
	}

	if err := f.adm.RestoreTable(ctx, "r", "c1", "b1"); err != nil {
		t.Fatalf("RestoreTable: %v", err)
	}
	if got := backupValues(t, ctx, bt, "r"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored rows %v, want %v", got, want)
	}
	// CopyBackup: the copy (named in another project, instance and
	// cluster, all accepted) outlives its source and restores the same
	// rows.
	if err := f.adm.CopyBackup(ctx, "c1", "b1", "proj2", "inst2", "c9", "b1-copy", later); err != nil {
		t.Fatalf("CopyBackup: %v", err)
	}
	if err := f.adm.DeleteBackup(ctx, "c1", "b1"); err != nil {
		t.Fatal(err)
	}
	if info, err := f.adm.BackupInfo(ctx, "c9", "b1-copy"); err != nil || info.SourceTable != "t" || !info.ExpireTime.Equal(later) || info.State != "READY" {
		t.Fatalf("BackupInfo of the copy = %+v %v", info, err)
	}
	if err := f.adm.RestoreTable(ctx, "r2", "c1", "b1-copy"); err != nil {
		t.Fatalf("RestoreTable of the copy: %v", err)
	}
	if got := backupValues(t, ctx, bt, "r2"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows restored from the copy %v, want %v", got, want)
	}
	// Polled: the operation's metadata names the copy and its source.
	op, err = adminpb.NewBigtableTableAdminClient(noWait).CopyBackup(ctx, &adminpb.CopyBackupRequest{Parent: "projects/proj/instances/inst/clusters/c1",
		BackupId: "b2-copy", SourceBackup: "projects/proj/instances/inst/clusters/c1/backups/b2", ExpireTime: timestamppb.New(expire)})
	if err != nil {
		t.Fatal(err)
	}
	var cmeta adminpb.CopyBackupMetadata
	if err := op.GetMetadata().UnmarshalTo(&cmeta); err != nil || cmeta.Name != "projects/proj/instances/inst/clusters/c1/backups/b2-copy" ||
		cmeta.GetSourceBackupInfo().GetBackup() != "projects/proj/instances/inst/clusters/c1/backups/b2" {
		t.Fatalf("CopyBackup metadata %v %v", &cmeta, err)
	}
	op = pollOperation(t, ctx, ops, op)
	if op.GetError() != nil {
		t.Fatalf("CopyBackup operation failed: %v", op.GetError())
	}

	// A refusal names the method and the backup's resource name, not
	// Bighive's layers.
	_, err = f.adm.BackupInfo(ctx, "c1", "b1")
	if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, `GetBackup of backup "projects/proj/instances/inst/clusters/c1/backups/b1": `) ||
		strings.Contains(msg, "client:") || strings.Contains(msg, "master") {
		t.Errorf("GetBackup of a deleted backup: %q", msg)
	}
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"info of a deleted backup", func() error { _, err := f.adm.BackupInfo(ctx, "c1", "b1"); return err }(), codes.NotFound},
		{"delete a deleted backup", f.adm.DeleteBackup(ctx, "c1", "b1"), codes.NotFound},
		{"backup of a missing table", f.adm.CreateBackup(ctx, "nope", "c1", "b9", expire), codes.NotFound},
		{"backup that exists", f.adm.CreateBackup(ctx, "t", "c1", "b2", expire), codes.AlreadyExists},
		{"expiry in the past", f.adm.CreateBackup(ctx, "t", "c1", "b4", time.Now().Add(-time.Hour)), codes.InvalidArgument},
		{"restore over a table", f.adm.RestoreTable(ctx, "t", "c1", "b2"), codes.AlreadyExists},
		{"restore a missing backup", f.adm.RestoreTable(ctx, "x", "c1", "b1"), codes.NotFound},
		{"copy of a missing backup", f.adm.CopyBackup(ctx, "c1", "b1", "proj", "inst", "c1", "b5", expire), codes.NotFound},
		{"copy onto a backup that exists", f.adm.CopyBackup(ctx, "c1", "b2", "proj", "inst", "c1", "b3", expire), codes.AlreadyExists},
		{"copy expiring in the past", f.adm.CopyBackup(ctx, "c1", "b2", "proj", "inst", "c1", "b6", time.Now().Add(-time.Hour)), codes.InvalidArgument},
		{"unknown operation", func() error {
			_, err := ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: "operations/nope"})
			return err
		}(), codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status.Code(tc.err) != tc.want {
				t.Fatalf("%v, want %v", tc.err, tc.want)
			}
		})
	}
}

// pollOperation polls op with GetOperation until it is done, as the
// official clients do, and returns it done.
func pollOperation(t *testing.T, ctx context.Context, ops longrunningpb.OperationsClient, op *longrunningpb.Operation) *longrunningpb.Operation {
	t.Helper()
	for !op.Done {
		time.Sleep(10 * time.Millisecond)
		var err error
		if op, err = ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: op.Name}); err != nil {
			t.Fatal(err)
		}
	}
	return op
}
