package tserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/ports"
	"bighive/testkit/wait"
)

// FreeAddr returns a loopback address free a moment ago, for a server a
// test starts; the package's external tests use it too.
func FreeAddr(t *testing.T) string {
	t.Helper()
	return ports.AddrT(t)
}

// SoleMasterRaft is the raft configuration of a test's only master. As
// raft's only voter its timeouts only decide how soon it elects itself:
// at once, not after raft's default 1 to 2 s. The package's external
// tests use it too.
func SoleMasterRaft() *raft.Config {
	rc := raft.DefaultConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	return rc
}

// startWithMaster starts a master and one tserver of this package in a
// fresh directory, closed when the test ends: a lease of 10 s, heartbeats
// every 200 ms. mcfg and topts, when set, adjust the master's and the
// tserver's options first.
func startWithMaster(t *testing.T, mcfg func(*master.Config), topts func(*Options)) (*master.Master, *Server) {
	t.Helper()
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := master.Config{ID: "m1", Dir: filepath.Join(dir, "master"), RaftAddr: FreeAddr(t), Raft: SoleMasterRaft(),
		Lease: 10 * time.Second, Heartbeat: 200 * time.Millisecond, TickInterval: 50 * time.Millisecond, Logger: quiet}
	if mcfg != nil {
		mcfg(&cfg)
	}
	m, err := master.Start(cfg, lis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	opts := Options{Listen: FreeAddr(t), Masters: []string{m.Addr()}, Root: filepath.Join(dir, "root"),
		HeartbeatInterval: 200 * time.Millisecond, Logger: quiet}
	if topts != nil {
		topts(&opts)
	}
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// heldReport returns the heartbeat's report of tablet id, nil if none.
func heldReport(s *Server, id string) *pb.TabletReport {
	for _, r := range s.reports() {
		if r.TabletId == id {
			return r
		}
	}
	return nil
}

// TestPendingLoadHeldAndCancelled: a tablet whose load waits for a slot is
// held (a heartbeat lists it, not serving, at its epoch), and an
// unassignment of it, or a later epoch's assignment, cancels that load
// before it opens. Before, a waiting load was in no heartbeat and ignored
// the unassignment: the master took the heartbeat without it as the end
// of a move, assigned the tablet to the new owner, and this tserver's load
// went on, committed its load report first and served the old epoch beside
// the new owner, whose replay of its log missed the writes acknowledged
// here after it.
func TestPendingLoadHeldAndCancelled(t *testing.T) {
	_, s := startWithMaster(t, func(c *master.Config) { c.Lease, c.Heartbeat = 3*time.Hour, time.Hour }, nil)
	ctx := context.Background()
	// The first heartbeat's reply applied, no other comes unless nudged
	// (the interval is an hour): no reply of the master's own undoes what
	// the test does.
	wait.For(t, time.Minute, "a valid lease", func() error {
		if !s.leaseValid() {
			return errors.New("no valid lease")
		}
		return nil
	})

	// Every load slot taken: an assigned tablet's load waits.
	for range cap(s.loadSlots) {
		s.loadSlots <- struct{}{}
	}
	defer func() {
		for range cap(s.loadSlots) {
			<-s.loadSlots
		}
	}()
	assign := func(id string, epoch int64) *pb.TabletAssignment {
		a := &pb.TabletAssignment{Tablet: &pb.TabletMeta{TabletId: id, Table: "t", Epoch: epoch, Range: &pb.RowRange{}}}
		s.applyAssignments(ctx, []*pb.TabletAssignment{a}, nil)
		return a
	}

	for _, tc := range []struct {
		name   string
		cancel func(id string)
	}{
		{"unassigned", func(id string) {
			s.applyAssignments(ctx, nil, []*pb.TabletUnassignment{{TabletId: id, Epoch: 3}})
		}},
		{"reassigned at a later epoch", func(id string) { assign(id, 4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "pending-" + tc.name
			a := assign(id, 3)
			if r := heldReport(s, id); r == nil || r.Epoch != 3 || r.Serving {
				t.Fatalf("heartbeat report of the waiting load = %v, want epoch 3, not serving", r)
			}
			tc.cancel(id)
			if r := heldReport(s, id); r != nil && r.Epoch == 3 {
				t.Fatalf("heartbeat still reports the cancelled load: %v", r)
			}
			// The waiting load's goroutine, once it gets its slot, opens
			// nothing.
			if r := s.openAssigned(a); r != nil {
				t.Fatalf("the cancelled load of epoch 3 opened tablet %s at epoch %d", r.ID(), r.Epoch())
			}
			if r := s.tablets.get(id); r != nil {
				t.Fatalf("tablet %s registered at epoch %d after its load was cancelled", id, r.Epoch())
			}
		})
	}
}
