package tserver

import (
	"context"
	"time"

	"bighive/internal/obs"
	pb "bighive/proto/bighivepb"
	"bighive/tserver/membership"
)

// memberHost is the tserver as its membership's Host (package membership
// runs the protocol: registration, heartbeats, lease, registering again).
type memberHost struct{ s *Server }

var _ membership.Host = memberHost{}

// newMember makes the tserver's membership over its master connection.
func (s *Server) newMember() *membership.Member {
	return membership.New(membership.Config{
		UUID: s.uuid, Address: s.addr, WALPrefix: s.prefix, BlockStoreUUID: s.uuid,
		HTTPAddress: obs.AdvertisedHTTPAddr(s.HTTPAddr(), s.addr), Interval: s.opts.HeartbeatInterval, Lease: &s.lease, Logger: s.log,
		OnHeartbeat: func(sent time.Time, _ error) { since(s.metrics.heartbeat, sent) },
	}, s.master, memberHost{s})
}

// Membership is the tserver's standing with the master: its incarnation,
// its heartbeat interval and its lease.
func (s *Server) Membership() *membership.Member { return s.member }

func (h memberHost) Reports(req *pb.HeartbeatRequest) []*pb.TabletReport {
	req.Load, req.GrantsVersion = h.s.loadReport(), h.s.grantsVersion()
	return h.s.reports()
}

func (h memberHost) Learn(resp *pb.HeartbeatResponse) {
	h.s.masterHTTP.Store(resp.MasterHttpAddress)
	h.s.learnGrants(resp.Grants)
	for _, ts := range resp.Schemas {
		h.s.learnSchema(ts)
	}
	for _, p := range resp.CachePriorities {
		h.s.setCachePriority(p.Table, p.Priority)
	}
}

func (h memberHost) Unassign(ctx context.Context, unassign []*pb.TabletUnassignment) {
	h.s.applyAssignments(ctx, nil, unassign)
}

func (h memberHost) Assign(ctx context.Context, assign []*pb.TabletAssignment) {
	h.s.applyAssignments(ctx, assign, nil)
}

func (h memberHost) RunLogSplitTasks(ctx context.Context, tasks []*pb.LogSplitTask) {
	h.s.runLogSplitTasks(ctx, tasks)
}

// LeaseChanged sets the health service (updateHealth reads the lease
// itself, with the failed log).
func (h memberHost) LeaseChanged(bool) { h.s.updateHealth() }

// DropAll unloads every tablet. A load still waiting for its slot goes on,
// and the master refuses its report: the tablet is not this incarnation's.
func (h memberHost) DropAll(why string) {
	for _, r := range h.s.tablets.all() {
		h.s.unload(r, why)
	}
}

// updateHealth sets the health service from the lease: SERVING only
// while the lease is valid (and the log has not failed).
func (s *Server) updateHealth() {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	s.health.Set(s.leaseValid())
}
