package client_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"bighive/client"
	pb "bighive/proto/bighivepb"
)

// lostReplyMaster is a master whose first CreateTable creates the table
// and then loses its reply (the caller sees Unavailable, as after a leader
// change): a fault the real master cannot be made to produce on demand.
type lostReplyMaster struct {
	pb.UnimplementedMasterServer
	mu       sync.Mutex
	created  *pb.CreateTableRequest
	createAs *pb.CreateTableRequest // what the lost attempt creates instead of its request (another creator won)
	calls    int
}

func (m *lostReplyMaster) CreateTable(ctx context.Context, req *pb.CreateTableRequest) (*pb.CreateTableResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.created != nil {
		return nil, status.Errorf(codes.AlreadyExists, "table %q exists", req.Schema.Name)
	}
	m.created = proto.Clone(req).(*pb.CreateTableRequest)
	if m.createAs != nil {
		m.created = m.createAs
	}
	return nil, status.Error(codes.Unavailable, "reply lost")
}

func (m *lostReplyMaster) DescribeTable(ctx context.Context, req *pb.DescribeTableRequest) (*pb.DescribeTableResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.created == nil || m.created.Schema.Name != req.Name {
		return nil, status.Errorf(codes.NotFound, "no table %q", req.Name)
	}
	return &pb.DescribeTableResponse{Table: &pb.TableInfo{Schema: m.created.Schema, TabletCount: int32(len(m.created.SplitKeys) + 1)}}, nil
}

// TestCreateTableRetryAfterLostReply: a retry of CreateTable that finds
// the table its lost attempt created (same families, same tablets) is a
// success; a table that differs on the retry, or AlreadyExists on the
// first attempt, is AlreadyExists.
func TestCreateTableRetryAfterLostReply(t *testing.T) {
	spec := client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf", MaxVersions: 2}}, SplitKeys: []string{"m"}}
	for _, tc := range []struct {
		name     string
		existing *pb.CreateTableRequest // created before the call; nil: none
		createAs *pb.CreateTableRequest // created at the lost attempt instead of the request
		want     codes.Code
	}{
		{name: "created by the lost attempt", want: codes.OK},
		{name: "the retry finds other families", want: codes.AlreadyExists,
			createAs: &pb.CreateTableRequest{Schema: &pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "other"}}}}},
		{name: "exists as asked before the first attempt", want: codes.AlreadyExists,
			existing: &pb.CreateTableRequest{Schema: &pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf", MaxVersions: 2}}},
				SplitKeys: [][]byte{[]byte("m")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			fake := &lostReplyMaster{created: tc.existing, createAs: tc.createAs}
			c := dialFakeMaster(t, ctx, fake)
			err := c.CreateTable(ctx, spec)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("CreateTable = %v (%v), want %v", got, err, tc.want)
			}
			if tc.existing == nil && fake.calls != 2 {
				t.Fatalf("%d CreateTable calls reached the master, want 2 (the lost one and the retry)", fake.calls)
			}
		})
	}
}

// dialFakeMaster serves fake as the only master and dials a client to it
// that retries at once; both stop with the test.
func dialFakeMaster(t *testing.T, ctx context.Context, fake pb.MasterServer) *client.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterMasterServer(srv, fake)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := client.Dial(ctx, []string{lis.Addr().String()}, client.WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
