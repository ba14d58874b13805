package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// hostsLong lengthens the suites on hosts: every fault held longer and
// applied more times. The default keeps the whole multi-host part of the
// full run within about five minutes.
var hostsLong = flag.Bool("hosts.long", false, "suites on hosts (TestHosts*): hold every fault five times longer and apply the list three times")

// hostsTest starts a test on hosts: skipped under -short, and run in
// parallel with the package's other tests on hosts (after its sequential
// tests; two at a time on two cores), each with its own bridge, hosts
// and volume: they spend most of their time waiting on leases, elections
// and faults held.
func hostsTest(t *testing.T, what string) {
	t.Helper()
	skipShort(t, what)
	t.Parallel()
}

// hostsOptions are the suites' hosts: GlusterFS, three replicas (one
// brick can be stopped).
func hostsOptions() *cluster.HostsOptions {
	return &cluster.HostsOptions{Gluster: true, Replicas: 3}
}

// suiteCluster starts a cluster for a suite that runs both locally and
// on hosts; on hosts the client has short attempts (a request to a cut
// tserver fails over in a second) and the test skips where hosts cannot
// run.
func suiteCluster(t *testing.T, opts cluster.Options) (*cluster.Cluster, *client.Client) {
	t.Helper()
	if opts.Hosts == nil {
		return startCluster(t, opts)
	}
	c := cluster.New(t, opts)
	return c, failoverClient(t, c)
}

// fault is one fault a suite applies while its writers run: inject starts
// it, hold is how long it lasts, heal (nil: none) ends it. After the heal
// the suite waits until every tablet of its table takes a write again.
type fault struct {
	name   string
	inject func(ctx context.Context) error
	hold   time.Duration
	heal   func(ctx context.Context) error
}

// faultFigure is what one applied fault cost.
type faultFigure struct {
	name string
	held time.Duration
	// outage is the longest time, from the inject until every tablet
	// took a write after the heal, between two probe rounds in which
	// every tablet took one (the rounds 100 ms apart): how long some
	// tablet took no write (a tserver cut from the masters: from its
	// lease's end to its tablets' new owners; cut from its clients: until
	// the heal). afterHeal is from the heal to the first such round.
	outage, afterHeal time.Duration
	acked             int // writes the suite's writers had acknowledged at the heal
}

// faultKit builds the faults of a cluster on hosts. pick chooses the
// tserver a fault hits (the busiest one of the suite's table, say).
type faultKit struct {
	c     *cluster.Cluster
	lease time.Duration
	pick  func(ctx context.Context) int
}

// cutFromMasters: a tserver cut from every master, not from the file
// system or its clients, for three leases: its tablets move, its lease
// fences it; healed, it registers again.
func (k faultKit) cutFromMasters() fault {
	return k.cutTServer("tserver cut from the masters", 3*k.lease, k.c.CutTServerFromMasters)
}

// cutFromClients: a tserver cut from its clients only (the test and the
// frontend) for two leases: it keeps its lease and its tablets, which
// take no write until the heal.
func (k faultKit) cutFromClients() fault {
	return k.cutTServer("tserver cut from its clients", 2*k.lease, k.c.CutTServerFromClients)
}

// cutTServer is a fault that cuts the tserver pick chooses with cut, and
// heals it after hold.
func (k faultKit) cutTServer(name string, hold time.Duration, cut func(context.Context, int) error) fault {
	var victim int
	return fault{
		name: name,
		inject: func(ctx context.Context) error {
			victim = k.pick(ctx)
			return cut(ctx, victim)
		},
		hold: hold,
		heal: func(ctx context.Context) error { return k.c.HealTServer(ctx, victim) },
	}
}

// cutLeader: the master leader cut from the other masters (it needs
// three) for three leases: they elect another, which takes over the
// tservers.
func (k faultKit) cutLeader() fault {
	var leader int
	return fault{
		name: "master leader cut from the other masters",
		inject: func(ctx context.Context) (err error) {
			if leader, err = k.c.Leader(ctx); err != nil {
				return err
			}
			return k.c.CutMasterFromMasters(ctx, leader)
		},
		hold: 3 * k.lease,
		heal: func(ctx context.Context) error { return k.c.HealMaster(ctx, leader) },
	}
}

// stopBrick: one brick of the replicated volume killed for three leases,
// then started again. The self-heal daemon copies to it what it missed
// meanwhile; while writers run the files they write stay listed to heal,
// so the heal logs how many there are and does not wait for none.
func (k faultKit) stopBrick(t *testing.T, i int) fault {
	return fault{
		name:   fmt.Sprintf("brick %d of %d stopped", i, len(k.c.Volume().Bricks)),
		inject: func(ctx context.Context) error { return k.c.Volume().StopBrick(ctx, i) },
		hold:   3 * k.lease,
		heal: func(ctx context.Context) error {
			// glusterd may refuse the restart for a while after the
			// kill; StartBrick retries until this bound.
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := k.c.Volume().StartBrick(sctx, i); err != nil {
				return err
			}
			n, err := k.c.Volume().HealPending(ctx)
			t.Logf("brick %d back: %d entries to heal (%v)", i, n, err)
			return nil
		},
	}
}

// all is every fault of the kit that the cluster can take: the leader's
// cut with three masters, the brick's with a replicated volume.
func (k faultKit) all(t *testing.T) []fault {
	fs := []fault{k.cutFromMasters(), k.cutFromClients()}
	if len(k.c.MasterAddrs()) >= 3 {
		fs = append(fs, k.cutLeader())
	}
	if v := k.c.Volume(); v != nil && len(v.Bricks) >= 3 {
		fs = append(fs, k.stopBrick(t, len(v.Bricks)-1))
	}
	return fs
}

// busiest returns a picker of the tserver serving the most tablets of
// table (ties and errors: a seeded choice).
func busiest(c *cluster.Cluster, cl *client.Client, table string, sd int64) func(ctx context.Context) int {
	rnd := rand.New(rand.NewSource(sd))
	return func(ctx context.Context) int {
		best, n := rnd.Intn(c.NumTServers()), 0
		tablets, err := cl.Tablets(ctx, table)
		if err != nil {
			return best
		}
		count := map[string]int{}
		for _, tb := range tablets {
			count[tb.TServer]++
		}
		for i := 0; i < c.NumTServers(); i++ {
			if m := count[c.TServerAddr(i)]; m > n {
				best, n = i, m
			}
		}
		return best
	}
}

// applyFaults applies faults one after the other while the suite's
// writers run (hosts.long: each held five times longer, the list three
// times). From each inject until every tablet takes a write after the
// heal it probes every tablet of table over and over (a row of the
// tablet's key range, each written once), and logs what the fault cost.
// acks counts the writers' acknowledged writes.
func applyFaults(t *testing.T, ctx context.Context, cl *client.Client, tbl *client.Table, table string, faults []fault, acks func() int) []faultFigure {
	t.Helper()
	rounds, stretch := 1, time.Duration(1)
	if *hostsLong {
		rounds, stretch = 3, 5
	}
	probes := 0
	probe := func(timeout time.Duration) error {
		tablets, err := cl.Tablets(ctx, table)
		if err != nil {
			return err
		}
		for _, tb := range tablets {
			probes++
			row := fmt.Sprintf("%s-probe-%06d", tb.StartRow, probes)
			pctx, cancel := context.WithTimeout(ctx, timeout)
			err := tbl.Put(pctx, row, "cf", "q", []byte(row))
			cancel()
			if err != nil {
				return fmt.Errorf("probe of tablet %s: %w", tb.ID, err)
			}
		}
		return nil
	}
	var figs []faultFigure
	for r := 0; r < rounds; r++ {
		for _, f := range faults {
			fig := faultFigure{name: f.name}
			began := time.Now()
			lastOK := began
			var lastErr error
			// round probes once; when every tablet took its write it
			// keeps the time since the previous such round (a write to a
			// tablet that moves waits in the client's retries) and
			// reports true.
			round := func(timeout time.Duration) bool {
				if lastErr = probe(timeout); lastErr != nil {
					return false
				}
				fig.outage = max(fig.outage, time.Since(lastOK))
				lastOK = time.Now()
				return true
			}
			if err := f.inject(ctx); err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
			for end := began.Add(f.hold * stretch); time.Until(end) > 0; {
				if round(min(5*time.Second, time.Until(end))) {
					time.Sleep(min(100*time.Millisecond, time.Until(end)))
				}
			}
			if f.heal != nil {
				if err := f.heal(ctx); err != nil {
					t.Fatalf("%s: heal: %v", f.name, err)
				}
			}
			healed := time.Now()
			fig.held, fig.acked = healed.Sub(began), acks()
			for !round(5 * time.Second) {
				if ctx.Err() != nil {
					t.Fatalf("%s: not every tablet takes a write %v after the heal: %v", f.name, time.Since(healed).Round(time.Millisecond), lastErr)
				}
			}
			fig.afterHeal = time.Since(healed)
			t.Logf("fault %q: held %v; the longest some tablet took no write %v; every tablet took one %v after the heal; %d writes acknowledged by then",
				f.name, fig.held.Round(time.Millisecond), fig.outage.Round(time.Millisecond), fig.afterHeal.Round(time.Millisecond), fig.acked)
			figs = append(figs, fig)
		}
	}
	return figs
}
