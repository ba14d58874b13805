package fleetsim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"bighive/master"
)

// The flags a master process gets carry every setting the scenarios make,
// and a setting the binary has no flag for is refused, not dropped.
func TestMasterArgs(t *testing.T) {
	peers := []master.Peer{{ID: "m1", RaftAddr: "r1", GRPCAddr: "g1"}, {ID: "m2", RaftAddr: "r2", GRPCAddr: "g2"}}
	rc := RaftConfig()
	rc.TrailingLogs = 1
	cfg := master.Config{ID: "m1", Dir: "/d/m1", RaftAddr: "r1", Lease: 5 * time.Second, Heartbeat: time.Second, MaxMoves: 4, Raft: rc,
		MovesPerInterval: 2, MoveInterval: 3 * time.Second, RebalanceWarmup: 7 * time.Second}
	args, err := masterArgs(cfg, peers, "g1", "h1")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " ")
	for _, want := range []string{"--id m1", "--listen g1", "--raft-listen r1", "--data /d/m1", "--http-listen h1",
		"--peers m1=r1=g1,m2=r2=g2", "--lease 5s", "--heartbeat 1s", "--max-moves 4",
		"--moves-per-interval 2", "--move-interval 3s", "--rebalance-warmup 7s",
		"--raft-heartbeat-timeout 2s", "--raft-election-timeout 2s", "--raft-leader-lease-timeout 1s",
		"--raft-snapshot-interval 24h0m0s", "--raft-snapshot-threshold 1099511627776", "--raft-trailing-logs 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
	if slices.Contains(args, "--merge-threshold") {
		t.Errorf("args %q set a merge threshold the config left at its default", got)
	}
	for name, tweak := range map[string]func(*master.Config){
		"dead margin": func(c *master.Config) { c.DeadMargin = time.Second },
		"tick":        func(c *master.Config) { c.TickInterval = time.Second },
		"raft commit": func(c *master.Config) { c.Raft = RaftConfig(); c.Raft.CommitTimeout = time.Second },
	} {
		c := cfg
		tweak(&c)
		if _, err := masterArgs(c, peers, "g1", "h1"); err == nil {
			t.Errorf("%s: a setting without a flag was accepted", name)
		}
	}
}
