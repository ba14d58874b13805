package e2e_test

import (
	"context"
	"math/rand"
	"testing"
	"time"
)

// electionBound is a generous bound on a raft election after the leader
// stops answering (the masters run hashicorp/raft's defaults: a follower
// notices after one to two heartbeat timeouts of 1 s, then elects).
const electionBound = 3 * time.Second

// TestHungMasterLeader: SIGSTOP the master leader of three while writers
// run. The tservers and the client must give up on the hung leader per
// attempt and find the new one, so writes go on being acknowledged within
// about a lease plus an election. A tserver SIGKILLed while the old leader
// is still hung — once writes resumed, or at once, before the election —
// is recovered by the new leader (its tablets serve again on the other
// tservers), and every acknowledged write reads back.
func TestHungMasterLeader(t *testing.T) {
	skipShort(t, "hung (SIGSTOPped) master leader")
	for _, tc := range []struct {
		name     string
		killSoon bool // kill the tserver right after the pause, before the election
	}{
		{"kill after writes resumed", false},
		{"kill during the election", true},
	} {
		t.Run(tc.name, func(t *testing.T) { testHungMasterLeader(t, tc.killSoon) })
	}
}

func testHungMasterLeader(t *testing.T, killSoon bool) {
	sd := seed(t)
	c, cl := startFailoverCluster(t, 3, "--mem-limit=1073741824")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "hung", foTablets)
	w := startWorkload(ctx, tbl, sd, 4)
	defer w.stop()
	w.waitAcks(t, ctx, 300)

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	if err := c.PauseMaster(leader); err != nil {
		t.Fatal(err)
	}
	defer c.ResumeMaster(leader) // Close resumes it too; this is for a failed test's logs
	t.Logf("paused master leader %d (SIGSTOP)", leader)

	victim := rand.New(rand.NewSource(sd)).Intn(c.NumTServers())
	addr := c.TServerAddr(victim)
	var killed time.Time
	kill := func() {
		killed = time.Now()
		if err := c.KillTServer(victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed tserver %s %v after the pause", addr, killed.Sub(paused).Round(time.Millisecond))
	}
	if killSoon {
		kill()
	}

	// Acknowledgements: poll the count, record the longest stretch without
	// a new one, and go on until well past a lease and an election after
	// the pause with acknowledgements flowing. Fail once a stretch passes
	// the generous bound (a killed tserver's recovery included: a lease and
	// its margin, a log split and a load, all well inside it).
	bound := foLease + electionBound + 10*time.Second
	observe := 2 * (foLease + electionBound)
	base := w.acks()
	lastN, lastAck := base, paused
	var longest time.Duration
	for time.Since(paused) < observe || time.Since(lastAck) > 500*time.Millisecond {
		if n := w.acks(); n > lastN {
			longest = max(longest, time.Since(lastAck))
			lastN, lastAck = n, time.Now()
		}
		if gap := time.Since(lastAck); gap > bound {
			t.Fatalf("no write acknowledged for %v after the master leader was paused (bound %v = lease %v + election %v + 10 s)",
				gap.Round(time.Millisecond), bound, foLease, electionBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("with the leader paused, the longest stretch without an acknowledged write was %v (lease %v, election bound %v); %d writes acknowledged since the pause",
		longest.Round(time.Millisecond), foLease, electionBound, lastN-base)

	newLeader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newLeader == leader {
		t.Fatalf("master %d answers as leader while paused", leader)
	}
	if !killSoon {
		kill()
	}
	// The new leader must declare the killed tserver dead and move its
	// tablets, the old leader still hung.
	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	back, _ := waitServedElsewhere(t, rctx, cl, "hung", killed, addr)
	t.Logf("new leader %d: every tablet of the killed tserver served again %v after the kill, the old leader still paused",
		newLeader, maxDur(back).Round(time.Millisecond))
	w.waitAcks(t, ctx, 200)
	w.stop()
	w.verify(t, ctx)
	checkLogSplit(t, c, addr)
}
