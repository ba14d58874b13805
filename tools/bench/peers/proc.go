package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs are the processes this program started: servers (Redis, etcd, the
// emulator) and the commands it runs to completion (Bighive's bench,
// Pebble's, redis-benchmark). Each runs in its own process group, so that
// stopping it also stops what it started (Bighive's bench starts a master,
// a tserver and a frontend); stopAll ends whatever is still running when
// the program ends, also on an error or an interrupt.
type procs struct {
	mu   sync.Mutex
	live map[*exec.Cmd]chan struct{} // closed when the process was reaped
}

func newProcs() *procs { return &procs{live: map[*exec.Cmd]chan struct{}{}} }

// start starts cmd in a process group of its own, its output (unless the
// caller set it) appended to logPath, and returns a channel closed once
// it has exited and been reaped (its error is in wait's result).
func (p *procs) start(cmd *exec.Cmd, logPath string) (<-chan struct{}, func() error, error) {
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close() // the child has its own descriptor
		fmt.Fprintf(f, "### %s %s\n", time.Now().Format(time.RFC3339), strings.Join(cmd.Args, " "))
		if cmd.Stdout == nil {
			cmd.Stdout = f
		}
		if cmd.Stderr == nil {
			cmd.Stderr = f
		}
	}
	// Setpgid: a group to signal as a whole. Pdeathsig: should this
	// program die without cleaning up, the child dies too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	var werr error
	go func() {
		werr = cmd.Wait()
		p.mu.Lock()
		delete(p.live, cmd)
		p.mu.Unlock()
		close(done)
	}()
	p.mu.Lock()
	p.live[cmd] = done
	p.mu.Unlock()
	return done, func() error { <-done; return werr }, nil
}

// stop ends cmd's process group: SIGINT to cmd first (Bighive's bench
// closes its cluster on it; Redis and etcd shut down cleanly), SIGKILL to
// the whole group once cmd has exited or after grace.
func (p *procs) stop(cmd *exec.Cmd, grace time.Duration) {
	p.mu.Lock()
	done, ok := p.live[cmd]
	p.mu.Unlock()
	if !ok || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(grace):
	}
	// The leader may be gone while others of its group still run.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// stopAll stops every process still running.
func (p *procs) stopAll() {
	p.mu.Lock()
	var cmds []*exec.Cmd
	for c := range p.live {
		cmds = append(cmds, c)
	}
	p.mu.Unlock()
	for _, c := range cmds {
		p.stop(c, 5*time.Second)
	}
}

// run runs cmd to completion in its own process group and returns its
// stdout; stderr goes to logPath. It stops the group when ctx ends (an
// interrupt or the time limit).
func (p *procs) run(ctx context.Context, cmd *exec.Cmd, logPath string, limit time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	done, wait, err := p.start(cmd, logPath)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		p.stop(cmd, 15*time.Second)
		return nil, ctx.Err()
	case <-t.C:
		p.stop(cmd, 15*time.Second)
		return nil, fmt.Errorf("%s did not finish within %v (log: %s)", filepath.Base(cmd.Path), limit, logPath)
	}
	if err := wait(); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w; last lines of %s:\n%s", filepath.Base(cmd.Path), err, logPath, tail(logPath, 15))
	}
	return out.Bytes(), nil
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady calls ready until it succeeds, the process exits, or limit
// passes.
func waitReady(ctx context.Context, name string, exited <-chan struct{}, logPath string, limit time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start; last lines of %s:\n%s", name, logPath, tail(logPath, 15))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(rctx)
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v: %v (log: %s)", name, limit, last, logPath)
}

// dialReady is a readiness check: the address accepts a TCP connection.
func dialReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// findBinary returns the first of names found on PATH or as an absolute
// path that exists.
func findBinary(names ...string) (string, error) {
	for _, n := range names {
		if filepath.IsAbs(n) {
			if st, err := os.Stat(n); err == nil && !st.IsDir() {
				return n, nil
			}
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %s found", strings.Join(names, ", "))
}

// commandOutput is a short command's trimmed output (versions).
func commandOutput(name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// ensureDebian makes sure binary exists, installing the Debian package pkg
// with apt-get when allowed and running as root.
func ensureDebian(binary, pkg string, install bool) (string, error) {
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	if !install || os.Geteuid() != 0 {
		return "", fmt.Errorf("%s not found: install the Debian package with `apt-get install -y %s` (or pass --install as root), or leave the peer out with --only", binary, pkg)
	}
	fmt.Fprintf(os.Stderr, "peers: %s not found; apt-get install -y %s\n", binary, pkg)
	try := func() error {
		cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := try(); err != nil {
		upd := exec.Command("apt-get", "update")
		upd.Stdout, upd.Stderr = os.Stderr, os.Stderr
		if err := upd.Run(); err != nil {
			return "", fmt.Errorf("apt-get update: %w", err)
		}
		if err := try(); err != nil {
			return "", fmt.Errorf("apt-get install %s: %w", pkg, err)
		}
	}
	p, err := exec.LookPath(binary)
	if err != nil {
		return "", errors.New(binary + " still not found after installing " + pkg)
	}
	return p, nil
}
