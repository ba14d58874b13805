package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"bighive/testkit/wait"
)

// TestCbtNamesOnRealCluster: cbt's command names do what cbt's do:
// createtable with KEY=VALUE arguments, ls of the tables and of one
// table's families, deletecolumn, deleterow and deletetable.
func TestCbtNamesOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("createtable", "ct", "families=cf:maxversions=2,meta", "splits=m")
	wait.For(t, 30*time.Second, "both tablets of ct (splits=m) serving", func() error {
		if out := r.ok("tablets", "ct"); strings.Count(out, "serving") != 2 {
			return fmt.Errorf("tablets ct:\n%s", out)
		}
		return nil
	})
	if out := r.ok("ls"); !strings.Contains(out, "ct\n") {
		t.Fatalf("ls lacks ct:\n%s", out)
	}
	out := r.ok("ls", "ct")
	for _, want := range []string{"cf", "maxversions=2", "meta", "<never>"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ls ct lacks %q:\n%s", want, out)
		}
	}
	if _, errs, code := r.do("createtable", "bad", "colfams=cf"); code == 0 || !strings.Contains(errs, "colfams") {
		t.Fatalf("createtable with an unknown argument: exit %d, %q", code, errs)
	}

	r.ok("set", "ct", "r1", "cf:a=1", "cf:b=2")
	r.ok("set", "ct", "r2", "cf:a=1")
	r.ok("deletecolumn", "ct", "r1", "cf", "a")
	if out := r.ok("lookup", "ct", "r1"); strings.Contains(out, "cf:a") || !strings.Contains(out, "cf:b") {
		t.Fatalf("after deletecolumn ct r1 cf a:\n%s", out)
	}
	r.ok("deleterow", "ct", "r2")
	if out := r.ok("count", "ct"); strings.TrimSpace(out) != "1" {
		t.Fatalf("count after deleterow: %q, want 1", out)
	}
	if _, _, code := r.do("deleterow", "ct", "r1", "cf"); code == 0 {
		t.Fatal("deleterow with a family: want an error (it takes TABLE ROW)")
	}
	r.ok("deletetable", "ct")
	if out := r.ok("ls"); strings.Contains(out, "ct\n") {
		t.Fatalf("ls after deletetable still lists ct:\n%s", out)
	}
}
