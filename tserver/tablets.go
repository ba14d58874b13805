package tserver

import (
	"bytes"
	"sort"
	"sync"
	"time"

	"bighive/checkpoint"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/tablet"
)

// replica is one tablet as this tserver holds it.
type replica struct {
	id         string
	table      string
	start, end []byte // [start, end); end nil: unbounded
	epoch      int64
	eng        *checkpoint.Engine

	// ops is held shared by each write from its WAL append to its apply,
	// and exclusively by unload, so a tablet leaves only between writes.
	ops sync.RWMutex

	mu sync.Mutex
	// unloaded is set once unload has begun; later unloads do nothing.
	unloaded bool
}

func (r *replica) contains(row []byte) bool {
	return bytes.Compare(row, r.start) >= 0 && (len(r.end) == 0 || bytes.Compare(row, r.end) < 0)
}

// registry holds the replicas by tablet id.
type registry struct {
	mu sync.RWMutex
	m  map[string]*replica
}

func (g *registry) init() { g.m = map[string]*replica{} }

func (g *registry) get(id string) *replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.m[id]
}

func (g *registry) put(r *replica) (old *replica) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old = g.m[r.id]
	g.m[r.id] = r
	return old
}

// remove takes the replica out if it is still r.
func (g *registry) remove(r *replica) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m[r.id] != r {
		return false
	}
	delete(g.m, r.id)
	return true
}

func (g *registry) all() []*replica {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]*replica, 0, len(g.m))
	for _, r := range g.m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (g *registry) closeAll() {
	for _, r := range g.all() {
		g.remove(r)
		r.eng.SetServing(false)
		r.eng.Close()
	}
}

// serving returns the replica of tabletID if this tserver serves it at
// epoch now, or the routing error a client understands.
func (s *Server) serving(tabletID string, epoch int64) (*replica, error) {
	r := s.tablets.get(tabletID)
	if r == nil {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch, "tablet %s is not served by %s", tabletID, s.addr)
	}
	if !s.lease.valid(time.Now()) {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch, "tserver %s has no valid lease from the master", s.addr)
	}
	if epoch != 0 && epoch != r.epoch {
		return nil, apierr.Tablet(pb.TabletError_NOT_SERVING, tabletID, epoch,
			"tablet %s is served by %s at epoch %d, not %d", tabletID, s.addr, r.epoch, epoch)
	}
	if !r.eng.Serving() {
		return nil, apierr.Tablet(pb.TabletError_RECOVERING, tabletID, epoch, "tablet %s is loading on %s", tabletID, s.addr)
	}
	return r, nil
}

// schemaOf converts a table schema of the API.
func schemaOf(ts *pb.TableSchema) tablet.Schema {
	s := tablet.Schema{Families: map[string]tablet.FamilyPolicy{}}
	for _, f := range ts.GetFamilies() {
		s.Families[f.Name] = tablet.FamilyPolicy{MaxVersions: int(f.MaxVersions), MaxAge: time.Duration(f.MaxAgeMicros) * time.Microsecond}
	}
	return s
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
