package cluster

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// New starts a cluster for a test: Dir defaults to a fresh t.TempDir, the
// start-up gets two minutes (builds included), and t.Cleanup closes the
// cluster and, if the test failed, prints the tail of every log. It calls
// t.Fatal if the cluster does not start. With BIGHIVE_KEEP_LOGS set to a
// directory, the process logs are copied there when the test ends. With
// Options.Hosts it skips the test under -short, and when hosts cannot run
// here (not root, a command or GlusterFS missing), saying what is needed.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Hosts != nil {
		if testing.Short() {
			t.Skip("a cluster on hosts (network and mount namespaces) does not run under -short")
		}
		if err := HostsAvailable(*opts.Hosts); err != nil {
			t.Skipf("a cluster on hosts cannot run here: %v", err)
		}
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Error(err) // first: the logs' dump below may be cut short
		DumpDirLogs(t, opts.Dir, 40)
		t.FailNow()
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
		if t.Failed() {
			c.DumpLogs(t)
		}
		if keep := os.Getenv("BIGHIVE_KEEP_LOGS"); keep != "" {
			keepLogs(t, opts.Dir, keep)
		}
	})
	return c
}

// keepLogs copies every process log of dir into a directory of keep
// named for the test, for reading after a passing run (the test's own
// directory is removed with it). Set BIGHIVE_KEEP_LOGS to use it.
func keepLogs(t testing.TB, dir, keep string) {
	dst := filepath.Join(keep, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	CopyLogs(t, dir, dst)
	t.Logf("process logs kept in %s", dst)
}

// CopyLogs copies every process log of the cluster directory from into
// the directory to (made if need be), saying with t.Logf what it could
// not copy.
func CopyLogs(t testing.TB, from, to string) {
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Logf("keeping logs: %v", err)
		return
	}
	logs, _ := filepath.Glob(filepath.Join(from, "*.log*"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join(to, filepath.Base(path)), b, 0o644)
		}
		if err != nil {
			t.Logf("keeping logs: %v", err)
		}
	}
}

// DumpLogs prints the last 60 lines of every process log with t.Logf.
func (c *Cluster) DumpLogs(t testing.TB) {
	t.Helper()
	DumpDirLogs(t, c.opts.Dir, 60)
}

// DumpDirLogs prints the last n lines of every *.log file in dir.
func DumpDirLogs(t testing.TB, dir string, n int) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log*"))
	// The processes' own logs first, the GlusterFS clients' after them:
	// those are long, and a test's output may be cut.
	gluster := func(p string) bool { return strings.Contains(filepath.Base(p), ".glusterfs.") }
	sort.Slice(logs, func(i, j int) bool {
		if gi, gj := gluster(logs[i]), gluster(logs[j]); gi != gj {
			return gj
		}
		return logs[i] < logs[j]
	})
	for _, path := range logs {
		lines, err := tail(path, n)
		if err != nil {
			t.Logf("%s: %v", path, err)
			continue
		}
		t.Logf("--- last %d lines of %s ---\n%s", len(lines), path, strings.Join(lines, "\n"))
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > n {
			ring = ring[1:]
		}
	}
	return ring, sc.Err()
}
