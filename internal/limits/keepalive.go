package limits

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Keepalive timings of every long-lived connection (client→master,
// tserver→master, master→master forwarding, client→tserver). A peer that
// stops answering (a paused process, a dead host behind a live switch)
// keeps its TCP connection open; the pings find it so the connection is
// torn down and redialled. Per-call deadlines remain the first defence; the
// pings bound how long a dead transport lingers between calls.
const (
	// KeepaliveTime is the idle time after which a client pings the server.
	// gRPC raises anything below 10 s to 10 s.
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long a ping may go unanswered before the
	// connection is closed.
	KeepaliveTimeout = 5 * time.Second
	// KeepaliveMinTime is the shortest ping interval a server tolerates
	// (below KeepaliveTime, so well-behaved clients are never cut off with
	// GOAWAY "too_many_pings").
	KeepaliveMinTime = 5 * time.Second
)

// GRPCKeepaliveDialOption makes a client connection ping its server when
// idle, also without calls in flight.
func GRPCKeepaliveDialOption() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true,
	})
}

// GRPCKeepaliveServerOptions make a server ping idle clients and permit the
// clients' own pings (GRPCKeepaliveDialOption) under its enforcement policy.
func GRPCKeepaliveServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
	}
}
