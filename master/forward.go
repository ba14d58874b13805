package master

import (
	"context"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// forwardedKey marks a call a follower forwarded, so it is never forwarded
// twice (no loops while leadership moves).
const forwardedKey = "bighive-forwarded-by"

const masterService = "/bighive.v1.Master/"

// forwarder relays calls that reach a follower to the leader.
type forwarder struct {
	m     *Master
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	resp  map[string]protoreflect.MessageType // method → response type
}

func newForwarder(m *Master) *forwarder {
	f := &forwarder{m: m, conns: map[string]*grpc.ClientConn{}, resp: map[string]protoreflect.MessageType{}}
	sd := pb.File_bighivepb_master_proto.Services().ByName("Master")
	for i := 0; i < sd.Methods().Len(); i++ {
		md := sd.Methods().Get(i)
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err == nil {
			f.resp[masterService+string(md.Name())] = mt
		}
	}
	return f
}

// leaderAddr is the leader's gRPC address ("" if unknown).
func (f *forwarder) leaderAddr() string {
	_, id := f.m.node.Raft.LeaderWithID()
	return f.grpcAddrOf(id)
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
	if !strings.HasPrefix(info.FullMethod, masterService) || f.m.node.Raft.State() == raft.Leader {
		return h(ctx, req)
	}
	leader := f.leaderAddr()
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(forwardedKey)) > 0 || leader == "" || leader == f.m.grpcAddr {
		return nil, apierr.NotLeader(leader)
	}
	mt, ok := f.resp[info.FullMethod]
	if !ok {
		return h(ctx, req)
	}
	conn, err := f.conn(leader)
	if err != nil {
		return nil, apierr.NotLeader(leader)
	}
	resp := mt.New().Interface()
	out := metadata.AppendToOutgoingContext(ctx, forwardedKey, f.m.cfg.ID)
	if err := conn.Invoke(out, info.FullMethod, req.(proto.Message), resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (f *forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), limits.GRPCCallOptions())
	if err != nil {
		return nil, err
	}
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for a, c := range f.conns {
		_ = c.Close()
		delete(f.conns, a)
	}
}
