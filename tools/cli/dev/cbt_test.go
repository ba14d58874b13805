package dev_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"bighive/testkit/ports"
	"bighive/testkit/wait"
	"bighive/tools/cli"
	"bighive/tools/cli/dev"
)

// syncBuffer is a bytes.Buffer safe for the dev command's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeBase returns a port p with p, p+1 and p+101..p+103 free: the ports
// `bighive dev --port p` takes.
func freeBase(t *testing.T) int {
	t.Helper()
	p, err := ports.Range(104)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCbtAggregatesOnDev runs Google's cbt against `bighive dev` (the
// Cloud Bigtable API through BIGTABLE_EMULATOR_HOST): createtable with
// aggregate families (cbt's FAMILY:GCPOLICY:TYPE), ls showing their value
// types, addtocell summing into one cell per timestamp and taking the min
// and max, read printing the 8-byte big-endian results, and the refusals
// of a set into an aggregate family, of HyperLogLog++ and of setvaluetype
// (NotFound for a missing family). It fails, and
// never skips, when cbt is not installed; -short skips it (it runs a
// dev cluster and a dozen cbt processes).
func TestCbtAggregatesOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("cbt against bighive dev: runs without -short")
	}
	cbt, err := exec.LookPath("cbt")
	if err != nil {
		t.Fatalf("cbt is not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := freeBase(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := lis.Addr().String()
	lis.Close()
	devCtx, stopDev := context.WithCancel(ctx)
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(devCtx, []string{"dev", "--dir", t.TempDir(), "--port", fmt.Sprint(port), "--bigtable", api, "--http=false"}, &stdout, &stderr, dev.Command)
	}()
	t.Cleanup(func() {
		stopDev()
		if code := <-done; code != 0 {
			t.Errorf("bighive dev exited %d: %s", code, stderr.String())
		}
	})
	wait.ForCtx(t, ctx, "bighive dev to serve the Bigtable API", func() error {
		if !strings.Contains(stdout.String(), "bigtable "+api) {
			return fmt.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		return nil
	})
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cbt, append([]string{"-project", "p", "-instance", "i"}, args...)...)
		cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+api)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("cbt %s: %v: %s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), err
	}
	ok := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ok("createtable", "t", "families=sum:never:intsum,mn:never:intmin,mx:never:intmax,plain")
	ls := ok("ls", "t")
	for _, want := range []string{`"sum":{}`, `"min":{}`, `"max":{}`, `"bigEndianBytes":{}`} {
		if !strings.Contains(ls, want) {
			t.Errorf("cbt ls t lacks %s:\n%s", want, ls)
		}
	}
	ok("addtocell", "t", "r", "sum:c=5@1000", "mn:c=5@1000", "mx:c=5@1000")
	ok("addtocell", "t", "r", "sum:c=37@1000", "mn:c=-3@1000", "mx:c=9@1000", "sum:c=1@2000")
	ok("addtocell", "t", "r", "sum:c=-2@1000", "mn:c=4@1000", "mx:c=-9@1000")
	read := ok("read", "t")
	// cbt prints each cell's value Go-quoted on the line after its column.
	var cells []string
	lines := strings.Split(read, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if f := strings.Fields(lines[i]); len(f) == 3 && f[1] == "@" {
			cells = append(cells, f[0]+" "+f[2]+" "+strings.TrimSpace(lines[i+1]))
		}
	}
	want := []string{
		`mn:c 1970/01/01-00:00:00.001000 "\xff\xff\xff\xff\xff\xff\xff\xfd"`, // -3
		`mx:c 1970/01/01-00:00:00.001000 "\x00\x00\x00\x00\x00\x00\x00\t"`,   // 9
		`sum:c 1970/01/01-00:00:00.002000 "\x00\x00\x00\x00\x00\x00\x00\x01"`,
		`sum:c 1970/01/01-00:00:00.001000 "\x00\x00\x00\x00\x00\x00\x00("`, // 40
	}
	if strings.Join(cells, "\n") != strings.Join(want, "\n") {
		t.Errorf("cbt read t: cells\n%s\nwant\n%s\n(output:\n%s)", strings.Join(cells, "\n"), strings.Join(want, "\n"), read)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "t", "r", "sum:c=x"}, `aggregate family "sum"`},
		{[]string{"addtocell", "t", "r", "plain:c=1@1000"}, `family "plain"`},
		{[]string{"createtable", "h", "families=h:never:inthll"}, "HyperLogLog++"},
		{[]string{"setvaluetype", "t", "plain", "stringutf8bytes"}, "immutable"},
	} {
		if _, err := run(bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "InvalidArgument") {
			t.Errorf("cbt %s: %v; want InvalidArgument saying %s", strings.Join(bad.args, " "), err, bad.want)
		}
	}
	if _, err := run("setvaluetype", "t", "nofam", "stringutf8bytes"); err == nil || !strings.Contains(err.Error(), "NotFound") || !strings.Contains(err.Error(), `"nofam"`) {
		t.Errorf("cbt setvaluetype of a missing family: %v; want NotFound naming it", err)
	}
}
