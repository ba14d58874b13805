package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "bighive/proto/bighivepb"
)

// lostRestoreMaster is a master whose first RestoreTable restores the
// table and then loses its reply (as when the leader dies right after the
// restore's record), and which answers a restore over an existing table as
// the metadata does: the table when the request id is the one that
// restored it, AlreadyExists otherwise.
type lostRestoreMaster struct {
	pb.UnimplementedMasterServer
	mu         sync.Mutex
	restoredBy string // the request id that restored the table; "": none
	exists     bool   // the table exists
	ids        []string
}

func (m *lostRestoreMaster) RestoreTable(ctx context.Context, req *pb.RestoreTableRequest) (*pb.RestoreTableResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = append(m.ids, req.RequestId)
	table := &pb.TableInfo{Schema: &pb.TableSchema{Name: req.Table, Version: 9}, TabletCount: 2}
	if m.exists {
		if req.RequestId != "" && req.RequestId == m.restoredBy {
			return &pb.RestoreTableResponse{Table: table}, nil
		}
		return nil, status.Errorf(codes.AlreadyExists, "table %q already exists", req.Table)
	}
	m.exists, m.restoredBy = true, req.RequestId
	return nil, status.Error(codes.Unavailable, "reply lost")
}

// TestRestoreTableRetryAfterLostReply: every attempt of one RestoreTable
// carries the same request id, so the retry after a lost reply is answered
// the table the first attempt restored; a table that existed before the
// call is AlreadyExists.
func TestRestoreTableRetryAfterLostReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
		want   codes.Code
		calls  int // RestoreTable calls that reach the master
	}{
		{name: "restored by the lost attempt", want: codes.OK, calls: 2},
		{name: "exists before the first attempt", exists: true, want: codes.AlreadyExists, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			fake := &lostRestoreMaster{exists: tc.exists, restoredBy: "someone else's"}
			if !tc.exists {
				fake.restoredBy = ""
			}
			info, err := dialFakeMaster(t, ctx, fake).RestoreTable(ctx, "b", "dst")
			if got := status.Code(err); got != tc.want {
				t.Fatalf("RestoreTable = %v (%v), want %v", got, err, tc.want)
			}
			if tc.want == codes.OK && (info.Name != "dst" || info.TabletCount != 2) {
				t.Fatalf("RestoreTable = %+v, want table dst of 2 tablets", info)
			}
			if len(fake.ids) != tc.calls {
				t.Fatalf("%d RestoreTable calls reached the master, want %d", len(fake.ids), tc.calls)
			}
			for _, id := range fake.ids {
				if id == "" || id != fake.ids[0] {
					t.Fatalf("request ids of the attempts %q: want one, not empty, on every attempt", fake.ids)
				}
			}
		})
	}
}
