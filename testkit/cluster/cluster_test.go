package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"bighive/testkit/wait"
)

// TestMain doubles as a helper server process: with BIGHIVE_HELPER_LISTEN
// set, the test binary listens there, echoes a line per connection, and
// exits 0 on SIGTERM.
func TestMain(m *testing.M) {
	if addr := os.Getenv("BIGHIVE_HELPER_LISTEN"); addr != "" {
		helper(addr)
		return
	}
	os.Exit(m.Run())
}

func helper(addr string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	fmt.Println("helper listening on", addr)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello")
			c.Close()
		}
	}()
	<-sig
	fmt.Println("helper: SIGTERM, clean exit")
	os.Exit(0)
}

func helperProc(t *testing.T, dir string) (*proc, string) {
	t.Helper()
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "helper", bin: exe, env: []string{"BIGHIVE_HELPER_LISTEN=" + addr}, logPath: filepath.Join(dir, "helper.log")}
	t.Cleanup(func() {
		if p.running() {
			p.signal(syscall.SIGCONT)
			p.kill()
		}
	})
	return p, addr
}

// answers reports whether the helper at addr says hello within d.
func answers(addr string, d time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 5)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "hello"
}

func waitAnswers(t *testing.T, addr string) {
	t.Helper()
	wait.For(t, 10*time.Second, "the helper at "+addr+" to answer", func() error {
		if !answers(addr, 200*time.Millisecond) {
			return errors.New("no answer")
		}
		return nil
	})
}

// TestProcessLifecycle: start, pause/resume, SIGTERM with a clean exit,
// restart on the same address, SIGKILL; the log keeps every run.
func TestProcessLifecycle(t *testing.T) {
	dir := t.TempDir()
	p, addr := helperProc(t, dir)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, addr)
	if err := p.pause(); err != nil {
		t.Fatal(err)
	}
	if answers(addr, 300*time.Millisecond) {
		t.Fatal("a paused process answered")
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, addr)
	if err := p.stop(10 * time.Second); err != nil {
		b, _ := os.ReadFile(p.logPath)
		t.Fatalf("stop: %v\n%s", err, b)
	}
	if p.running() {
		t.Fatal("running after stop")
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, addr)
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(time.Second); err == nil {
		t.Fatal("stop of a dead process succeeded")
	}
	log, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(log)
	for _, want := range []string{"helper listening", "clean exit", "exit status 0", "signal: killed"} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "=== "+time.Now().Format("2006")); n != 4 {
		t.Errorf("log has %d start/exit markers, want 4:\n%s", n, s)
	}
	lines, err := tail(p.logPath, 2)
	if err != nil || len(lines) != 2 || !strings.Contains(lines[1], "signal: killed") {
		t.Errorf("tail: %q %v", lines, err)
	}
}

func TestStartNeedsDir(t *testing.T) {
	if _, err := Start(context.Background(), Options{}); err == nil {
		t.Fatal("Start without Dir succeeded")
	}
}

// haveCmd skips the test unless ./cmd/<name> exists in the module.
func haveCmd(t *testing.T, name string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil {
		t.Skipf("./cmd/%s does not exist yet", name)
	}
}

// TestMasters starts masters alone and checks that one leads, and that a
// killed leader is replaced and can rejoin.
func TestMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("1 and 3 master processes, a killed leader replaced: runs without -short")
	}
	haveCmd(t, "master")
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := New(t, Options{Masters: n})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := c.Client(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := cl.ListTables(ctx); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				return
			}
			leader, err := c.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.KillMaster(leader); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.ListTables(ctx); err != nil {
				t.Fatalf("after killing the leader: %v", err)
			}
			if err := c.RestartMaster(leader); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.ListTables(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
