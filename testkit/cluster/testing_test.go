package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logRecorder is a testing.TB that keeps what Logf prints.
type logRecorder struct {
	testing.TB
	got []string
}

func (r *logRecorder) Helper() {}

func (r *logRecorder) Logf(format string, args ...any) {
	r.got = append(r.got, fmt.Sprintf(format, args...))
}

// TestDumpDirLogsProcessesFirst: the processes' logs come before the
// GlusterFS clients' long ones, each its last n lines, so that a cut
// output still shows why a process exited.
func TestDumpDirLogsProcessesFirst(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"ts0.glusterfs.log": "mount\n",
		"ts0.log":           "one\ntwo\nthree\n",
		"m1.log":            "leader\n",
		"frontend.log":      "up\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := &logRecorder{TB: t}
	DumpDirLogs(rec, dir, 2)
	var order []string
	for _, l := range rec.got {
		order = append(order, filepath.Base(strings.Fields(strings.SplitN(l, "\n", 2)[0])[5]))
	}
	want := []string{"frontend.log", "m1.log", "ts0.log", "ts0.glusterfs.log"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("dump order %v, want %v", order, want)
	}
	for _, l := range rec.got {
		if strings.Contains(l, "ts0.log") && (strings.Contains(l, "one") || !strings.Contains(l, "two\nthree")) {
			t.Errorf("ts0.log's dump %q, want its last 2 lines", l)
		}
	}
}
