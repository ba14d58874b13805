package e2e_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
)

// TestCompareAndSetAcrossSplitAndKill: goroutines advance one row's value
// by compare-and-set (read v, then a conditional mutation "if the latest
// v is still k, set k+1") while the row's tablet splits at the row and
// then its tserver process is SIGKILLed. No round k+1 has two
// acknowledged winners (two conditional mutations that both saw k), and
// the value ends within [acknowledged wins, acknowledged wins + calls of
// unknown outcome]: the client never retries a conditional mutation
// after it may have reached a tserver.
func TestCompareAndSetAcrossSplitAndKill(t *testing.T) {
	skipShort(t, "compare-and-set across a split and a SIGKILL")
	c, cl := spCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "cas", 1)
	const row = "m-lock"
	set := func(v int) *client.Mutation {
		m := client.NewMutation()
		m.Set("cf", "v", client.ServerTime, []byte(strconv.Itoa(v)))
		return m
	}
	if err := tbl.Apply(ctx, row, set(0)); err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context) (int, error) {
		r, err := tbl.Get(ctx, row, client.LatestN(1))
		if err != nil {
			return 0, err
		}
		v, _ := r.Value("cf", "v")
		return strconv.Atoi(string(v))
	}
	var acked, unknown atomic.Int64
	var mu sync.Mutex
	wins := map[int]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				k, err := read(wctx)
				if err != nil {
					cancel()
					continue
				}
				cond := client.ChainFilters(client.ColumnFilter("v"), client.LatestNFilter(1),
					client.ValueFilter(regexp.QuoteMeta(strconv.Itoa(k))))
				var won bool
				err = tbl.Apply(wctx, row, client.NewCondMutation(cond, set(k+1), nil), client.GetCondMutationResult(&won))
				cancel()
				switch {
				case err != nil:
					unknown.Add(1)
				case won:
					acked.Add(1)
					mu.Lock()
					wins[k+1]++
					mu.Unlock()
				}
			}
		}()
	}
	splitThenKillRowOwner(t, ctx, c, cl, "cas", row, &acked, 50, "wins")
	close(stop)
	wg.Wait()
	got, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, u := acked.Load(), unknown.Load()
	t.Logf("value %d, acknowledged wins %d, unknown %d", got, a, u)
	for k, w := range wins {
		if w > 1 {
			t.Errorf("round %d had %d acknowledged winners", k, w)
		}
	}
	if int64(got) < a || int64(got) > a+u {
		t.Fatalf("value %d, want within [acknowledged %d, acknowledged+unknown %d]", got, a, a+u)
	}
}
