package e2e_test

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// Tests on hosts (testkit/hosts): every master and tserver in a network
// namespace of its own, the tservers' shared root on a GlusterFS volume
// that each tserver host mounts with its own client. They need root and
// GlusterFS (cluster.New skips them otherwise, and under -short).

// startHostsCluster starts three tservers and one master on hosts over
// GlusterFS, with the failover lease and heartbeat.
func startHostsCluster(t *testing.T, flags ...string) (*cluster.Cluster, *client.Client) {
	t.Helper()
	c := cluster.New(t, cluster.Options{TServers: 3, Lease: foLease, Heartbeat: foHeartbeat, Flags: flags,
		Hosts: &cluster.HostsOptions{Gluster: true}})
	return c, failoverClient(t, c)
}

// lostAcked counts the acknowledged writes that do not read back with
// their value.
func (w *workload) lostAcked(t *testing.T, ctx context.Context) (acked, lost int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	got := map[string]string{}
	if err := w.tbl.Scan(ctx, "", "", func(r client.Row) bool {
		a, _ := r.Value("cf", "a")
		got[r.Key] = string(a)
		return true
	}); err != nil {
		t.Fatalf("scan: %v", err)
	}
	for row, v := range w.acked {
		if got[row] != v {
			lost++
		}
	}
	return len(w.acked), lost
}

// TestHostsFailoverGluster: writers acknowledge writes while a tserver's
// whole host crashes (the tserver and its GlusterFS client SIGKILLed, its
// link down); another host recovers its tablets from its log on the
// volume, and every acknowledged write reads back.
func TestHostsFailoverGluster(t *testing.T) {
	skipShort(t, "failover of a tserver host over GlusterFS")
	sd := seed(t)
	c, cl := startHostsCluster(t, "--mem-limit=1073741824")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, w := writing(t, ctx, c, cl, "hfo", foTablets, 6, 400, sd)

	victim := rand.New(rand.NewSource(sd)).Intn(c.NumTServers())
	addr := c.TServerAddr(victim)
	before := owners(t, ctx, cl, "hfo")
	acksAtKill := w.acks()
	killed := time.Now()
	if err := c.KillTServerHost(victim); err != nil {
		t.Fatal(err)
	}
	back, _ := waitServedElsewhere(t, ctx, cl, "hfo", killed, addr)
	moved := logServedAgain(t, before, back, addr, "host crash")
	w.waitAcks(t, ctx, 200) // writes go on after the recovery
	w.stop()
	acked, lost := w.lostAcked(t, ctx)
	t.Logf("host crash of %s (%d tablets, %d writes acknowledged before it): every tablet served again after %v (lease %v); %d writes acknowledged, %d lost",
		addr, moved, acksAtKill, maxDur(back).Round(time.Millisecond), foLease, acked, lost)
	if moved == 0 {
		t.Errorf("the crashed host %s served no tablet", addr)
	}
	if d := maxDur(back); d > foLease+15*time.Second {
		t.Errorf("recovery took %v, want about the lease (%v) plus a few seconds", d, foLease)
	}
	w.verify(t, ctx)
}
