package cli_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"bighive/master"
	"bighive/testkit/ports"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// startCluster starts a real in-process cluster (one master with raft on
// loopback and bbolt, one tserver with real storage, real gRPC) and returns
// the master's address.
func startCluster(t *testing.T) string {
	t.Helper()
	return startClusterWith(t, nil)
}

// startClusterWith is startCluster with the tserver's options changed by
// opt (if not nil).
func startClusterWith(t *testing.T, opt func(*tserver.Options)) string {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	free := func() string { return ports.AddrT(t) }
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The one master is raft's only voter: short timeouts only make it
	// elect itself at once, not after raft's default 1 to 2 s.
	rc := raft.DefaultConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	m, err := master.Start(master.Config{ID: "m1", Dir: filepath.Join(dir, "master"), RaftAddr: free(), Raft: rc,
		Lease: 2 * time.Second, Heartbeat: 200 * time.Millisecond, Logger: quiet}, lis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	opts := tserver.Options{Listen: free(), Masters: []string{m.Addr()},
		Root: filepath.Join(dir, "root"), MemLimit: 1 << 20, HeartbeatInterval: 200 * time.Millisecond, Logger: quiet}
	if opt != nil {
		opt(&opts)
	}
	s, err := tserver.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m.Addr()
}

// waitFor runs the command until its output contains want.
func (r run) waitFor(want string, args ...string) {
	r.t.Helper()
	wait.For(r.t, 30*time.Second, fmt.Sprintf("bighive %s to print %q", strings.Join(args, " "), want), func() error {
		if out, _, code := r.do(args...); code != 0 || !strings.Contains(out, want) {
			return fmt.Errorf("exit %d, printed %q", code, out)
		}
		return nil
	})
}

// TestDeleteThenPutOnRealCluster runs the commands of a new user against a
// real cluster: a put after a delete of the column shows, with the client's
// clock and at a timestamp older than the deleted cell's.
func TestDeleteThenPutOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf")
	r.waitFor("serving", "tablets", "t1")

	r.ok("put", "t1", "r", "cf:a", "v1")
	r.ok("delete", "t1", "r", "cf:a")
	r.ok("put", "t1", "r", "cf:a", "v2")
	if out := r.ok("get", "t1", "r"); !strings.Contains(out, "v2") || strings.Contains(out, "v1") || strings.Contains(out, "not found") {
		t.Fatalf("get t1 r after put, delete, put:\n%s", out)
	}

	r.ok("put", "t1", "s", "cf:a", "new", "--timestamp", "5000")
	r.ok("delete", "t1", "s", "cf:a")
	r.ok("put", "t1", "s", "cf:a", "old", "--timestamp", "1000")
	out := r.ok("scan", "t1")
	if !strings.Contains(out, "old") || strings.Contains(out, "new") || !strings.Contains(out, "v2") {
		t.Fatalf("scan t1 after delete, then put at an older timestamp:\n%s", out)
	}
	r.ok("checkpoint")
	if out := r.ok("scan", "t1"); !strings.Contains(out, "old") || !strings.Contains(out, "v2") {
		t.Fatalf("scan t1 after a checkpoint:\n%s", out)
	}
}

// TestIncrAppendOnRealCluster: incr counts from a missing cell, adds a
// delta, refuses a cell that is not a counter; append concatenates.
func TestIncrAppendOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf")
	r.waitFor("serving", "tablets", "t1")
	if out := r.ok("incr", "t1", "r", "cf:n"); strings.TrimSpace(out) != "1" {
		t.Fatalf("incr of a missing cell printed %q, want 1", out)
	}
	if out := r.ok("incr", "t1", "r", "cf:n", "41"); strings.TrimSpace(out) != "42" {
		t.Fatalf("incr by 41 printed %q, want 42", out)
	}
	if out := r.ok("incr", "t1", "r", "cf:n", "-2"); strings.TrimSpace(out) != "40" {
		t.Fatalf("incr by -2 printed %q, want 40", out)
	}
	r.ok("append", "t1", "r", "cf:s", "ab")
	if out := r.ok("append", "t1", "r", "cf:s", "cd"); !strings.Contains(out, "abcd") {
		t.Fatalf("append printed:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"incr", "t1", "r", "cf:s"}, 1, "FailedPrecondition"},
		{[]string{"incr", "t1", "r", "cf:n", "x"}, 2, "not a 64-bit integer"},
		{[]string{"incr", "t1", "r", "nocolon"}, 2, "FAMILY:QUALIFIER"},
	} {
		if out, errs, code := r.do(tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("bighive %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, out, tc.code, tc.want)
		}
	}
	if out := r.ok("incr", "t1", "r", "cf:n", "0"); strings.TrimSpace(out) != "40" {
		t.Fatalf("the refused calls changed the counter: %q", out)
	}
}
