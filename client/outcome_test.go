package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
)

// The status rules of a call that runs out of time (an outcome, not a
// timeout): see the package documentation, "Retry rules".

// TestSentServerTimeWriteWaitsForItsAnswer: a sent ServerTime write is
// not given up at its attempt timeout (no retry may follow it): it waits
// for the tserver's answer, here a success, within the retry timeout.
func TestSentServerTimeWriteWaitsForItsAnswer(t *testing.T) {
	t.Parallel()
	fc, _, tbl := setupWith(t, clienttest.Options{}, []client.Option{client.WithAttemptTimeout(200 * time.Millisecond), client.WithRetryTimeout(5 * time.Second)})
	fc.Inject(clienttest.Fault{Method: "MutateRow", Delay: 700 * time.Millisecond})
	m := client.NewMutation()
	m.Set("cf", "q", client.ServerTime, []byte("v"))
	if err := tbl.Apply(context.Background(), "r", m); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if n := fc.Calls("MutateRow"); n != 1 {
		t.Errorf("%d MutateRow calls, want 1", n)
	}
}

// TestStalledCallsWithoutDeadline: calls without a deadline that a
// stalled tserver never answers (and whose tablet does not move) end, at
// the retry timeout, in Unavailable, never DeadlineExceeded: a read and
// an idempotent write after their retries, a sent ServerTime write with
// its outcome unknown.
func TestStalledCallsWithoutDeadline(t *testing.T) {
	fc, _, tbl := setupWith(t, clienttest.Options{}, []client.Option{client.WithAttemptTimeout(300 * time.Millisecond), client.WithRetryTimeout(time.Second)})
	for _, method := range []string{"MutateRow", "ReadRow"} {
		fc.Inject(clienttest.Fault{Method: method, Delay: time.Minute, Times: 100})
	}
	st := client.NewMutation()
	st.Set("cf", "q", client.ServerTime, []byte("v"))
	for _, tc := range []struct {
		name    string
		call    func() error
		unknown bool
	}{
		{"get", func() error { _, err := tbl.Get(context.Background(), "r"); return err }, false},
		{"put", func() error { return tbl.Put(context.Background(), "r", "cf", "q", nil) }, true},
		{"server time", func() error { return tbl.Apply(context.Background(), "r", st) }, true},
	} {
		start := time.Now()
		err := tc.call()
		if status.Code(err) != codes.Unavailable || time.Since(start) > 3*time.Second {
			t.Errorf("%s: %v after %v; want Unavailable after about 1 s", tc.name, err, time.Since(start))
		}
		if got := strings.Contains(err.Error(), "outcome unknown"); got != tc.unknown {
			t.Errorf("%s: %v; says the outcome is unknown: %v, want %v", tc.name, err, got, tc.unknown)
		}
	}
}
