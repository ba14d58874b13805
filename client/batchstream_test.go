package client_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
)

// TestUnaryCalls reruns the retry-rule tests with the batch stream off:
// the unary path must keep working for tools and other callers.
func TestUnaryCalls(t *testing.T) {
	unaryOnly = true
	defer func() { unaryOnly = false }()
	for name, fn := range map[string]func(*testing.T){
		"RoutingRetries":          TestRoutingRetries,
		"ServerTimeRetryRules":    TestServerTimeRetryRules,
		"TabletMovesAndSplits":    TestTabletMovesAndSplits,
		"DeadlineWhileUnassigned": TestDeadlineWhileUnassigned,
		"BrokenMidFlight":         TestBatchStreamBrokenMidFlight,
	} {
		t.Run(name, fn)
	}
}

// TestBatchStreamConcurrentCallers: many callers share one stream per
// tserver; each gets its own result (puts, gets, and a put of an unknown
// family that fails alone with InvalidArgument).
func TestBatchStreamConcurrentCallers(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{TServers: 2}, "m")
	ctx := ctxT(t)
	for _, k := range []string{"a-pre", "z-pre"} {
		if err := tbl.Put(ctx, k, "cf", "q", []byte("pre-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%c-%02d", "az"[i%2], i)
			switch i % 4 {
			case 0, 1:
				errs[i] = tbl.Put(ctx, key, "cf", "q", []byte(key))
			case 2:
				r, err := tbl.Get(ctx, fmt.Sprintf("%c-pre", "az"[i%2]))
				if v, _ := r.Value("cf", "q"); err == nil && string(v) != fmt.Sprintf("pre-%c-pre", "az"[i%2]) {
					err = fmt.Errorf("get returned %q", v)
				}
				errs[i] = err
			case 3:
				errs[i] = tbl.Put(ctx, key, "nofam", "q", nil)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%4 == 3 {
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("caller %d (unknown family): %v, want InvalidArgument", i, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	for i := range errs {
		if i%4 > 1 {
			continue
		}
		key := fmt.Sprintf("%c-%02d", "az"[i%2], i)
		r, err := tbl.Get(ctx, key)
		if v, _ := r.Value("cf", "q"); err != nil || string(v) != key {
			t.Errorf("row %s: %q %v", key, v, err)
		}
	}
	if n := fc.Calls("BatchCommands"); n != 2 {
		t.Errorf("%d batch streams opened for 2 tservers, want 2", n)
	}
}

// TestBatchStreamBrokenMidFlight: a tserver that goes away while commands
// are in flight on its stream leaves a ServerTime write with an unknown
// outcome (Unavailable, not retried, as a unary call lost mid-flight),
// while an idempotent Put is retried and succeeds once the tserver is
// back, on a new stream.
func TestBatchStreamBrokenMidFlight(t *testing.T) {
	fc, _, tbl := setup(t, clienttest.Options{})
	ctx := ctxT(t)
	if err := tbl.Put(ctx, "warm", "cf", "q", nil); err != nil {
		t.Fatal(err)
	}
	fc.Inject(clienttest.Fault{Method: "MutateRow", Delay: time.Minute, Times: 2})
	before := fc.Calls("MutateRow")
	serverTime, put := make(chan error, 1), make(chan error, 1)
	go func() {
		m := client.NewMutation()
		m.Set("cf", "q", client.ServerTime, []byte("v"))
		serverTime <- tbl.Apply(ctx, "st", m)
	}()
	go func() { put <- tbl.Put(ctx, "p", "cf", "q", []byte("v")) }()
	for fc.Calls("MutateRow") < before+2 { // both are held by the tserver
		select {
		case <-ctx.Done():
			t.Fatal("the writes never reached the tserver")
		case <-time.After(5 * time.Millisecond):
		}
	}
	fc.StopTServer(0)
	err := <-serverTime
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("ServerTime write on a broken stream: %v, want Unavailable (outcome unknown)", err)
	}
	if _, ok := apierr.TabletReason(err); ok {
		t.Fatalf("ServerTime write on a broken stream carries a routing error (meaning not applied): %v", err)
	}
	if err := fc.RestartTServer(0); err != nil {
		t.Fatal(err)
	}
	if err := <-put; err != nil {
		t.Fatalf("idempotent put on a broken stream: %v, want it retried", err)
	}
	if r, err := tbl.Get(ctx, "st"); err != nil || len(r.Cells) != 0 {
		t.Errorf("the ServerTime write was retried: %+v %v", r, err)
	}
	if got := fc.Calls("MutateRow") - before; got != 3 {
		t.Errorf("%d MutateRow calls, want 3 (the held two and the put's retry)", got)
	}
}
