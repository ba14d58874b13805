package frontend

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/client/clienttest"
	pb "bighive/proto/bighivepb"
)

// TestStalledTServerThroughTheAPI: the official Cloud Bigtable client,
// calling without a deadline through a frontend, while the tserver of its
// tablet holds its calls and the tablet moves to another tserver: a write
// with a timestamp and a read complete on the new owner, and a write with
// a server timestamp, sent to the stalled tserver, ends at once with
// Unavailable saying its outcome is unknown, never DeadlineExceeded. All
// within 2 s, far under the frontend client's 5 s attempt timeout.
func TestStalledTServerThroughTheAPI(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{TServers: 2})
	if err := fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	c, err := client.Dial(ctx, fc.MasterAddrs(), client.WithMoveCheck(200*time.Millisecond), client.WithBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, bt := serveAPI(t, c)
	tbl := bt.Open("t")
	put := func(ts bigtable.Timestamp, v string) error {
		m := bigtable.NewMutation()
		m.Set("cf", "q", ts, []byte(v))
		return tbl.Apply(context.Background(), "r", m)
	}
	if err := put(1000, "before"); err != nil {
		t.Fatal(err)
	}
	owner := 0
	// stall holds the next method call at the tablet's owner, runs call,
	// moves the tablet to the other tserver once the call is held, and
	// returns call's error, failing the test if it took over 2 s.
	stall := func(name, method string, call func() error) error {
		t.Helper()
		calls := fc.Calls(method)
		fc.Inject(clienttest.Fault{Method: method, Server: fc.TServerAddr(owner), Delay: time.Minute})
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- call() }()
		for fc.Calls(method) == calls {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: the call did not reach tserver %d", name, owner)
			}
			time.Sleep(5 * time.Millisecond)
		}
		owner = 1 - owner
		fc.MoveTablet("t", "r", owner)
		select {
		case err := <-done:
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s: returned after %v, want within 2 s", name, d)
			}
			return err
		case <-time.After(time.Minute):
			t.Fatalf("%s: no answer within a minute", name)
			return nil
		}
	}
	if err := stall("timestamped write", "MutateRow", func() error { return put(2000, "v") }); err != nil {
		t.Errorf("timestamped write: %v", err)
	}
	var row bigtable.Row
	err = stall("read", "ReadRow", func() error {
		var err error
		row, err = tbl.ReadRow(context.Background(), "r")
		return err
	})
	if err != nil || len(row["cf"]) == 0 || string(row["cf"][0].Value) != "v" {
		t.Errorf("read: %v %v", row, err)
	}
	err = stall("server-time write", "MutateRow", func() error { return put(bigtable.ServerTime, "st") })
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("server-time write: %v; want Unavailable, outcome unknown", err)
	}
}
