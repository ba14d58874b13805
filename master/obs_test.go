package master

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// health is nil when master i answers the health check with want.
func health(c *client, i int, want healthpb.HealthCheckResponse_ServingStatus) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(c.conns[i]).Check(ctx, &healthpb.HealthCheckRequest{Service: "bighive.v1.Master"})
	if err != nil {
		return err
	}
	if r.Status != want {
		return fmt.Errorf("health %v", r.Status)
	}
	return nil
}

// gathered returns the value of every gauge and counter sample of the
// named family in reg, by its label values joined with ","; a histogram's
// sample count is under that key and its sum under the key plus "/sum".
func gathered(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			key := ""
			for i, l := range m.Label {
				if i > 0 {
					key += ","
				}
				key += l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
				out[key+"/sum"] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

// TestHealthFollowsLeader: every master is SERVING while raft has a
// leader, a follower answers GetMasterStatus itself (naming the leader),
// the metrics agree with raft (checked by a pedantic registry), and the
// last master of three left is NOT_SERVING once it knows no leader.
func TestHealthFollowsLeader(t *testing.T) {
	t.Parallel()
	regs := map[string]*prometheus.Registry{}
	c := startCluster(t, 3, func(cfg *Config) {
		regs[cfg.ID] = prometheus.NewPedanticRegistry()
		cfg.Metrics = regs[cfg.ID]
	})
	li := c.leader(10 * time.Second)
	cl := newClient(t, c.addrs()...)
	for i := range c.masters {
		wait.For(t, 10*time.Second, "SERVING health", func() error { return health(cl, i, healthpb.HealthCheckResponse_SERVING) })
	}
	if _, err := cl.at(li).CreateTable(ctxT(t, 10*time.Second), &pb.CreateTableRequest{Schema: schema("t", "cf")}); err != nil {
		t.Fatal(err)
	}
	fi := (li + 1) % 3
	st, err := cl.at(fi).GetMasterStatus(ctxT(t, 5*time.Second), &pb.GetMasterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Id != c.peers[fi].ID || st.RaftState != "Follower" || st.LeaderId != c.peers[li].ID ||
		st.LeaderAddress != c.peers[li].GRPCAddr || st.Term == 0 || st.Version == "" {
		t.Fatalf("follower %s status: %+v", c.peers[fi].ID, st)
	}
	lreg := regs[c.peers[li].ID]
	if got := gathered(t, lreg, "bighive_master_raft_state"); got["leader"] != 1 || got["follower"] != 0 {
		t.Errorf("leader's raft state metric: %v", got)
	}
	if got := gathered(t, lreg, "bighive_master_commands_total"); got["applied,create_tablets"] != 1 {
		t.Errorf("leader's commands: %v", got)
	}
	if got := gathered(t, lreg, "bighive_master_tablets"); got["unassigned"] != 1 {
		t.Errorf("tablets by state (no tserver: the one tablet is unassigned): %v", got)
	}
	if got := gathered(t, lreg, "bighive_master_tables"); got[""] != 1 {
		t.Errorf("tables: %v", got)
	}
	if got := gathered(t, regs[c.peers[fi].ID], "bighive_master_raft_state"); got["follower"] != 1 {
		t.Errorf("follower's raft state metric: %v", got)
	}
	if got := gathered(t, lreg, "bighive_grpc_server_requests_total"); got["OK,/bighive.v1.Master/CreateTable"] != 1 {
		t.Errorf("leader's gRPC requests: %v", got)
	}

	// Two of three gone: the last one knows no leader.
	c.stop(li)
	c.stop((li + 2) % 3)
	wait.For(t, 20*time.Second, "NOT_SERVING without a leader", func() error {
		return health(cl, fi, healthpb.HealthCheckResponse_NOT_SERVING)
	})
	if got := gathered(t, regs[c.peers[fi].ID], "bighive_master_raft_has_leader"); got[""] != 0 {
		t.Errorf("has_leader without a leader: %v", got)
	}
}
