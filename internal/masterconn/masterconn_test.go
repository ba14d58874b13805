package masterconn

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// master answers ListTables as the leader, or refuses with a NotLeader
// hint naming leaderAddr.
type master struct {
	pb.UnimplementedMasterServer
	leader     bool
	leaderAddr *string
	calls      atomic.Int32
}

func (m *master) ListTables(ctx context.Context, _ *pb.ListTablesRequest) (*pb.ListTablesResponse, error) {
	m.calls.Add(1)
	if !m.leader {
		return nil, apierr.NotLeader(*m.leaderAddr)
	}
	return &pb.ListTablesResponse{Tables: []*pb.TableInfo{{Schema: &pb.TableSchema{Name: "t"}}}}, nil
}

func (m *master) DeleteTable(ctx context.Context, r *pb.DeleteTableRequest) (*pb.DeleteTableResponse, error) {
	return nil, apierr.NotFound("table %q does not exist", r.Name)
}

func serve(t *testing.T, m *master) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(apierr.UnaryServerInterceptor(nil)))
	pb.RegisterMasterServer(s, m)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func TestFollowsLeaderHint(t *testing.T) {
	var leaderAddr string
	follower := &master{leaderAddr: &leaderAddr}
	leader := &master{leader: true, leaderAddr: &leaderAddr}
	fa := serve(t, follower)
	leaderAddr = serve(t, leader)

	c, err := New([]string{fa, leaderAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		var resp *pb.ListTablesResponse
		err := c.Call(ctx, func(ctx context.Context, m pb.MasterClient) (err error) {
			resp, err = m.ListTables(ctx, &pb.ListTablesRequest{})
			return err
		})
		if err != nil || len(resp.Tables) != 1 {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := follower.calls.Load(); n != 1 {
		t.Fatalf("follower got %d calls; after the first redirect calls should go to the leader", n)
	}
	// Errors other than Unavailable come back unchanged, without retries.
	err = c.Call(ctx, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.DeleteTable(ctx, &pb.DeleteTableRequest{Name: "x"})
		return err
	})
	if apierr.CodeOf(err) != codes.NotFound {
		t.Fatalf("DeleteTable: %v, want NotFound", err)
	}
}

func TestNoLeaderRetriesUntilDeadline(t *testing.T) {
	none := ""
	a := serve(t, &master{leaderAddr: &none})
	b := serve(t, &master{leaderAddr: &none})
	c, _ := New([]string{a, b})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.Call(ctx, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.ListTables(ctx, &pb.ListTablesRequest{})
		return err
	})
	if apierr.CodeOf(err) != codes.Unavailable && apierr.CodeOf(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want Unavailable or DeadlineExceeded", err)
	}
}
