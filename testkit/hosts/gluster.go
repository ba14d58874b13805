package hosts

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// glusterd is shared by every process of the machine that uses this
// package (go test runs packages' test binaries at once). Each such process
// holds a shared flock on glusterdLockFile while it has a Volume open. The
// first starts glusterd if it is not running, under the exclusive lock,
// recording its pid in glusterdPidFile; the last one out — the one whose
// exclusive try succeeds on release — stops a glusterd so recorded. A
// glusterd that was running already, without that file, is left alone.
var glusterd struct {
	mu      sync.Mutex
	volumes int
	lock    *os.File // holding the shared flock while volumes > 0
}

const (
	glusterdLockFile = "/run/bighive-glusterd.lock"
	glusterdPidFile  = "/run/bighive-glusterd.pid"
)

// gluster runs the gluster CLI in script mode (no questions).
func gluster(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "gluster", append(args, "--mode=script")...)
}

func acquireGlusterd(ctx context.Context) error {
	glusterd.mu.Lock()
	defer glusterd.mu.Unlock()
	if glusterd.volumes > 0 {
		glusterd.volumes++
		return nil
	}
	f, err := os.OpenFile(glusterdLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return fmt.Errorf("hosts: flock %s: %w", glusterdLockFile, err)
	}
	if err := startGlusterd(ctx); err != nil {
		f.Close()
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return fmt.Errorf("hosts: flock %s: %w", glusterdLockFile, err)
	}
	glusterd.lock = f
	glusterd.volumes++
	return nil
}

// startGlusterd starts glusterd unless it answers, and waits until it
// does.
func startGlusterd(ctx context.Context) error {
	if _, err := gluster(ctx, "volume", "list"); err == nil {
		return nil
	}
	if _, err := run(ctx, "glusterd", "--pid-file", glusterdPidFile); err != nil {
		return err
	}
	var last error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, last = gluster(ctx, "volume", "list"); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hosts: glusterd does not answer 20 s after its start: %w", last)
		}
	}
}

func releaseGlusterd() error {
	glusterd.mu.Lock()
	defer glusterd.mu.Unlock()
	glusterd.volumes--
	if glusterd.volumes > 0 {
		return nil
	}
	f := glusterd.lock
	glusterd.lock = nil
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil // another process still uses it
	}
	b, err := os.ReadFile(glusterdPidFile)
	if os.IsNotExist(err) {
		return nil // running before us: not ours to stop
	}
	if err != nil {
		return fmt.Errorf("hosts: stopping glusterd: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("hosts: stopping glusterd: pid file %s: %w", glusterdPidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("hosts: stopping glusterd (pid %d): %w", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			break
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	os.Remove(glusterdPidFile)
	stopSelfHealDaemons()
	return nil
}

// glusterShdPidFiles are where glusterd records its self-heal daemons,
// one per replicated volume graph.
const glusterShdPidFiles = "/var/run/gluster/shd/*/*-shd.pid"

// stopSelfHealDaemons kills the self-heal daemons of the glusterd this
// package started and has just stopped. glusterd runs one daemon for
// every replicated volume, named after the first; stopping a volume
// while others of the daemon remain, then the last one, can leave the
// daemon running with no volume.
func stopSelfHealDaemons() {
	files, _ := filepath.Glob(glusterShdPidFiles)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == "glusterfs" {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.Remove(f)
	}
}

// CoherentVolumeOptions and CoherentClientArgs configure a volume and its
// clients so that a host sees another host's changes as soon as they are
// made (TestGlusterPOSIX, docs/gluster.md): with GlusterFS's defaults a
// client serves attributes and file contents from its caches, so a host
// can read a stale size for up to a second after another host appended,
// and stale bytes of a file another host renamed and overwrote in place
// (storage/wal recycles its log files so).
var (
	CoherentVolumeOptions = []string{
		"performance.stat-prefetch", "off",
		"performance.quick-read", "off",
		"performance.io-cache", "off",
		"performance.read-ahead", "off",
		"performance.open-behind", "off",
	}
	CoherentClientArgs = []string{"--attribute-timeout=0", "--entry-timeout=0", "--fopen-keep-cache=off"}
)

// Volume is a GlusterFS volume: one brick, or replicated over several
// bricks of this machine.
type Volume struct {
	Name   string
	Server string // the address the bricks and glusterd are reached at
	Brick  string // the first brick directory: the volume's files, readable in place
	// Bricks are every brick directory, Brick first; a replicated volume
	// holds every file in each.
	Bricks []string

	once sync.Once
	err  error
}

// NewVolume creates and starts a volume whose brick is the directory brick
// (created if missing) served at server, an address of this machine that
// the hosts reach (Network.HostAddr), with options applied (gluster volume
// set NAME KEY VALUE, pairs). It starts glusterd if it is not running.
func NewVolume(ctx context.Context, server, brick string, options ...string) (*Volume, error) {
	return NewReplicatedVolume(ctx, server, []string{brick}, options...)
}

// NewReplicatedVolume is NewVolume with one brick per directory of
// bricks, each holding a replica of every file (gluster volume create
// replica N; one brick: a plain volume). With three bricks or more the
// clients keep writing while a minority of them is down
// (cluster.quorum-type auto), and the self-heal daemon copies what a
// brick missed once it is back (StopBrick, StartBrick, HealPending).
func NewReplicatedVolume(ctx context.Context, server string, bricks []string, options ...string) (*Volume, error) {
	if len(options)%2 != 0 {
		return nil, errors.New("hosts: volume options come in key, value pairs")
	}
	if len(bricks) == 0 {
		return nil, errors.New("hosts: a volume needs a brick")
	}
	args := []string{"volume", "create", ""}
	if len(bricks) > 1 {
		args = append(args, "replica", strconv.Itoa(len(bricks)))
	}
	for _, b := range bricks {
		if err := os.MkdirAll(b, 0o755); err != nil {
			return nil, fmt.Errorf("hosts: %w", err)
		}
		args = append(args, server+":"+b)
	}
	if err := acquireGlusterd(ctx); err != nil {
		return nil, err
	}
	v := &Volume{Name: "bighive-" + randHex(4), Server: server, Brick: bricks[0], Bricks: bricks}
	args[2] = v.Name
	if _, err := gluster(ctx, append(args, "force")...); err != nil {
		releaseGlusterd()
		return nil, err
	}
	for i := 0; i < len(options); i += 2 {
		if _, err := gluster(ctx, "volume", "set", v.Name, options[i], options[i+1]); err != nil {
			v.Close()
			return nil, err
		}
	}
	if _, err := gluster(ctx, "volume", "start", v.Name); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

// volumeStatus is what gluster volume status --xml says of the bricks.
type volumeStatus struct {
	Nodes []struct {
		Path   string `xml:"path"`
		Status int    `xml:"status"` // 1: online
		PID    int    `xml:"pid"`
	} `xml:"volStatus>volumes>volume>node"`
}

// brickPID is the pid of brick i's process, 0 when it is offline.
func (v *Volume) brickPID(ctx context.Context, i int) (int, error) {
	out, err := gluster(ctx, "volume", "status", v.Name, "--xml")
	if err != nil {
		return 0, err
	}
	var st volumeStatus
	if err := xml.Unmarshal([]byte(out), &st); err != nil {
		return 0, fmt.Errorf("hosts: volume status of %s: %w", v.Name, err)
	}
	for _, n := range st.Nodes {
		if filepath.Clean(n.Path) == filepath.Clean(v.Bricks[i]) {
			if n.Status != 1 {
				return 0, nil
			}
			return n.PID, nil
		}
	}
	return 0, fmt.Errorf("hosts: volume %s: no brick %s in its status", v.Name, v.Bricks[i])
}

// StopBrick SIGKILLs brick i's server process, as a crash of the host
// holding it would: the clients go on with the other replicas.
func (v *Volume) StopBrick(ctx context.Context, i int) error {
	pid, err := v.brickPID(ctx, i)
	if err != nil {
		return err
	}
	if pid == 0 {
		return fmt.Errorf("hosts: volume %s: brick %d is not running", v.Name, i)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("hosts: stopping brick %d of %s (pid %d): %w", i, v.Name, pid, err)
	}
	for {
		if p, err := v.brickPID(ctx, i); err == nil && p == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hosts: brick %d of %s still listed online: %w", i, v.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StartBrick starts the volume's stopped bricks again (gluster volume
// start force) and waits until brick i is online. glusterd may not yet
// have seen the brick die and then starts nothing, or fail the start's
// commit while it is still cleaning up after the dead brick ("Commit
// failed on localhost"), so the start is repeated every two seconds until
// the brick is online or ctx ends; the last refusal is in the error. The
// self-heal daemon then copies what it missed; HealPending counts what
// remains.
func (v *Volume) StartBrick(ctx context.Context, i int) error {
	var (
		last     time.Time
		startErr error
	)
	for {
		if time.Since(last) >= 2*time.Second {
			_, startErr = gluster(ctx, "volume", "start", v.Name, "force")
			last = time.Now()
		}
		if p, err := v.brickPID(ctx, i); err == nil && p != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			out, _ := gluster(context.Background(), "volume", "status", v.Name)
			err := fmt.Errorf("hosts: brick %d of %s not online after its restart: %w", i, v.Name, ctx.Err())
			if startErr != nil {
				err = fmt.Errorf("%w (last start: %w)", err, startErr)
			}
			return fmt.Errorf("%w\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// HealPending is the number of entries the self-heal daemon has yet to
// copy between the replicas (gluster volume heal info, summed over the
// bricks); 0 once every brick holds every file again.
func (v *Volume) HealPending(ctx context.Context) (int, error) {
	out, err := gluster(ctx, "volume", "heal", v.Name, "info")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Number of entries:"); ok {
			k, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return 0, fmt.Errorf("hosts: heal info of %s: %q", v.Name, line)
			}
			n += k
		}
	}
	return n, nil
}

// Close stops and deletes the volume (its brick directory stays) and
// stops glusterd if NewVolume started it and no other volume of this
// process is open. The hosts' mounts should be closed first. It is
// idempotent.
func (v *Volume) Close() error {
	v.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		if out, err := gluster(ctx, "volume", "stop", v.Name, "force"); err != nil && !strings.Contains(out, "not in started state") {
			errs = append(errs, err)
		}
		if _, err := gluster(ctx, "volume", "delete", v.Name); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, releaseGlusterd())
		v.err = errors.Join(errs...)
	})
	return v.err
}

// Mount is a GlusterFS client mounting a volume inside one host.
type Mount struct {
	Path string
	host *Host
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
	err  error
}

// Mount mounts v at path (created if missing; it must be on a file system
// the host's mount namespace shares with the machine, such as the test's
// directory) inside the host, with the client's log at logFile and
// clientArgs added to its command line (CoherentClient, for one), and
// waits until the mount serves with every brick of v connected
// (allBricksConnected). The host must have its own mount namespace.
func (h *Host) Mount(ctx context.Context, v *Volume, path, logFile string, clientArgs ...string) (*Mount, error) {
	if !h.mountNS {
		return nil, fmt.Errorf("hosts: %s has no mount namespace of its own", h.Name)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	args := append([]string{"--no-daemon", "--volfile-server=" + v.Server, "--volfile-id=" + v.Name, "--log-file=" + logFile}, clientArgs...)
	cmd := h.Command("glusterfs", append(args, path)...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("hosts: mount on %s: %w", h.Name, err)
	}
	m := &Mount{Path: path, host: h, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(m.done) }()
	h.mu.Lock()
	h.mounts = append(h.mounts, m)
	h.mu.Unlock()
	// Mounted, and answering: a stat of the root inside the host.
	var last error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-m.done:
			return nil, fmt.Errorf("hosts: the glusterfs client on %s exited (see %s)", h.Name, logFile)
		default:
		}
		if m.mounted() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, last = h.Run(sctx, "stat", "-f", "-c", "%T", path)
			cancel()
			if last == nil {
				last = allBricksConnected(logFile, len(v.Bricks))
			}
			if last == nil {
				return m, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("hosts: mount of %s on %s not ready (see %s): %v", v.Name, h.Name, logFile, last)
		}
	}
}

// connectedRE matches the client's log line for a brick it has connected
// to; the group is the brick's index.
var connectedRE = regexp.MustCompile(`-client-(\d+): Connected, attached to remote volume`)

// allBricksConnected returns nil once the client logging to logFile has
// connected to each of a volume's n bricks. A replicated volume's mount
// serves as soon as a quorum of bricks is connected, but a directory that
// clients connected to different bricks create at once then gets a
// different GlusterFS file ID on each brick: a gfid split-brain, every
// later lookup of it failing with EIO (seen in CI when the tservers made
// their shared root together). So a mount is ready only with every brick.
func allBricksConnected(logFile string, n int) error {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	seen := map[string]bool{}
	for _, m := range connectedRE.FindAllSubmatch(b, -1) {
		seen[string(m[1])] = true
	}
	if len(seen) < n {
		return fmt.Errorf("hosts: the client is connected to %d of %d bricks", len(seen), n)
	}
	return nil
}

// mounted reports whether the host's mount table lists a glusterfs mount
// at the path.
func (m *Mount) mounted() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", m.host.PID()))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && filepath.Clean(f[1]) == filepath.Clean(m.Path) && strings.HasPrefix(f[2], "fuse.glusterfs") {
			return true
		}
	}
	return false
}

// Kill SIGKILLs the client, as a host's crash would: what it had not sent
// to the server is lost, and the mount answers ENOTCONN until closed.
func (m *Mount) Kill() {
	m.cmd.Process.Kill()
	<-m.done
}

// Close unmounts (lazily, so a dead client does not block it) and stops
// the client. It is idempotent.
func (m *Mount) Close() error {
	m.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if m.mounted() {
			if _, err := m.host.Run(ctx, "umount", "-l", m.Path); err != nil {
				m.err = err
			}
		}
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
			m.cmd.Process.Kill()
			<-m.done
		}
	})
	return m.err
}
