package masterconn

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// master answers ListTables as the leader, refuses with a NotLeader hint
// naming leaderAddr, or (hang) blocks until the test ends, like a master
// whose process stopped after reading the request.
type master struct {
	pb.UnimplementedMasterServer
	leader     bool
	hang       chan struct{}
	leaderAddr *string
	calls      atomic.Int32
}

func (m *master) ListTables(ctx context.Context, _ *pb.ListTablesRequest) (*pb.ListTablesResponse, error) {
	m.calls.Add(1)
	if m.hang != nil {
		<-m.hang // ignores ctx: a hung process answers nothing
		return nil, apierr.Unavailable("resumed")
	}
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
	if m.hang != nil {
		t.Cleanup(func() { close(m.hang) }) // before s.Stop, which waits for handlers
	}
	return lis.Addr().String()
}

// frozen is a listener whose process never runs: the kernel accepts the
// connection, and nothing ever answers (a SIGSTOPped master).
func frozen(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return lis.Addr().String()
}

// refusing is an address nothing listens on.
func refusing(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// garbage accepts connections, writes bytes that are not HTTP/2 and
// closes them: a transport that fails below gRPC.
func garbage(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\nnot grpc"))
			c.Close()
		}
	}()
	return lis.Addr().String()
}

func listTables(ctx context.Context, c *Conn) error {
	return c.Call(ctx, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.ListTables(ctx, &pb.ListTablesRequest{})
		if err == nil && len(resp.Tables) != 1 {
			return apierr.InvalidArgument("odd reply %v", resp)
		}
		return err
	})
}

func TestFollowsLeaderHint(t *testing.T) {
	var leaderAddr string
	follower := &master{leaderAddr: &leaderAddr}
	leader := &master{leader: true, leaderAddr: &leaderAddr}
	fa := serve(t, follower)
	leaderAddr = serve(t, leader)

	c, err := New([]string{fa, leaderAddr}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := listTables(ctx, c); err != nil {
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

// TestRotatesOnAttemptDeadline: the first master never answers (a hung
// gRPC handler, or a process that accepts connections and runs nothing);
// each call gives up on it after one attempt timeout and is answered by
// the leader, and later calls go to the leader first.
func TestRotatesOnAttemptDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		hung func(t *testing.T) string
	}{
		{"hung handler", func(t *testing.T) string { return serve(t, &master{hang: make(chan struct{})}) }},
		{"frozen process", frozen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var leaderAddr string
			leader := &master{leader: true, leaderAddr: &leaderAddr}
			leaderAddr = serve(t, leader)
			c, err := New([]string{tc.hung(t), leaderAddr}, Options{AttemptTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The call's own deadline is far beyond the attempt timeout: it
			// must not be spent on the hung master.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := 0; i < 3; i++ {
				if err := listTables(ctx, c); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if got := c.Leader(); got != leaderAddr {
				t.Fatalf("next call starts at %s, want the leader %s", got, leaderAddr)
			}
			if n := leader.calls.Load(); n != 3 {
				t.Fatalf("leader answered %d calls, want 3", n)
			}
		})
	}
}

// TestRotatesWhenTheCallEndsWithTheAttempt: a caller whose deadline is no
// longer than one attempt (a client's location lookup inside its own
// attempt) fails its call on the hung master, but the next call starts at
// another master instead of the hung one again.
func TestRotatesWhenTheCallEndsWithTheAttempt(t *testing.T) {
	var leaderAddr string
	leader := &master{leader: true, leaderAddr: &leaderAddr}
	leaderAddr = serve(t, leader)
	c, err := New([]string{frozen(t), leaderAddr}, Options{AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return listTables(ctx, c)
	}
	if err := call(); apierr.CodeOf(err) != codes.DeadlineExceeded {
		t.Fatalf("first call, on the hung master: %v, want DeadlineExceeded", err)
	}
	if err := call(); err != nil {
		t.Fatalf("second call started at the hung master again: %v", err)
	}
}

// TestShortCallerDoesNotRotate: callers whose deadline left a master no
// fair time to answer (fairAttempt) are no evidence against it, so they
// do not move the next call's start. Waiters of one shared lookup end
// together and retry with the microseconds left; each moved the pointer
// one master on, and in a ring of three two such waiters brought every
// lookup back to a hung leader for as long as it hung.
func TestShortCallerDoesNotRotate(t *testing.T) {
	var leaderAddr string
	leaderAddr = serve(t, &master{leader: true, leaderAddr: &leaderAddr})
	hung := frozen(t)
	c, err := New([]string{leaderAddr, hung, serve(t, &master{leaderAddr: &leaderAddr})}, Options{AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Prefer(hung)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{
		{"deadline already passed", -time.Second},
		{"a millisecond left", time.Millisecond},
		{"a tenth of the fair time", fairAttempt / 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			err := listTables(ctx, c)
			if apierr.CodeOf(err) != codes.DeadlineExceeded {
				t.Fatalf("call: %v, want DeadlineExceeded", err)
			}
			if got := c.Leader(); got != hung {
				t.Fatalf("after a call with %v, the next call starts at %s, want still %s (the hung master had no fair chance)", tc.timeout, got, hung)
			}
		})
	}
	// A caller with a short budget that it gave the hung master whole (a
	// client's move check of 200 ms) does move on.
	budget := 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if err := listTables(ctx, c); apierr.CodeOf(err) != codes.DeadlineExceeded {
		t.Fatalf("call with %v: %v, want DeadlineExceeded", budget, err)
	}
	if got := c.Leader(); got == hung {
		t.Fatalf("after the hung master had %v, the next call still starts at it", budget)
	}
}

// TestRotatesOnTransportError: a master whose address refuses connections,
// one that speaks no HTTP/2, and one that cannot even be dialled are each
// skipped for the next master.
func TestRotatesOnTransportError(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(t *testing.T) string
	}{
		{"connection refused", refusing},
		{"not http2", garbage},
		{"undialable", func(*testing.T) string { return "dns:///%zz-not-an-address" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var leaderAddr string
			leaderAddr = serve(t, &master{leader: true, leaderAddr: &leaderAddr})
			c, err := New([]string{tc.bad(t), leaderAddr}, Options{AttemptTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := listTables(ctx, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHungLeaderHintNotFollowed: while the followers still name a hung
// leader, a call does not bounce between a follower and the hung leader;
// it tries the third master, which leads.
func TestHungLeaderHintNotFollowed(t *testing.T) {
	hung := frozen(t)
	stale := hung
	follower := &master{leaderAddr: &stale}
	var leaderAddr string
	leader := &master{leader: true, leaderAddr: &leaderAddr}
	fa := serve(t, follower)
	leaderAddr = serve(t, leader)
	c, err := New([]string{hung, fa, leaderAddr}, Options{AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := listTables(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n := follower.calls.Load(); n != 1 {
		t.Fatalf("the follower was asked %d times; its stale hint should be ignored once the hung leader timed out", n)
	}
}

func TestNoLeaderRetriesUntilDeadline(t *testing.T) {
	none := ""
	a := serve(t, &master{leaderAddr: &none})
	b := serve(t, &master{leaderAddr: &none})
	c, _ := New([]string{a, b}, Options{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := listTables(ctx, c)
	if apierr.CodeOf(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	var me *Error
	if !errors.As(err, &me) || me.Attempts < 2 || apierr.CodeOf(me.Last) != codes.Unavailable {
		t.Fatalf("err = %#v, want a masterconn.Error with several attempts and the last Unavailable", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("errors.Is(%v, context.DeadlineExceeded) = false", err)
	}
}

func TestClosed(t *testing.T) {
	c, _ := New([]string{"127.0.0.1:1"}, Options{})
	c.Close()
	if err := listTables(context.Background(), c); apierr.CodeOf(err) != codes.FailedPrecondition {
		t.Fatalf("call on a closed Conn: %v, want FailedPrecondition", err)
	}
}
