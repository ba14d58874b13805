package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/testkit/wait"
)

// The tests of a call that waits on a stalled tserver while its tablet
// moves (calls follow the tablet; an outcome, not a timeout): the fake
// holds the call at tserver 0 (a Delay fault) and the tablet moves to
// tserver 1. The attempt timeout is 5 s, as by default, and a move is
// checked for after 200 ms, so a call that follows the tablet returns
// well before its attempt would have timed out.

const (
	followCheck   = 200 * time.Millisecond
	followAttempt = 5 * time.Second
	// followWithin bounds a call that follows a move: the check, a
	// lookup, a retry; far under the attempt timeout.
	followWithin = 2 * time.Second
)

// setupFollow starts two tservers with table "t" in one tablet, on
// tserver 0.
func setupFollow(t *testing.T, opts ...client.Option) (*clienttest.Cluster, *client.Table) {
	t.Helper()
	opts = append([]client.Option{client.WithAttemptTimeout(followAttempt), client.WithMoveCheck(followCheck)}, opts...)
	fc, _, tbl := setupWith(t, clienttest.Options{TServers: 2}, opts)
	return fc, tbl
}

// held starts call on a goroutine once the next method call at tserver 0
// is held there (for longer than the test), and waits until it is.
func held(t *testing.T, fc *clienttest.Cluster, method string, call func() error) <-chan error {
	t.Helper()
	calls := fc.Calls(method)
	fc.Inject(clienttest.Fault{Method: method, Server: fc.TServerAddr(0), Delay: time.Minute})
	done := make(chan error, 1)
	go func() { done <- call() }()
	wait.For(t, 5*time.Second, "the call held at tserver 0", func() error {
		if fc.Calls(method) == calls {
			return errors.New("no call yet")
		}
		return nil
	})
	return done
}

// result waits for a call's error, failing the test if it takes longer
// than within from start.
func result(t *testing.T, done <-chan error, start time.Time, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		if d := time.Since(start); d > within {
			t.Errorf("the call returned after %v, want within %v", d, within)
		}
		return err
	case <-time.After(within + followAttempt):
		t.Fatalf("the call did not return within %v", within+followAttempt)
		return nil
	}
}

// TestFollowMoveIdempotentWrite: a Put held by a stalled tserver
// completes on the tablet's new owner once the tablet moves.
func TestFollowMoveIdempotentWrite(t *testing.T) {
	fc, tbl := setupFollow(t)
	start := time.Now()
	done := held(t, fc, "MutateRow", func() error { return tbl.Put(context.Background(), "r", "cf", "q", []byte("v")) })
	fc.MoveTablet("t", "r", 1)
	if err := result(t, done, start, followWithin); err != nil {
		t.Fatalf("put: %v", err)
	}
	if r, err := tbl.Get(ctxT(t), "r"); err != nil || len(r.Cells) != 1 {
		t.Fatalf("get: %+v %v", r, err)
	}
}

// TestFollowMoveRead: a Get held by a stalled tserver completes on the
// tablet's new owner within about the check's interval.
func TestFollowMoveRead(t *testing.T) {
	fc, tbl := setupFollow(t)
	ctx := ctxT(t)
	if err := tbl.Put(ctx, "r", "cf", "q", []byte("v")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var row client.Row
	done := held(t, fc, "ReadRow", func() error {
		var err error
		row, err = tbl.Get(context.Background(), "r")
		return err
	})
	fc.MoveTablet("t", "r", 1)
	if err := result(t, done, start, followWithin); err != nil {
		t.Fatalf("get: %v", err)
	}
	if v, ok := row.Value("cf", "q"); !ok || string(v) != "v" {
		t.Fatalf("get: %+v", row)
	}
}

// TestFollowMoveSentServerTimeWrite: a ServerTime write that reached the
// stalled tserver is not re-sent when the tablet moves (it may have been
// applied); it ends at once with Unavailable saying its outcome is
// unknown, not with DeadlineExceeded.
func TestFollowMoveSentServerTimeWrite(t *testing.T) {
	fc, tbl := setupFollow(t)
	m := client.NewMutation()
	m.Set("cf", "q", client.ServerTime, []byte("v"))
	start := time.Now()
	done := held(t, fc, "MutateRow", func() error { return tbl.Apply(context.Background(), "r", m) })
	fc.MoveTablet("t", "r", 1)
	err := result(t, done, start, followWithin)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("apply: %v; want Unavailable, outcome unknown", err)
	}
	if n := fc.Calls("MutateRow"); n != 1 {
		t.Errorf("%d MutateRow calls, want 1 (no re-send)", n)
	}
}

// TestFollowMoveUnsentServerTimeWrite: a ServerTime write that waits
// behind a stalled stream, never sent, is sent to the tablet's new owner
// once the tablet moves, and applied there once. The stream to tserver 0
// is stalled for real: the fake does not read it, so writes larger than
// its flow-control window hold the client's sender, and the write queued
// behind them is not sent. The large Puts were sent: idempotent, they
// complete on the new owner too.
func TestFollowMoveUnsentServerTimeWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes 36 MiB to fill the stream's flow-control window")
	}
	fc, tbl := setupFollow(t)
	fc.Inject(clienttest.Fault{Method: "BatchCommands", Server: fc.TServerAddr(0), Delay: time.Minute})
	big := bytes.Repeat([]byte("x"), 9<<20)
	start := time.Now()
	bigDone := make(chan error, 4)
	for i := range 4 {
		go func() { bigDone <- tbl.Put(context.Background(), "r", "cf", string(rune('a'+i)), big) }()
	}
	time.Sleep(300 * time.Millisecond) // the sender blocks on the full window
	m := client.NewMutation()
	m.Set("cf", "st", client.ServerTime, []byte("v"))
	done := make(chan error, 1)
	go func() { done <- tbl.Apply(context.Background(), "r", m) }()
	time.Sleep(100 * time.Millisecond)
	fc.MoveTablet("t", "r", 1)
	if err := result(t, done, start, followWithin+time.Second); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for range 4 {
		if err := result(t, bigDone, start, followWithin+2*time.Second); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	r, err := tbl.Get(ctxT(t), "r", client.Column("cf", "st"))
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("the ServerTime write: %+v %v; want one cell", r, err)
	}
}

// TestFollowMoveScan: a scan whose tserver stalls before its first
// message resumes on the tablet's new owner within about the check's
// interval, not after the attempt timeout's silence.
func TestFollowMoveScan(t *testing.T) {
	fc, tbl := setupFollow(t)
	ctx := ctxT(t)
	for _, k := range []string{"a", "b", "c"} {
		if err := tbl.Put(ctx, k, "cf", "q", []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var keys []string
	done := held(t, fc, "ScanRows", func() error {
		return tbl.Scan(context.Background(), "", "", func(r client.Row) bool {
			keys = append(keys, r.Key)
			return true
		})
	})
	fc.MoveTablet("t", "a", 1)
	if err := result(t, done, start, followWithin); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if strings.Join(keys, ",") != "a,b,c" {
		t.Fatalf("scan delivered %v", keys)
	}
}

// TestFollowMoveWhileStreamOpens: a ServerTime write that waits for its
// stream to a tserver to open (the port accepts connections, nothing
// answers: a paused process) was never sent, and is sent to the tablet's
// new owner once the tablet moves.
func TestFollowMoveWhileStreamOpens(t *testing.T) {
	fc, tbl := setupFollow(t)
	silence(t, fc, 0)
	m := client.NewMutation()
	m.Set("cf", "q", client.ServerTime, []byte("v"))
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- tbl.Apply(context.Background(), "r", m) }()
	time.Sleep(100 * time.Millisecond)
	fc.MoveTablet("t", "r", 1)
	if err := result(t, done, start, followWithin); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if r, err := tbl.Get(ctxT(t), "r"); err != nil || len(r.Cells) != 1 {
		t.Fatalf("get: %+v %v", r, err)
	}
}

// silence replaces tserver i by a port that accepts connections and never
// answers, as a paused process's kernel does.
func silence(t *testing.T, fc *clienttest.Cluster, i int) {
	t.Helper()
	addr := fc.TServerAddr(i)
	fc.StopTServer(i)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("tserver %d's port: %v", i, err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn) // held open, never answered
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})
}

// TestFollowMoveUnaryWrites: the writes that are unary calls (a
// conditional mutation, a read-modify-write, a bulk write) follow the
// tablet too. Sent to the stalled tserver, an idempotent bulk row
// completes on the new owner and the others end at once with Unavailable,
// outcome unknown; waiting for a connection that never opens, they were
// not sent, and complete on the new owner (one after the other, each
// within about the check's interval).
func TestFollowMoveUnaryWrites(t *testing.T) {
	cond := func(tbl *client.Table) error {
		m := client.NewMutation()
		m.Set("cf", "c", client.ServerTime, []byte("v"))
		return tbl.Apply(context.Background(), "r", client.NewCondMutation(nil, nil, m))
	}
	rmw := func(tbl *client.Table) error {
		m := client.NewReadModifyWrite()
		m.Increment("cf", "n", 1)
		_, err := tbl.ApplyReadModifyWrite(context.Background(), "r", m)
		return err
	}
	bulk := func(tbl *client.Table) []error {
		idem, st := client.NewMutation(), client.NewMutation()
		idem.Set("cf", "b", 1000, []byte("v"))
		st.Set("cf", "s", client.ServerTime, []byte("v"))
		errs, err := tbl.ApplyBulk(context.Background(), []string{"r", "r2"}, []*client.Mutation{idem, st})
		if err != nil {
			t.Fatalf("bulk: %v", err)
		}
		if errs == nil {
			errs = make([]error, 2)
		}
		return errs
	}
	unknown := func(err error) bool {
		return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "outcome unknown")
	}
	t.Run("sent", func(t *testing.T) {
		for _, tc := range []struct {
			method string
			call   func(tbl *client.Table) error
		}{
			{"CheckAndMutateRow", cond},
			{"ReadModifyWriteRow", rmw},
		} {
			fc, tbl := setupFollow(t)
			start := time.Now()
			done := held(t, fc, tc.method, func() error { return tc.call(tbl) })
			fc.MoveTablet("t", "r", 1)
			if err := result(t, done, start, followWithin); !unknown(err) {
				t.Errorf("%s: %v; want Unavailable, outcome unknown", tc.method, err)
			}
			if n := fc.Calls(tc.method); n != 1 {
				t.Errorf("%s: %d calls, want 1 (no re-send)", tc.method, n)
			}
		}
		fc, tbl := setupFollow(t)
		start := time.Now()
		var errs []error
		done := held(t, fc, "MutateRows", func() error { errs = bulk(tbl); return nil })
		fc.MoveTablet("t", "r", 1)
		result(t, done, start, followWithin)
		if errs[0] != nil || !unknown(errs[1]) {
			t.Errorf("bulk: %v; want nil and Unavailable, outcome unknown", errs)
		}
	})
	t.Run("unsent", func(t *testing.T) {
		fc, tbl := setupFollow(t)
		silence(t, fc, 0)
		start := time.Now()
		done := make(chan error, 1)
		// (The fake has no read-modify-write to apply one.)
		go func() { done <- errors.Join(append([]error{cond(tbl)}, bulk(tbl)...)...) }()
		time.Sleep(100 * time.Millisecond)
		fc.MoveTablet("t", "r", 1)
		if err := result(t, done, start, 2*followWithin); err != nil {
			t.Errorf("writes: %v", err)
		}
		for row, want := range map[string]int{"r": 2, "r2": 1} {
			if r, err := tbl.Get(ctxT(t), row); err != nil || len(r.Cells) != want {
				t.Errorf("row %s: %+v %v; want %d cells", row, r, err, want)
			}
		}
	})
}
