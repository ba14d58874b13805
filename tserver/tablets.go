package tserver

import (
	"sort"
	"sync"
	"time"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	rp "bighive/storage/replica"
	"bighive/storage/tablet"
)

// registry holds the replicas by tablet id.
type registry struct {
	mu sync.RWMutex
	m  map[string]*rp.Replica
}

func (g *registry) init() { g.m = map[string]*rp.Replica{} }

func (g *registry) get(id string) *rp.Replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.m[id]
}

func (g *registry) put(r *rp.Replica) (old *rp.Replica) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old = g.m[r.ID()]
	g.m[r.ID()] = r
	return old
}

// remove takes the replica out if it is still r.
func (g *registry) remove(r *rp.Replica) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m[r.ID()] != r {
		return false
	}
	delete(g.m, r.ID())
	return true
}

func (g *registry) all() []*rp.Replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]*rp.Replica, 0, len(g.m))
	for _, r := range g.m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

func (g *registry) closeAll() {
	for _, r := range g.all() {
		g.remove(r)
		r.Close()
	}
}

// leaseValid reports whether this tserver may serve now: it holds a valid
// lease and its log has not failed (after which a heartbeat reply must not
// bring the lease back).
func (s *Server) leaseValid() bool { return !s.failed.Load() && s.lease.Valid(time.Now()) }

// serving returns the replica of tabletID if this tserver serves it at
// epoch now, or the routing error a client understands.
func (s *Server) serving(tabletID string, epoch int64) (*rp.Replica, error) {
	r := s.tablets.get(tabletID)
	if r == nil {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch, "tablet %s is not served by %s", tabletID, s.addr)
	}
	if !s.leaseValid() {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch, "tserver %s has no valid lease from the master", s.addr)
	}
	if epoch != 0 && epoch != r.Epoch() {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch,
			"tablet %s is served by %s at epoch %d, not %d", tabletID, s.addr, r.Epoch(), epoch)
	}
	if !r.Serving() {
		return nil, apierr.Tablet(pb.TabletError_RECOVERING, tabletID, epoch, "tablet %s is loading on %s", tabletID, s.addr)
	}
	return r, nil
}

func priorityOf(p pb.CachePriority) tablet.Priority {
	switch p {
	case pb.CachePriority_CACHE_PRIORITY_HIGH:
		return tablet.High
	case pb.CachePriority_CACHE_PRIORITY_LOW:
		return tablet.Low
	}
	return tablet.Medium
}

var (
	errUnknownFamily   = tablet.ErrUnknownFamily
	errInvalidMutation = tablet.ErrInvalidMutation
	errTabletClosed    = tablet.ErrClosed
)

// TSFiles lists the TSFiles of the tablet served here (newest first), with
// their entry counts and sizes; nil when the tablet is not here. For tests
// and tools that check what compactions leave.
func (s *Server) TSFiles(tabletID string) []tablet.TSFileInfo {
	r := s.tablets.get(tabletID)
	if r == nil {
		return nil
	}
	return r.Files()
}
