package membership_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// tap stands between a host and the real master: a gRPC Master service on
// its own address whose every method is the master's, called in process,
// with the master's error mapping. It records what the host sends and what
// it is answered, and can cut the host off, edit or hold one reply, and
// answer the log-split reports of the tasks the test made up.
type tap struct {
	pb.MasterServer              // the master
	observe         func() sight // reads the host's state as a call arrives

	mu        sync.Mutex
	cut       bool
	registers []*call
	beats     []*call
	edit      *edit             // for the next heartbeat's reply
	splits    map[string]string // made-up task id → the reporting tserver's uuid
}

// sight is a host's state at one instant.
type sight struct {
	leaseEnd time.Time        // zero: no valid lease
	serving  map[string]int64 // tablet → epoch, what it serves
}

// call is one RegisterTServer or Heartbeat call as the tap saw it.
type call struct {
	reg    *pb.RegisterTServerRequest
	req    *pb.HeartbeatRequest
	at     time.Time // arrival
	host   sight     // the host at arrival
	resp   *pb.HeartbeatResponse
	done   time.Time // answered (zero: not yet, or failed)
	edited bool
}

// edit changes one heartbeat reply: fn edits it, then it is held for hold.
type edit struct {
	fn   func(*pb.HeartbeatResponse)
	hold time.Duration
}

// contractTask is the prefix of the log-split task ids the test makes up.
const contractTask = "delete/splitlog/contract-"

// startTap serves a tap of master on a new address; observe reads the
// host's state as each call arrives.
func startTap(t *testing.T, master pb.MasterServer, observe func() sight) (*tap, string) {
	t.Helper()
	tp := &tap{MasterServer: master, observe: observe, splits: map[string]string{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(tp.cutOff, apierr.UnaryServerInterceptor(quiet)))
	pb.RegisterMasterServer(srv, tp)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return tp, lis.Addr().String()
}

// cutOff answers every call Unavailable while the host is cut off.
func (tp *tap) cutOff(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	tp.mu.Lock()
	cut := tp.cut
	tp.mu.Unlock()
	if cut {
		return nil, status.Error(codes.Unavailable, "cut off from the master")
	}
	return h(ctx, req)
}

func (tp *tap) setCut(cut bool) {
	tp.mu.Lock()
	tp.cut = cut
	tp.mu.Unlock()
}

// arrive records c with the host's state at its arrival.
func (tp *tap) arrive(c *call, list *[]*call) {
	c.at = time.Now()
	c.host = tp.observe()
	tp.mu.Lock()
	*list = append(*list, c)
	tp.mu.Unlock()
}

func (tp *tap) RegisterTServer(ctx context.Context, req *pb.RegisterTServerRequest) (*pb.RegisterTServerResponse, error) {
	tp.arrive(&call{reg: req}, &tp.registers)
	return tp.MasterServer.RegisterTServer(ctx, req)
}

func (tp *tap) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	c := &call{req: req, at: time.Now(), host: tp.observe()}
	// The edit is taken as the heartbeat is recorded, in one critical
	// section: a heartbeat recorded before editNext set it (one in flight
	// then) never takes it, so editNext finds the edited one among those
	// after it.
	tp.mu.Lock()
	tp.beats = append(tp.beats, c)
	e := tp.edit
	tp.edit = nil
	tp.mu.Unlock()
	resp, err := tp.MasterServer.Heartbeat(ctx, req)
	if err != nil {
		if e != nil { // the next heartbeat takes it
			tp.mu.Lock()
			if tp.edit == nil {
				tp.edit = e
			}
			tp.mu.Unlock()
		}
		return nil, err
	}
	if e != nil {
		resp = proto.Clone(resp).(*pb.HeartbeatResponse) // the master's may be shared
		if e.fn != nil {
			e.fn(resp)
		}
		time.Sleep(e.hold)
	}
	tp.mu.Lock()
	c.resp, c.done, c.edited = resp, time.Now(), e != nil
	tp.mu.Unlock()
	return resp, nil
}

func (tp *tap) ReportLogSplit(ctx context.Context, req *pb.ReportLogSplitRequest) (*pb.ReportLogSplitResponse, error) {
	if !strings.HasPrefix(req.TaskId, contractTask) {
		return tp.MasterServer.ReportLogSplit(ctx, req)
	}
	tp.mu.Lock()
	tp.splits[req.TaskId] = req.TserverUuid
	tp.mu.Unlock()
	return &pb.ReportLogSplitResponse{}, nil
}

// heartbeats is the number of heartbeats that arrived so far.
func (tp *tap) heartbeats() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.beats)
}

// waitFor waits until cond, run under the tap's lock, holds.
func (tp *tap) waitFor(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	wait.ForCtx(t, ctx, what, func() error {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return cond()
	})
}

// editNext edits the reply to the next heartbeat (see edit). It returns
// that heartbeat, answered, and the host's next one, as it arrived: the
// host applied the edited reply before it sent that one.
func (tp *tap) editNext(t *testing.T, ctx context.Context, e edit) (edited, next *call) {
	t.Helper()
	tp.mu.Lock()
	from := len(tp.beats)
	tp.edit = &e
	tp.mu.Unlock()
	tp.waitFor(t, ctx, "the edited heartbeat reply and the heartbeat after it", func() error {
		for i := from; i < len(tp.beats); i++ {
			if tp.beats[i].edited {
				if i+1 < len(tp.beats) {
					edited, next = tp.beats[i], tp.beats[i+1]
					return nil
				}
				return fmt.Errorf("heartbeat %d edited, none after it yet", tp.beats[i].req.Seq)
			}
		}
		return fmt.Errorf("no heartbeat edited yet (%d since)", len(tp.beats)-from)
	})
	return edited, next
}
