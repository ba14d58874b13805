package main

import (
	"flag"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"bighive/master"
)

func TestRaftFlags(t *testing.T) {
	def := master.DefaultRaftConfig()
	for _, tc := range []struct {
		name  string
		args  []string
		check func(*raft.Config) bool
		err   bool
	}{
		{"defaults", nil, func(c *raft.Config) bool {
			return c.HeartbeatTimeout == def.HeartbeatTimeout && c.ElectionTimeout == def.ElectionTimeout &&
				c.LeaderLeaseTimeout == def.LeaderLeaseTimeout && c.SnapshotThreshold == def.SnapshotThreshold &&
				c.TrailingLogs == def.TrailingLogs && c.SnapshotInterval == def.SnapshotInterval
		}, false},
		{"all set", []string{"--raft-heartbeat-timeout=2s", "--raft-election-timeout=3s", "--raft-leader-lease-timeout=1s",
			"--raft-snapshot-interval=1h", "--raft-snapshot-threshold=7", "--raft-trailing-logs=1"}, func(c *raft.Config) bool {
			return c.HeartbeatTimeout == 2*time.Second && c.ElectionTimeout == 3*time.Second && c.LeaderLeaseTimeout == time.Second &&
				c.SnapshotInterval == time.Hour && c.SnapshotThreshold == 7 && c.TrailingLogs == 1
		}, false},
		{"lease longer than heartbeat timeout", []string{"--raft-leader-lease-timeout=3s"}, nil, true},
		{"negative", []string{"--raft-election-timeout=-1s"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("master", flag.ContinueOnError)
			rf := addRaftFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := rf.config()
			if (err != nil) != tc.err {
				t.Fatalf("config() error %v, want error %v", err, tc.err)
			}
			if err == nil && !tc.check(c) {
				t.Fatalf("config() = %+v, not what %v ask for", c, tc.args)
			}
		})
	}
}
