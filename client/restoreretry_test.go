package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "bighive/proto/bighivepb"
)

// lostRestoreMaster is a master whose first RestoreTable restores the
// table and then loses its reply (as when the leader dies right after the
// restore's record).
type lostRestoreMaster struct {
	pb.UnimplementedMasterServer
	mu       sync.Mutex
	backup   *pb.BackupMeta
	restored *pb.TableInfo // the table as it exists; nil: none
	as       *pb.TableInfo // what the lost attempt creates (nil: the backup's table)
	calls    int
	// unready: DescribeTable answers Unavailable this many times first (a
	// new leader not ready yet).
	unready int
}

func (m *lostRestoreMaster) RestoreTable(ctx context.Context, req *pb.RestoreTableRequest) (*pb.RestoreTableResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.restored != nil {
		return nil, status.Errorf(codes.AlreadyExists, "table %q already exists", req.Table)
	}
	m.restored = m.as
	if m.restored == nil {
		s := proto.Clone(m.backup.Schema).(*pb.TableSchema)
		s.Name, s.Version = req.Table, 9
		m.restored = &pb.TableInfo{Schema: s, TabletCount: int32(len(m.backup.Tablets))}
	}
	return nil, status.Error(codes.Unavailable, "reply lost")
}

func (m *lostRestoreMaster) GetBackup(ctx context.Context, req *pb.GetBackupRequest) (*pb.GetBackupResponse, error) {
	return &pb.GetBackupResponse{Backup: m.backup}, nil
}

func (m *lostRestoreMaster) DescribeTable(ctx context.Context, req *pb.DescribeTableRequest) (*pb.DescribeTableResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unready > 0 {
		m.unready--
		return nil, status.Error(codes.Unavailable, "not the ready leader")
	}
	if m.restored == nil {
		return nil, status.Errorf(codes.NotFound, "no table %q", req.Name)
	}
	return &pb.DescribeTableResponse{Table: m.restored}, nil
}

// TestRestoreTableRetryAfterLostReply: a retry of RestoreTable that finds
// the table its lost attempt restored (the backup's schema, its tablet
// count) is a success, also when looking it up failed first; a table that
// differs, or AlreadyExists on the first attempt, is AlreadyExists.
func TestRestoreTableRetryAfterLostReply(t *testing.T) {
	backup := &pb.BackupMeta{Name: "b", SourceTable: "src", Schema: &pb.TableSchema{Name: "src", Version: 3, Families: []*pb.FamilySpec{{Name: "cf"}}},
		Tablets: []*pb.BackupTablet{{}, {}}}
	for _, tc := range []struct {
		name     string
		existing *pb.TableInfo
		as       *pb.TableInfo
		unready  int
		want     codes.Code
		calls    int // RestoreTable calls that reach the master
	}{
		{name: "restored by the lost attempt", want: codes.OK, calls: 2},
		{name: "the lookup fails at first", unready: 1, want: codes.OK, calls: 3},
		{name: "the retry finds other families", want: codes.AlreadyExists, calls: 2,
			as: &pb.TableInfo{Schema: &pb.TableSchema{Name: "dst", Families: []*pb.FamilySpec{{Name: "other"}}}, TabletCount: 2}},
		{name: "the retry finds other tablets", want: codes.AlreadyExists, calls: 2,
			as: &pb.TableInfo{Schema: &pb.TableSchema{Name: "dst", Families: []*pb.FamilySpec{{Name: "cf"}}}, TabletCount: 1}},
		{name: "exists as asked before the first attempt", want: codes.AlreadyExists, calls: 1,
			existing: &pb.TableInfo{Schema: &pb.TableSchema{Name: "dst", Families: []*pb.FamilySpec{{Name: "cf"}}}, TabletCount: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			fake := &lostRestoreMaster{backup: backup, restored: tc.existing, as: tc.as, unready: tc.unready}
			info, err := dialFakeMaster(t, ctx, fake).RestoreTable(ctx, "b", "dst")
			if got := status.Code(err); got != tc.want {
				t.Fatalf("RestoreTable = %v (%v), want %v", got, err, tc.want)
			}
			if tc.want == codes.OK && (info.Name != "dst" || info.TabletCount != 2) {
				t.Fatalf("RestoreTable = %+v, want table dst of 2 tablets", info)
			}
			if fake.calls != tc.calls {
				t.Fatalf("%d RestoreTable calls reached the master, want %d", fake.calls, tc.calls)
			}
		})
	}
}
