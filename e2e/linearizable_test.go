package e2e_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"bighive/client"
	"bighive/testkit/cluster"
)

// linOp is one operation of a linearizability history: a write of a
// unique value to a cell, or a read of it.
type linOp struct {
	key   string
	write bool
	value string // written; or, of a read, read ("" for none)
}

// linModel is a register per key (porcupine partitions the history by
// key): a write sets it, a read returns it.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linOp).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(linOp)
		if in.write {
			return true, in.value
		}
		return output.(linOp).value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linOp)
		if in.write {
			return fmt.Sprintf("write(%s, %s)", in.key, in.value)
		}
		return fmt.Sprintf("read(%s) → %q", in.key, output.(linOp).value)
	},
}

// TestLinearizableTServerKills: clients write unique values to and read a
// few cells while tservers are SIGKILLed and restarted, one at a time;
// porcupine checks that the history is linearizable, each cell a
// register.
func TestLinearizableTServerKills(t *testing.T) {
	skipShort(t, "linearizability under tserver crashes")
	linearizable(t, cluster.Options{Masters: 1}, func(c *cluster.Cluster, cl *client.Client, sd int64) []fault {
		pick := busiest(c, cl, "lin", sd)
		var fs []fault
		for i := 0; i < 2; i++ {
			var victim int
			fs = append(fs, fault{
				name: "tserver SIGKILLed",
				inject: func(ctx context.Context) error {
					victim = pick(ctx)
					return c.KillTServer(victim)
				},
				hold: 2 * foLease,
				heal: func(context.Context) error { return c.RestartTServer(victim) },
			})
		}
		return fs
	})
}

// TestHostsLinearizableGluster is TestLinearizableTServerKills on hosts
// over a GlusterFS volume of three replicas with three masters, its
// faults those of a fleet: the busiest tserver cut from its clients, then
// from the masters; the master leader cut from the other masters; a brick
// stopped and restarted.
func TestHostsLinearizableGluster(t *testing.T) {
	hostsTest(t, "linearizability on hosts over GlusterFS with partitions")
	linearizable(t, cluster.Options{Masters: 3, Hosts: hostsOptions()}, func(c *cluster.Cluster, cl *client.Client, sd int64) []fault {
		return faultKit{c: c, lease: foLease, pick: busiest(c, cl, "lin", sd)}.all(t)
	})
}

// linearizable is the linearizability tests' body over opts (its Masters
// and Hosts; three tservers with the failover lease): 8 clients write and
// read 8 cells over 4 tablets while the faults faults returns are
// applied, then porcupine checks the history. A write's timestamp comes
// from one clock of the test, strictly increasing, so a retried write is
// the same cell version and a later write is a newer one. A write that
// failed may have been applied: it returns at infinity (either outcome
// is legal); a failed read is left out.
func linearizable(t *testing.T, opts cluster.Options, faults func(*cluster.Cluster, *client.Client, int64) []fault) {
	sd := seed(t)
	opts.TServers, opts.Lease, opts.Heartbeat = 3, foLease, foHeartbeat
	c := cluster.New(t, opts)
	cl := failoverClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "lin", 4)

	const clients, keys = 8, 8
	began := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		lastTS  atomic.Int64
		acked   atomic.Int64
		failed  atomic.Int64
		reads   atomic.Int64
	)
	nextTS := func() int64 {
		for {
			last, now := lastTS.Load(), time.Now().UnixMicro()
			ts := max(now, last+1)
			if lastTS.CompareAndSwap(last, ts) {
				return ts
			}
		}
	}
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for id := 0; id < clients; id++ {
		rnd := rand.New(rand.NewSource(sd + int64(id)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; lctx.Err() == nil; seq++ {
				key := rowKey(rnd.Intn(keys)*10000/keys + 7)
				in := linOp{key: key, write: rnd.Intn(2) == 0}
				op := porcupine.Operation{ClientId: id, Input: in, Call: time.Since(began).Nanoseconds()}
				octx, ocancel := context.WithTimeout(lctx, 10*time.Second)
				var err error
				if in.write {
					in.value = fmt.Sprintf("c%d-%d", id, seq)
					op.Input = in
					m := client.NewMutation()
					m.Set("cf", "lin", nextTS(), []byte(in.value))
					err = tbl.Apply(octx, key, m)
					op.Output = linOp{}
				} else {
					var r client.Row
					r, err = tbl.Get(octx, key)
					v, _ := r.Value("cf", "lin")
					op.Output = linOp{value: string(v)}
				}
				ocancel()
				op.Return = time.Since(began).Nanoseconds()
				switch {
				case err == nil && in.write:
					acked.Add(1)
				case err == nil:
					reads.Add(1)
				case in.write:
					failed.Add(1)
					op.Return = math.MaxInt64 // applied or not: either is legal
				case lctx.Err() != nil:
					return
				default:
					continue // a failed read says nothing
				}
				mu.Lock()
				history = append(history, op)
				mu.Unlock()
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	waitMoreAcks(t, ctx, func() int { return int(acked.Load()) }, 200)
	figs := applyFaults(t, ctx, cl, tbl, "lin", faults(c, cl, sd), func() int { return int(acked.Load()) })
	waitMoreAcks(t, ctx, func() int { return int(acked.Load()) }, 200)
	stop()
	wg.Wait()
	ran := time.Since(began)

	res, info := porcupine.CheckOperationsVerbose(linModel, history, time.Minute)
	t.Logf("%d operations in %v: %d writes acknowledged, %d failed (outcome unknown), %d reads, across %d faults; porcupine: %s",
		len(history), ran.Round(time.Millisecond), acked.Load(), failed.Load(), reads.Load(), len(figs), res)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("bighive-linearizable-%d.html", sd))
		if err := porcupine.VisualizePath(linModel, info, path); err != nil {
			t.Logf("visualization: %v", err)
		}
		t.Fatalf("the history of %d operations is not linearizable (seed %d; its visualization: %s)", len(history), sd, path)
	default:
		t.Fatalf("porcupine could not decide in a minute whether the history of %d operations is linearizable (%s)", len(history), res)
	}
}
