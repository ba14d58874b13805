package master

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// TestLeaseNeedsConfirmedLeadership: a leader whose quorum stops
// confirming its leadership (as after a pause in which the others elected
// another) refuses heartbeats and registrations, Unavailable, once its
// last confirmation is older than the window; it grants them again as soon
// as one succeeds.
func TestLeaseNeedsConfirmedLeadership(t *testing.T) {
	t.Parallel()
	var unconfirmed atomic.Bool
	c := startCluster(t, 1, func(cfg *Config) {
		cfg.verifyLeader = func() error {
			if unconfirmed.Load() {
				return errors.New("test: no quorum answers")
			}
			return nil
		}
	})
	l := c.leader(10 * time.Second)
	mc := newClient(t, c.peers[l].GRPCAddr).at(0)
	ctx := ctxT(t, 10*time.Second)
	if _, err := mc.RegisterTServer(ctx, &pb.RegisterTServerRequest{Uuid: "ts1", Address: "127.0.0.1:1", Incarnation: 1, WalPrefix: "p1"}); err != nil {
		t.Fatalf("register while confirmed: %v", err)
	}
	if _, err := mc.Heartbeat(ctx, &pb.HeartbeatRequest{Uuid: "ts1", Incarnation: 1}); err != nil {
		t.Fatalf("heartbeat while confirmed: %v", err)
	}

	unconfirmed.Store(true)
	window := c.masters[l].confirmWindow()
	time.Sleep(window + window/2)
	refused := func(err error) bool {
		return status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), "leadership last confirmed")
	}
	if _, err := mc.Heartbeat(ctx, &pb.HeartbeatRequest{Uuid: "ts1", Incarnation: 1}); !refused(err) {
		t.Fatalf("heartbeat %v after the last confirmation: %v; want Unavailable naming the confirmation", window+window/2, err)
	}
	if _, err := mc.RegisterTServer(ctx, &pb.RegisterTServerRequest{Uuid: "ts2", Address: "127.0.0.1:2", Incarnation: 1, WalPrefix: "p2"}); !refused(err) {
		t.Fatalf("register %v after the last confirmation: %v; want Unavailable naming the confirmation", window+window/2, err)
	}

	unconfirmed.Store(false)
	wait.For(t, 5*time.Second, "a heartbeat granted once leadership is confirmed again", func() error {
		_, err := mc.Heartbeat(ctx, &pb.HeartbeatRequest{Uuid: "ts1", Incarnation: 1})
		return err
	})
}
