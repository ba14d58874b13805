package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"bighive/testkit/ports"
)

// proc is one server process, restartable with the same arguments.
type proc struct {
	name    string
	bin     string
	args    []string
	wrap    []string // a command prefix the process runs under (a host's nsenter); nil: none
	env     []string
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	exitErr error         // its Wait error, once done
	paused  bool          // SIGSTOPped by pause and not continued since
}

// start starts the process, appending its output to its log.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exitedLocked() {
		return fmt.Errorf("cluster: %s is already running", p.name)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	argv := append(append(append([]string(nil), p.wrap...), p.bin), p.args...)
	fmt.Fprintf(f, "=== %s start %s: %s\n", time.Now().Format(time.RFC3339Nano), p.name, strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("cluster: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr, p.paused = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== %s exit %s: %v\n", time.Now().Format(time.RFC3339Nano), p.name, exitString(err))
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (p *proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running reports whether the process was started and has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// answering reports whether the process runs and is not paused: whether it
// can answer a call at all.
func (p *proc) answering() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked() && !p.paused
}

// pid is the running process's id, 0 when it is not running. Under a
// host's nsenter it is the server's own: nsenter execs it.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited returns the channel closed at exit, or nil if never started.
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

var errNotRunning = errors.New("cluster: process is not running")

func (p *proc) signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return fmt.Errorf("%w: %s", errNotRunning, p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return nil
}

// pause sends SIGSTOP and waits (up to 2 s) until the kernel reports the
// process stopped, so it answers nothing once pause returns.
func (p *proc) pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return fmt.Errorf("cluster: pause %s: %w", p.name, err)
		}
		// The state follows the parenthesised command name: "pid (comm) S ...".
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
	}
	return fmt.Errorf("cluster: %s did not stop within 2 s of SIGSTOP", p.name)
}

// kill sends SIGKILL and waits for the exit. A process that exited by
// itself (a fault file's crash) and was reaped before its exit was
// recorded is not running: kill waits for the record and says so.
func (p *proc) kill() error {
	err := p.signal(syscall.SIGKILL)
	if errors.Is(err, os.ErrProcessDone) {
		<-p.exited()
		return fmt.Errorf("%w: %s", errNotRunning, p.name)
	}
	if err != nil {
		return err
	}
	<-p.exited()
	return nil
}

// stop sends SIGTERM (and SIGCONT, in case it is paused) and waits up to
// grace for the exit, then kills it. It returns an error if the process
// did not exit cleanly (status 0) within grace.
func (p *proc) stop(grace time.Duration) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	p.signal(syscall.SIGCONT)
	done := p.exited()
	select {
	case <-done:
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("cluster: %s did not exit within %v of SIGTERM; killed", p.name, grace)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr != nil {
		return fmt.Errorf("cluster: %s exited after SIGTERM with %v", p.name, p.exitErr)
	}
	return nil
}

// freePort returns a loopback address reserved for this test process
// (package ports: below the ephemeral range, locked against the other
// test processes of the machine).
func freePort() (string, error) {
	a, err := ports.Addr()
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return a, nil
}

// FreePort is freePort for a test starting a process of its own beside
// the cluster.
func FreePort() (string, error) { return freePort() }

// exitedNow reports whether the process was started and has exited.
func (p *proc) exitedNow() bool {
	ch := p.exited()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitListening waits until addr accepts a TCP connection, the process
// exits, or d passes.
func (p *proc) waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.exited():
			return fmt.Errorf("cluster: %s exited before listening on %s", p.name, addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: %s not listening on %s after %v: %w", p.name, addr, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
