package e2e_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"bighive/testkit/wait"
)

// TestBigtableAPIFailover writes through the cluster's frontend process
// with the official Go client (reached as an application reaches the
// emulator, BIGTABLE_EMULATOR_HOST), SIGKILLs the tserver holding most
// of the table's tablets while the writers run, and reads every
// acknowledged row back through the same client: the frontend routes
// through the Bighive client library, whose retries ride through the
// failover, and nothing acknowledged is lost.
func TestBigtableAPIFailover(t *testing.T) {
	skipShort(t, "Bigtable API across a tserver SIGKILL")
	sd := seed(t)
	c, cl := startFailoverCluster(t, 1, "--mem-limit=1073741824")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, bt := officialClients(t, ctx, c.BigtableAddr(), "p", "i")
	var splits []string
	for i := 1; i < 12; i++ {
		splits = append(splits, fmt.Sprintf("w%02d", i))
	}
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "api", SplitKeys: splits,
		Families: map[string]bigtable.GCPolicy{"cf": bigtable.MaxVersionsPolicy(1)}}); err != nil {
		t.Fatalf("CreateTableFromConf: %v", err)
	}
	if err := c.WaitServing(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	tbl := bt.Open("api")

	// Writers: each row once, with an explicit timestamp (idempotent, so
	// the official client may retry it), value = row key.
	var (
		mu    sync.Mutex
		acked []string
		n     atomic.Int64
		wg    sync.WaitGroup
	)
	wctx, stop := context.WithCancel(ctx)
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(sd + int64(w)))
			for i := 0; wctx.Err() == nil; i++ {
				key := fmt.Sprintf("w%02d-%d-%d", rng.Intn(12), w, i)
				m := bigtable.NewMutation()
				m.Set("cf", "v", bigtable.Timestamp(1000), []byte(key))
				actx, acancel := context.WithTimeout(wctx, 30*time.Second)
				err := tbl.Apply(actx, key, m)
				acancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
					n.Add(1)
				}
			}
		}()
	}
	waitAcked := func(want int64) {
		t.Helper()
		wait.For(t, 90*time.Second, fmt.Sprintf("%d acknowledged writes", want), func() error {
			if got := n.Load(); got < want {
				return fmt.Errorf("only %d", got)
			}
			return nil
		})
	}
	waitAcked(300)

	// The victim: the tserver holding most tablets.
	count := map[string]int{}
	for _, addr := range owners(t, ctx, cl, "api") {
		count[addr]++
	}
	victim, most := -1, 0
	for i := range c.NumTServers() {
		if k := count[c.TServerAddr(i)]; k > most {
			victim, most = i, k
		}
	}
	before := n.Load()
	if err := c.KillTServer(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILLed tserver %s holding %d of 12 tablets after %d acknowledged writes", c.TServerAddr(victim), most, before)
	waitAcked(before + 300) // writes go on after the failover
	stop()
	wg.Wait()

	got := map[string]string{}
	err := tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, it := range r["cf"] {
			got[r.Key()] = string(it.Value)
		}
		return true
	})
	if err != nil {
		t.Fatalf("ReadRows: %v", err)
	}
	lost := 0
	for _, k := range acked {
		if got[k] != k {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged row %q reads back as %q", k, got[k])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged rows lost", lost, len(acked))
	}
	t.Logf("%d acknowledged writes through the Bigtable API, all read back (%d rows in the table)", len(acked), len(got))
}
