package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// holdFirstWrite makes the next MutateRow wait hold, starts a Put of row
// "held" and returns once that Put is in flight, so that writes to the
// same tablet started now queue behind it. The returned channel yields
// the held Put's error.
func holdFirstWrite(t *testing.T, fc *clienttest.Cluster, tbl *client.Table, hold time.Duration) <-chan error {
	t.Helper()
	calls := fc.Calls("MutateRow")
	fc.Inject(clienttest.Fault{Method: "MutateRow", Delay: hold})
	done := make(chan error, 1)
	go func() { done <- tbl.Put(context.Background(), "held", "cf", "q", []byte("h")) }()
	wait.For(t, 5*time.Second, "the held Put at the tserver", func() error {
		if fc.Calls("MutateRow") == calls {
			return errors.New("no MutateRow call")
		}
		return nil
	})
	return done
}

// putConcurrently runs write(i) for i in [0, n) on n goroutines and
// returns their errors.
func putConcurrently(n int, write func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = write(i)
		}()
	}
	wg.Wait()
	return errs
}

// TestWriteCoalescing: writes queued behind one in flight go in few
// MutateRows; each caller gets its own row's outcome; a bad row fails
// alone.
func TestWriteCoalescing(t *testing.T) {
	fc, _, tbl := setupWith(t, clienttest.Options{}, []client.Option{client.WithBatchStream(false)})
	ctx := ctxT(t)
	held := holdFirstWrite(t, fc, tbl, 300*time.Millisecond)
	const n = 20
	errs := putConcurrently(n, func(i int) error {
		if i == 7 {
			m := client.NewMutation()
			m.Set("nofamily", "q", 5, []byte("x"))
			return tbl.Apply(ctx, "bad", m)
		}
		return tbl.Put(ctx, rowKey(i), "cf", "q", []byte(fmt.Sprint(i)))
	})
	if err := <-held; err != nil {
		t.Fatalf("held put: %v", err)
	}
	for i, err := range errs {
		if i == 7 {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `apply to row "bad"`) {
				t.Errorf("bad row: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("row %d: %v", i, err)
		}
	}
	batches, singles := fc.Calls("MutateRows"), fc.Calls("MutateRow")
	if batches == 0 || batches+singles > 8 {
		t.Errorf("%d MutateRows and %d MutateRow calls for %d queued writes", batches, singles, n)
	}
	for i := range n {
		if i == 7 {
			continue
		}
		r, err := tbl.Get(ctx, rowKey(i))
		if v, _ := r.Value("cf", "q"); err != nil || string(v) != fmt.Sprint(i) {
			t.Errorf("row %d: %q %v", i, v, err)
		}
	}
}

// TestCoalescedFailures: a coalesced attempt that fails is retried alone,
// once per failed row, and every row ends up applied exactly once.
func TestCoalescedFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault clienttest.Fault
		// retried is how many rows must have been sent again alone.
		retried int
	}{
		{"request not serving", clienttest.Fault{Method: "MutateRows", Err: apierr.Tablet(pb.TabletError_NOT_SERVING, "", 0, "moved")}, 10},
		{"reply lost after applying", clienttest.Fault{Method: "MutateRows", Applied: true, Err: apierr.Unavailable("connection reset")}, 10},
		{"row unavailable after logging", clienttest.Fault{Method: "MutateRows", Row: rowKey(3), Applied: true, Err: apierr.Unavailable("lease lost")}, 1},
		{"row outside the tablet", clienttest.Fault{Method: "MutateRows", Row: rowKey(4), Err: apierr.FailedPrecondition("row is outside tablet")}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc, _, tbl := setupWith(t, clienttest.Options{}, []client.Option{client.WithBatchStream(false)})
			ctx := ctxT(t)
			fc.Inject(tc.fault)
			held := holdFirstWrite(t, fc, tbl, 300*time.Millisecond)
			singles := fc.Calls("MutateRow")
			const n = 10
			errs := putConcurrently(n, func(i int) error {
				m := client.NewMutation()
				m.Set("cf", "q", 100, []byte(fmt.Sprint(i)))
				return tbl.Apply(ctx, rowKey(i), m)
			})
			if err := <-held; err != nil {
				t.Fatalf("held put: %v", err)
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("row %d: %v", i, err)
				}
			}
			if got := fc.Calls("MutateRow") - singles; got < tc.retried {
				t.Errorf("%d rows sent alone, want at least %d", got, tc.retried)
			}
			for i := range n {
				r, err := tbl.Get(ctx, rowKey(i))
				if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != fmt.Sprint(i) {
					t.Errorf("row %d: %+v %v", i, r, err)
				}
			}
		})
	}
}

// TestCoalescingBypass: mutations with ServerTime, and every write with
// coalescing off, are sent alone at once, even behind a write in flight.
func TestCoalescingBypass(t *testing.T) {
	t.Run("server time", func(t *testing.T) {
		fc, _, tbl := setupWith(t, clienttest.Options{}, []client.Option{client.WithBatchStream(false)})
		ctx := ctxT(t)
		held := holdFirstWrite(t, fc, tbl, time.Second)
		m := client.NewMutation()
		m.Set("cf", "q", client.ServerTime, []byte("v"))
		if err := tbl.Apply(ctx, "st", m); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held:
			t.Error("the ServerTime write waited for the write in flight")
		default:
		}
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if n := fc.Calls("MutateRows"); n != 0 {
			t.Errorf("%d MutateRows calls", n)
		}
	})
	t.Run("coalescing off", func(t *testing.T) {
		fc := clienttest.Start(t, clienttest.Options{})
		if err := fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}}); err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(context.Background(), fc.MasterAddrs(), client.WithWriteCoalescing(false), client.WithBatchStream(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := ctxT(t)
		tbl, err := c.Open(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		held := holdFirstWrite(t, fc, tbl, 300*time.Millisecond)
		errs := putConcurrently(10, func(i int) error { return tbl.Put(ctx, rowKey(i), "cf", "q", nil) })
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("row %d: %v", i, err)
			}
		}
		if n, m := fc.Calls("MutateRows"), fc.Calls("MutateRow"); n != 0 || m != 11 {
			t.Errorf("%d MutateRows and %d MutateRow calls, want 0 and 11", n, m)
		}
	})
}

// TestCoalescedDeadline: a caller whose context ends while its write waits
// in the queue returns at once with DeadlineExceeded.
func TestCoalescedDeadline(t *testing.T) {
	fc, _, tbl := setupWith(t, clienttest.Options{}, []client.Option{client.WithBatchStream(false)})
	held := holdFirstWrite(t, fc, tbl, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := tbl.Put(ctx, "late", "cf", "q", nil)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), `put row "late"`) {
		t.Errorf("put: %v", err)
	}
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("the put returned after %v", d)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// The abandoned write was dropped from the queue, not sent.
	if n := fc.Calls("MutateRows"); n != 0 {
		t.Errorf("%d MutateRows calls", n)
	}
	if r, err := tbl.Get(ctxT(t), "late"); err != nil || len(r.Cells) != 0 {
		t.Errorf("the abandoned write was applied: %+v %v", r, err)
	}
}
