package tserver

import (
	"context"
	"time"

	"bighive/storage/checkpoint"
	rp "bighive/storage/replica"
)

// handoffPreflush is the buffered bytes above which a handoff flushes
// the tablet once while it still takes writes, so that the flush made
// with its writes fenced, which is all the time its writes wait, is of
// what came in meanwhile only.
const handoffPreflush = 1 << 20

// handoffTimeout bounds the flushes of a handoff: past it the tablet is
// let go as it is, and its next owner replays its log.
const handoffTimeout = 30 * time.Second

// startHandoff lets go of a served tablet the master is moving to another
// tserver (TabletUnassignment.handoff), in the background, once, after
// flushing it:
//
//  1. if its buffers hold more than handoffPreflush, a checkpoint of it
//     alone, while it takes reads and writes as before;
//  2. its writes fenced (Replica.FenceWrites: later ones are refused as
//     not served here, the admitted ones finish), reads still served;
//  3. a checkpoint of it alone: every write it took is in a TSFile, and
//     its log position is the log file rolled to, which holds none of
//     its records;
//  4. unload: the next heartbeat no longer lists it, and the master
//     assigns it to the next owner, which opens its TSFiles and has
//     nothing of its own to replay.
//
// The master assigns the tablet elsewhere only after a heartbeat without
// it (invariant 6), so the tablet stays this tserver's, listed by every
// heartbeat, until step 4. Its writes wait from step 2 to the next
// owner's load; reads only from step 4. A failed or timed-out flush
// changes nothing but that wait: the tablet is let go as it is and its
// log, which its metadata still names, is replayed. Called under assignMu.
func (s *Server) startHandoff(r *rp.Replica) {
	if s.handoffs[r.ID()] {
		return
	}
	s.handoffs[r.ID()] = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.handoff(s.ctx, r)
		s.assignMu.Lock()
		delete(s.handoffs, r.ID())
		s.assignMu.Unlock()
	}()
}

func (s *Server) handoff(ctx context.Context, r *rp.Replica) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, handoffTimeout)
	defer cancel()
	only := func(t checkpoint.Tablet) bool { return t == checkpoint.Tablet(r) }
	if r.MemoryUsage() > handoffPreflush {
		if _, err := s.eng.coord.CheckpointTablets(ctx, only); err != nil {
			s.log.Warn("handoff: flush while serving failed; the fenced flush does it", "tablet", r.ID(), "err", err)
		}
	}
	r.FenceWrites()
	fenced := time.Now()
	_, err := s.eng.coord.CheckpointTablets(ctx, only)
	why := "handed off to another tserver"
	if err != nil {
		s.log.Warn("handoff: fenced flush failed; the next owner replays the log", "tablet", r.ID(), "err", err)
		why = "handed off to another tserver, unflushed"
	}
	s.assignMu.Lock()
	if s.tablets.get(r.ID()) == r {
		s.unload(r, why)
	} else {
		r.Stop() // replaced meanwhile (a newer epoch): unloaded already
	}
	s.assignMu.Unlock()
	s.log.Info("tablet handed off", "tablet", r.ID(), "epoch", r.Epoch(), "took", time.Since(began),
		"writes_fenced", time.Since(fenced), "flushed", err == nil)
}
