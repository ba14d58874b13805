package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"bighive/client/clienttest"
	"bighive/tools/cli"
)

type run struct {
	t       *testing.T
	masters string
}

// do runs the CLI and returns stdout, stderr and the exit status.
func (r run) do(args ...string) (string, string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, append([]string{"--masters", r.masters, "--timeout", "10s"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// ok runs the CLI and fails the test unless it exits 0.
func (r run) ok(args ...string) string {
	r.t.Helper()
	out, errs, code := r.do(args...)
	if code != 0 {
		r.t.Fatalf("bighive %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func TestCommands(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{TServers: 2})
	r := run{t: t, masters: strings.Join(fc.MasterAddrs(), ",")}

	r.ok("create", "users", "--families", "cf,meta:maxversions=2:maxage=1d", "--splits", "m,f")
	out := r.ok("tables")
	if !strings.Contains(out, "users") || !strings.Contains(out, "meta:maxversions=2:maxage=24h0m0s") || !strings.Contains(out, "TABLETS") {
		t.Errorf("tables:\n%s", out)
	}
	out = r.ok("tablets", "users")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.Contains(out, "serving") {
		t.Errorf("tablets:\n%s", out)
	}
	r.ok("put", "users", "alice", "cf:name", "Alice")
	r.ok("put", "users", "bob", "cf:name", "Bob", "--timestamp", "42")
	r.ok("put", "users", "zed", "cf:tab", "a\tb")
	out = r.ok("get", "users", "alice")
	if !strings.Contains(out, "alice") || !strings.Contains(out, "cf:name") || !strings.Contains(out, "Alice") {
		t.Errorf("get:\n%s", out)
	}
	out = r.ok("get", "users", "bob", "--json")
	var obj struct {
		Row   string
		Cells []struct {
			Family, Qualifier, Value string
			Timestamp                int64
		}
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.Row != "bob" || len(obj.Cells) != 1 || obj.Cells[0].Timestamp != 42 || obj.Cells[0].Value != "Bob" {
		t.Errorf("get --json: %q (%v)", out, err)
	}
	out = r.ok("scan", "users")
	if !strings.Contains(out, `"a\tb"`) || strings.Count(out, "\n") != 4 {
		t.Errorf("scan:\n%s", out)
	}
	out = r.ok("scan", "users", "--start", "b", "--end", "z", "--json")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"row":"bob"`) {
		t.Errorf("scan range --json:\n%s", out)
	}
	out = r.ok("--json", "scan", "users", "--limit", "2")
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("scan --limit 2: %d lines\n%s", n, out)
	}
	r.ok("delete", "users", "alice", "cf:name")
	if out := r.ok("get", "users", "alice"); !strings.Contains(out, "not found") {
		t.Errorf("after delete:\n%s", out)
	}
	r.ok("delete", "users", "bob")
	r.ok("split", "users", "p")
	if out := r.ok("tablets", "users", "--json"); strings.Count(out, "\n") != 4 {
		t.Errorf("after split:\n%s", out)
	}
	if out := r.ok("checkpoint"); strings.Count(out, "\n") != 3 {
		t.Errorf("checkpoint:\n%s", out)
	}
	if out := r.ok("tservers", "--json"); strings.Count(out, `"live":true`) != 2 {
		t.Errorf("tservers:\n%s", out)
	}
	r.ok("drop", "users")
	if out := r.ok("tables", "--json"); out != "" {
		t.Errorf("tables after drop: %q", out)
	}
}

func TestErrors(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{})
	r := run{t: t, masters: fc.MasterAddrs()[0]}
	r.ok("create", "t", "--families", "cf")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"missing args", []string{"put", "t", "r"}, 2, "usage: bighive put"},
		{"bad column", []string{"put", "t", "r", "nocolon", "v"}, 2, "FAMILY:QUALIFIER"},
		{"no families", []string{"create", "x"}, 2, "--families is required"},
		{"bad family option", []string{"create", "x", "--families", "cf:color=red"}, 2, "unknown option"},
		{"bad flag", []string{"scan", "t", "--nope"}, 2, "flag provided but not defined"},
		{"unknown table", []string{"get", "missing", "r"}, 1, "NotFound"},
		{"unknown family", []string{"put", "t", "r", "nofam:q", "v"}, 1, "InvalidArgument"},
		{"empty row", []string{"put", "t", "", "cf:q", "v"}, 1, "InvalidArgument: client: table \"t\": put row \"\" column cf:q: row key is empty"},
		{"exists", []string{"create", "t", "--families", "cf"}, 1, "AlreadyExists"},
	}
	for _, tc := range tests {
		out, errs, code := r.do(tc.args...)
		if code != tc.wantCode || !strings.Contains(errs, tc.wantErr) {
			t.Errorf("%s: exit %d, stderr %q (stdout %q); want exit %d and %q", tc.name, code, errs, out, tc.wantCode, tc.wantErr)
		}
	}
}

func TestMastersDefault(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{})
	t.Setenv("BIGHIVE_MASTERS", fc.MasterAddrs()[0])
	var out, errb bytes.Buffer
	if code := cli.Run(context.Background(), []string{"tables"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
