package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"bighive/master"
)

// raftFlags are the raft tunings an operator may need on a loaded or slow
// network: zero keeps the master's default for each
// (master.DefaultRaftConfig).
type raftFlags struct {
	heartbeat, election, leaderLease, snapshotInterval *time.Duration
	snapshotThreshold, trailingLogs                    *uint64
}

func addRaftFlags(fs *flag.FlagSet) raftFlags {
	return raftFlags{
		heartbeat:         fs.Duration("raft-heartbeat-timeout", 0, "how long a follower waits without a leader contact before it calls an election (0: the default, 500 ms)"),
		election:          fs.Duration("raft-election-timeout", 0, "how long a candidate waits without a leader before it calls an election (0: the default, 500 ms)"),
		leaderLease:       fs.Duration("raft-leader-lease-timeout", 0, "how long a leader stays leader without reaching a quorum (0: the default, 500 ms); at most --raft-heartbeat-timeout"),
		snapshotInterval:  fs.Duration("raft-snapshot-interval", 0, "how often raft checks whether to snapshot (0: raft's default, 120 s)"),
		snapshotThreshold: fs.Uint64("raft-snapshot-threshold", 0, "log entries since the last snapshot that make raft take one (0: raft's default, 8192)"),
		trailingLogs:      fs.Uint64("raft-trailing-logs", 0, "log entries kept after a snapshot, so a follower a little behind catches up without one (0: raft's default, 10240)"),
	}
}

// config is the master's default raft configuration with the flags that
// were given.
func (f raftFlags) config() (*raft.Config, error) {
	c := master.DefaultRaftConfig()
	for _, d := range []struct {
		v   time.Duration
		dst *time.Duration
	}{{*f.heartbeat, &c.HeartbeatTimeout}, {*f.election, &c.ElectionTimeout}, {*f.leaderLease, &c.LeaderLeaseTimeout}, {*f.snapshotInterval, &c.SnapshotInterval}} {
		if d.v < 0 {
			return nil, fmt.Errorf("a raft duration is negative: %v", d.v)
		}
		if d.v > 0 {
			*d.dst = d.v
		}
	}
	if *f.snapshotThreshold > 0 {
		c.SnapshotThreshold = *f.snapshotThreshold
	}
	if *f.trailingLogs > 0 {
		c.TrailingLogs = *f.trailingLogs
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return nil, fmt.Errorf("--raft-leader-lease-timeout (%v) is longer than --raft-heartbeat-timeout (%v)", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	return c, nil
}
