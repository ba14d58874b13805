package tserver

import (
	"context"
	"time"

	"bighive/internal/obs"
	pb "bighive/proto/bighivepb"
)

// masterAttemptTimeout bounds one attempt of a call to one master: two
// heartbeat intervals, at least 200 ms. A master that stopped answering
// costs the tserver that long before it asks the next one, well inside a
// lease (which spans several heartbeats).
func masterAttemptTimeout(heartbeat time.Duration) time.Duration {
	return max(2*heartbeat, 200*time.Millisecond)
}

// nextIncarnation is a new incarnation number after old: the clock's
// microseconds, or old+1 if the clock stepped back.
func nextIncarnation(old int64) int64 { return max(time.Now().UnixMicro(), old+1) }

// register announces this process (a new incarnation) to the master.
func (s *Server) register(ctx context.Context) error {
	return s.master.Call(ctx, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RegisterTServer(ctx, &pb.RegisterTServerRequest{
			Uuid:           s.uuid,
			Address:        s.addr,
			Incarnation:    s.incarnation,
			WalPrefix:      s.prefix,
			BlockStoreUuid: s.uuid,
			HttpAddress:    obs.AdvertisedHTTPAddr(s.HTTPAddr(), s.addr),
		})
		if err != nil {
			return err
		}
		if d := time.Duration(resp.HeartbeatIntervalMicros) * time.Microsecond; d > 0 {
			s.heartbeatEvery.Store(int64(d))
			s.master.SetAttemptTimeout(masterAttemptTimeout(d))
		}
		return nil
	})
}

// heartbeatLoop renews the lease and receives assignments until ctx ends.
func (s *Server) heartbeatLoop(ctx context.Context) {
	defer s.wg.Done()
	registered, tried := false, false
	for {
		if !registered {
			if tried {
				// An earlier register may have reached the master without
				// its reply reaching us, and that incarnation may have been
				// declared dead since; the master never revives a dead
				// incarnation, so each register call is a new one. No
				// tablet was loaded under the old one: assignments come
				// only in heartbeat replies, after a register succeeded.
				s.incarnation = nextIncarnation(s.incarnation)
			}
			tried = true
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := s.register(rctx)
			cancel()
			if err == nil {
				registered = true
				s.hbDelta.Reset() // a new incarnation starts with a full heartbeat
				s.log.Info("registered with the master", "uuid", s.uuid, "incarnation", s.incarnation)
			} else if ctx.Err() == nil {
				s.log.Warn("register failed", "err", err)
			}
		}
		if registered {
			if reregister := s.heartbeat(ctx); reregister {
				registered, tried = false, false // heartbeat chose the new incarnation
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
	req := &pb.HeartbeatRequest{Uuid: s.uuid, Incarnation: s.incarnation, Load: s.loadReport(),
		GrantsVersion: s.grantsVersion()}
	reports := s.hbDelta.Fill(req, s.reports()) // full or a delta (internal/hbdelta)
	sent := time.Now()
	hctx, cancel := context.WithTimeout(ctx, 3*s.master.AttemptTimeout())
	defer cancel()
	var resp *pb.HeartbeatResponse
	err := s.master.Call(hctx, func(ctx context.Context, m pb.MasterClient) (err error) {
		resp, err = m.Heartbeat(ctx, req)
		return err
	})
	since(s.metrics.heartbeat, sent)
	// A lease that ran out while the heartbeat was on its way (or the
	// process was stopped) is reported before the reply renews it.
	s.updateHealth()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("heartbeat failed", "err", err, "lease_left", s.lease.remaining(time.Now()))
		}
		return false
	}
	if resp.Reregister {
		// The master no longer knows this process, or declared it dead (its
		// tablets went elsewhere, or are going): serve nothing from before,
		// and start over as a new incarnation, which the master gives new
		// tablets only.
		s.lease.revoke()
		s.updateHealth()
		for _, r := range s.tablets.all() {
			s.unload(r, "the master asked this tserver to register again")
		}
		s.log.Warn("the master asked this tserver to register again; dropped every tablet", "incarnation", s.incarnation)
		s.incarnation = nextIncarnation(s.incarnation)
		s.hbDelta.Reset()
		return true
	}
	if s.hbDelta.Ack(reports, resp) {
		s.nudgeHeartbeat() // the master has no base: a full heartbeat now
	}
	s.masterHTTP.Store(resp.MasterHttpAddress)
	s.learnGrants(resp.Grants)
	// Tablets the master moved away go before the lease is renewed, so a
	// client holding an old epoch is never served after the reassignment.
	s.applyAssignments(ctx, nil, resp.Unassign)
	if d := time.Duration(resp.LeaseDurationMicros) * time.Microsecond; d > 0 {
		s.lease.renew(sent, d)
		s.updateHealth()
	}
	for _, ts := range resp.Schemas {
		s.learnSchema(ts)
	}
	for _, p := range resp.CachePriorities {
		s.setCachePriority(p.Table, p.Priority)
	}
	s.applyAssignments(ctx, resp.Assign, nil)
	s.runLogSplitTasks(ctx, resp.LogSplitTasks)
	return false
}
