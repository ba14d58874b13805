package tserver

import (
	"context"
	"time"

	pb "bighive/proto/bighivepb"
)

// register announces this process (a new incarnation) to the master.
func (s *Server) register(ctx context.Context) error {
	return s.master.Call(ctx, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RegisterTServer(ctx, &pb.RegisterTServerRequest{
			Uuid:           s.uuid,
			Address:        s.addr,
			Incarnation:    s.incarnation,
			WalPrefix:      s.prefix,
			BlockStoreUuid: s.uuid,
		})
		if err != nil {
			return err
		}
		if d := time.Duration(resp.HeartbeatIntervalMicros) * time.Microsecond; d > 0 {
			s.heartbeatEvery.Store(int64(d))
		}
		return nil
	})
}

// heartbeatLoop renews the lease and receives assignments until ctx ends.
func (s *Server) heartbeatLoop(ctx context.Context) {
	defer s.wg.Done()
	registered := false
	for {
		if !registered {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := s.register(rctx)
			cancel()
			if err == nil {
				registered = true
				s.log.Info("registered with the master", "uuid", s.uuid, "incarnation", s.incarnation)
			} else if ctx.Err() == nil {
				s.log.Warn("register failed", "err", err)
			}
		}
		if registered {
			if reregister := s.heartbeat(ctx); reregister {
				registered = false
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(s.heartbeatEvery.Load())):
		case <-s.heartbeatNow:
		}
	}
}

// heartbeat sends one heartbeat and applies the reply. It reports whether
// the master asked this tserver to register again.
func (s *Server) heartbeat(ctx context.Context) (reregister bool) {
	req := &pb.HeartbeatRequest{Uuid: s.uuid, Incarnation: s.incarnation, Tablets: s.reports(), Load: s.loadReport()}
	sent := time.Now()
	hctx, cancel := context.WithTimeout(ctx, time.Duration(s.heartbeatEvery.Load())*3)
	defer cancel()
	var resp *pb.HeartbeatResponse
	err := s.master.Call(hctx, func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.Heartbeat(ctx, req)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("heartbeat failed", "err", err, "lease_left", s.lease.remaining(time.Now()))
		}
		return false
	}
	if resp.Reregister {
		// The master no longer knows this process (it was declared dead and
		// its tablets went elsewhere, or the master lost its state): serve
		// nothing from before, and start over as a new incarnation.
		s.lease.revoke()
		for _, r := range s.tablets.all() {
			s.unload(r, "the master asked this tserver to register again")
		}
		s.incarnation = time.Now().UnixMicro()
		return true
	}
	// Tablets the master moved away go before the lease is renewed, so a
	// client holding an old epoch is never served after the reassignment.
	s.applyAssignments(ctx, nil, resp.Unassign)
	if d := time.Duration(resp.LeaseDurationMicros) * time.Microsecond; d > 0 {
		s.lease.renew(sent, d)
	}
	for _, p := range resp.CachePriorities {
		s.setCachePriority(p.Table, p.Priority)
	}
	s.applyAssignments(ctx, resp.Assign, nil)
	s.runLogSplitTasks(ctx, resp.LogSplitTasks)
	return false
}
