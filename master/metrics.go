package master

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"bighive/internal/obs"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// metrics are the master's Prometheus metrics: raft and metadata figures
// are read at scrape time (collector); commands and heartbeats are counted
// as they happen. Nothing is labelled per table, tablet or tserver.
type metrics struct {
	reg       *prometheus.Registry
	commands  *prometheus.CounterVec
	heartbeat prometheus.Histogram
	hbKinds   *prometheus.CounterVec // by kind: full, delta_reconciled, delta_skipped, send_full (heldset.go)
	// unavailable is each tablet's time unserved across a move or a
	// recovery, by cause (unavail.go): a histogram of per-tablet figures,
	// not a series per tablet.
	unavailable *prometheus.HistogramVec
}

func newMetrics(m *Master, reg *prometheus.Registry) *metrics {
	mt := &metrics{
		reg: reg,
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bighive_master_commands_total",
			Help: "Metadata commands this master proposed to raft, by type and result (applied, refused or failed)."},
			[]string{"type", "result"}),
		heartbeat: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bighive_master_heartbeat_duration_seconds",
			Help:    "Time the leader took to answer a tserver heartbeat.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12)}),
		hbKinds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bighive_master_heartbeats_total",
			Help: "Heartbeats the leader answered, by kind: full, delta_reconciled (read the tserver's tablets), delta_skipped (nothing changed: read none), send_full (a delta without its base)."},
			[]string{"kind"}),
		unavailable: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bighive_master_tablet_unavailable_seconds",
			Help:    "Per tablet, the time it was not served across a move (from the old owner told to let go) or a recovery (from the dead tserver's last heartbeat) until its new owner's load committed, by cause (move, recovery); the leader measures it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 13)}, []string{"cause"}),
	}
	reg.MustRegister(mt.commands, mt.heartbeat, mt.hbKinds, mt.unavailable, &collector{m: m})
	return mt
}

// commandType is the name of cmd's oneof case ("create_table", "assign", …).
func commandType(cmd *spb.MetaCommand) string {
	msg := cmd.ProtoReflect()
	od := msg.Descriptor().Oneofs().ByName("cmd")
	if od == nil {
		return "unknown"
	}
	if fd := msg.WhichOneof(od); fd != nil {
		return string(fd.Name())
	}
	return "none"
}

func (mt *metrics) command(cmd *spb.MetaCommand, res *meta.Result, err error) {
	result := "applied"
	switch {
	case err != nil:
		result = "failed"
	case res != nil && res.Err != nil:
		result = "refused"
	}
	mt.commands.WithLabelValues(commandType(cmd), result).Inc()
}

type collector struct{ m *Master }

func mdesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dRaftState   = mdesc("bighive_master_raft_state", "1 for this master's raft state (leader, follower, candidate or shutdown), 0 for the others.", "state")
	dRaftLeader  = mdesc("bighive_master_raft_has_leader", "1 while this master knows a raft leader.")
	dRaftTerm    = mdesc("bighive_master_raft_term", "The raft term.")
	dRaftApplied = mdesc("bighive_master_raft_applied_index", "The last raft index applied to the metadata FSM.")
	dRaftCommit  = mdesc("bighive_master_raft_commit_index", "The raft commit index.")
	dRaftLast    = mdesc("bighive_master_raft_last_log_index", "The last index in this master's raft log.")
	dTServers    = mdesc("bighive_master_tservers", "Registered tservers by liveness (live or dead), as the leader sees them; the leader alone exports it.", "state")
	dTables      = mdesc("bighive_master_tables", "Tables in the metadata.")
	dTablets     = mdesc("bighive_master_tablets", "Tablets in the metadata by state (unassigned, assigned, serving, deleting).", "state")
)

var raftStates = []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dRaftState, dRaftLeader, dRaftTerm, dRaftApplied, dRaftCommit, dRaftLast, dTServers, dTables, dTablets} {
		ch <- d
	}
}

func mgauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	r := m.node.Raft
	state := r.State()
	for _, s := range raftStates {
		v := 0.0
		if s == state {
			v = 1
		}
		mgauge(ch, dRaftState, v, stateName(s))
	}
	leader := 0.0
	if addr, _ := r.LeaderWithID(); addr != "" {
		leader = 1
	}
	mgauge(ch, dRaftLeader, leader)
	stats := r.Stats()
	for d, key := range map[*prometheus.Desc]string{dRaftTerm: "term", dRaftCommit: "commit_index", dRaftLast: "last_log_index"} {
		if v, err := strconv.ParseUint(stats[key], 10, 64); err == nil {
			mgauge(ch, d, float64(v))
		}
	}
	mgauge(ch, dRaftApplied, float64(r.AppliedIndex()))

	var tables int
	byState := map[pb.TabletState]int{}
	_ = m.view(func(rd *meta.Reader) error {
		ts, err := rd.Tables()
		if err != nil {
			return err
		}
		tables = len(ts)
		return rd.ForEachTablet(func(t *pb.TabletMeta) error {
			byState[t.State]++
			return nil
		})
	})
	mgauge(ch, dTables, float64(tables))
	for st, name := range map[pb.TabletState]string{
		pb.TabletState_TABLET_STATE_UNASSIGNED: "unassigned",
		pb.TabletState_TABLET_STATE_ASSIGNED:   "assigned",
		pb.TabletState_TABLET_STATE_SERVING:    "serving",
		pb.TabletState_TABLET_STATE_DELETING:   "deleting",
	} {
		mgauge(ch, dTablets, float64(byState[st]), name)
	}

	m.mu.Lock()
	ls := m.leader
	m.mu.Unlock()
	if ls != nil {
		now := time.Now()
		var live, dead int
		ls.mu.Lock()
		for _, l := range ls.leases {
			if !l.dead && !ls.expired(l, now) {
				live++
			} else {
				dead++
			}
		}
		ls.mu.Unlock()
		mgauge(ch, dTServers, float64(live), "live")
		mgauge(ch, dTServers, float64(dead), "dead")
	}
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// GetMasterStatus answers with this master's own view of raft; it is
// never forwarded.
func (m *Master) GetMasterStatus(ctx context.Context, _ *pb.GetMasterStatusRequest) (*pb.GetMasterStatusResponse, error) {
	r := m.node.Raft
	_, id := r.LeaderWithID()
	resp := &pb.GetMasterStatusResponse{
		Id: m.cfg.ID, Address: m.grpcAddr, RaftState: r.State().String(),
		LeaderId: string(id), LeaderAddress: m.fwd.grpcAddrOf(id),
		AppliedIndex: r.AppliedIndex(), Version: obs.Version("master"),
	}
	stats := r.Stats()
	resp.Term, _ = strconv.ParseUint(stats["term"], 10, 64)
	resp.CommitIndex, _ = strconv.ParseUint(stats["commit_index"], 10, 64)
	return resp, nil
}
