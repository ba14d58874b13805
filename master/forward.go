package master

import (
	"context"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	"bighive/internal/masterconn"
	"bighive/internal/tlsconf"
	pb "bighive/proto/bighivepb"
)

// forwardedKey marks a call a follower forwarded, so it is never forwarded
// twice (no loops while leadership moves).
const forwardedKey = "bighive-forwarded-by"

const masterService = "/bighive.v1.Master/"

// localMethod is answered by every master itself: its own view of raft.
const localMethod = masterService + "GetMasterStatus"

// forwarder relays calls that reach a follower to the leader, through one
// leader-following masterconn.Conn over every master (this one included:
// a call forwarded to itself is answered by its handler if it has become
// the leader meanwhile, else refused with NotLeader like any forwarded
// call). The forwarded call starts at the leader raft names; if that
// master does not answer within an attempt (it hung) or refuses, the Conn
// moves on as it does for any caller, within the incoming call's deadline.
type forwarder struct {
	m    *Master
	conn *masterconn.Conn
	resp map[string]protoreflect.MessageType // method → response type
}

func newForwarder(m *Master) (*forwarder, error) {
	addrs := []string{m.grpcAddr}
	for _, p := range m.cfg.Peers {
		addrs = append(addrs, p.GRPCAddr)
	}
	conn, err := masterconn.New(addrs, masterconn.Options{AttemptTimeout: m.cfg.ForwardAttemptTimeout,
		Credentials: tlsconf.Credentials(m.cfg.TLS), Logger: m.log})
	if err != nil {
		return nil, err
	}
	f := &forwarder{m: m, conn: conn, resp: map[string]protoreflect.MessageType{}}
	sd := pb.File_bighivepb_master_proto.Services().ByName("Master")
	for i := 0; i < sd.Methods().Len(); i++ {
		md := sd.Methods().Get(i)
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err == nil {
			f.resp[masterService+string(md.Name())] = mt
		}
	}
	return f, nil
}

// leaderAddr is the leader's gRPC address ("" if unknown).
func (f *forwarder) leaderAddr() string {
	_, id := f.m.node.Raft.LeaderWithID()
	return f.grpcAddrOf(id)
}

// leaderWait bounds how long a follower holds a call while no leader is
// known (an election in progress), before refusing it with NotLeader:
// longer than one election, so a call that arrives mid-election is
// forwarded rather than bounced back to a caller that would only retry.
const leaderWait = 3 * time.Second

// awaitLeader polls raft for a leader until one is known, leaderWait
// passes or ctx ends; it returns the leader's gRPC address or "".
func (f *forwarder) awaitLeader(ctx context.Context) string {
	t := time.NewTimer(leaderWait)
	defer t.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-t.C:
			return ""
		case <-tick.C:
			if a := f.leaderAddr(); a != "" {
				return a
			}
		}
	}
}

func (f *forwarder) grpcAddrOf(id raft.ServerID) string {
	if id == "" {
		return ""
	}
	if string(id) == f.m.cfg.ID {
		return f.m.grpcAddr
	}
	for _, p := range f.m.cfg.Peers {
		if p.ID == string(id) {
			return p.GRPCAddr
		}
	}
	return ""
}

// intercept forwards a Master call to the leader when this master is not
// the leader; the leader (even one still catching up) handles it itself.
func (f *forwarder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, masterService) || info.FullMethod == localMethod || f.m.node.Raft.State() == raft.Leader {
		return h(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	forwarded := len(md.Get(forwardedKey)) > 0
	leader := f.leaderAddr()
	if leader == "" && !forwarded {
		leader = f.awaitLeader(ctx)
		if leader == f.m.grpcAddr && f.m.node.Raft.State() == raft.Leader {
			return h(ctx, req)
		}
	}
	if forwarded || leader == "" || leader == f.m.grpcAddr {
		return nil, apierr.NotLeader(leader)
	}
	mt, ok := f.resp[info.FullMethod]
	if !ok {
		return h(ctx, req)
	}
	f.conn.Prefer(leader)
	var resp proto.Message
	out := metadata.AppendToOutgoingContext(ctx, forwardedKey, f.m.cfg.ID)
	// The caller goes along: its token, or the principal its client
	// certificate named here (believed by the leader only from a peer with
	// a server certificate). The leader authorizes the call; a follower
	// does not, as its grants may lag the leader's.
	if len(md.Get("authorization")) == 1 {
		out = metadata.AppendToOutgoingContext(out, "authorization", md.Get("authorization")[0])
	} else if p, ok := auth.FromContext(ctx); ok && (p.Via == "certificate" || p.Via == "forwarded") {
		out = metadata.AppendToOutgoingContext(out, auth.ForwardedPrincipalKey, p.Name)
	}
	err := f.conn.Invoke(out, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		resp = mt.New().Interface()
		return cc.Invoke(ctx, info.FullMethod, req.(proto.Message), resp)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (f *forwarder) close() { _ = f.conn.Close() }
