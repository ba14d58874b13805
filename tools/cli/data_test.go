package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestSetLookupCountOnRealCluster: set writes several cells of a row in
// one mutation (at one timestamp), lookup reads them back like get, count
// counts rows of the table, a prefix and a range, and samplerowkeys ends
// with the end of the table.
func TestSetLookupCountOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf,meta", "--splits", "m")
	r.waitFor("serving", "tablets", "t1")

	r.ok("set", "t1", "user#1", "cf:name=alice", "cf:email=a=b@example.com", "meta:n=1", "--timestamp", "5000")
	out := r.ok("lookup", "t1", "user#1")
	for _, want := range []string{"cf:name", "alice", "cf:email", "a=b@example.com", "meta:n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("lookup t1 user#1 lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, "5000"); got != 3 {
		t.Fatalf("lookup t1 user#1: %d cells at timestamp 5000, want 3:\n%s", got, out)
	}
	r.ok("set", "t1", "user#1", "cf:name=bob")
	out = r.ok("lookup", "t1", "user#1", "--columns", "cf:name", "--versions", "1")
	if !strings.Contains(out, "bob") || strings.Contains(out, "alice") || strings.Contains(out, "email") {
		t.Fatalf("lookup --columns cf:name --versions 1:\n%s", out)
	}
	if got, want := r.ok("lookup", "t1", "user#1", "--json"), r.ok("get", "t1", "user#1", "--json"); got != want {
		t.Fatalf("lookup and get differ:\n%s\n%s", got, want)
	}

	for i := 0; i < 30; i++ {
		prefix := "a"
		if i%3 == 0 {
			prefix = "z" // the other tablet
		}
		r.ok("set", "t1", fmt.Sprintf("%s%02d", prefix, i), "cf:q=v", "meta:q=w")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"count", "t1"}, "31"},
		{[]string{"count", "t1", "--prefix", "z"}, "10"},
		{[]string{"count", "t1", "--prefix", "user#"}, "1"},
		{[]string{"count", "t1", "--start", "a05", "--end", "z"}, "18"}, // a05..a29 but the multiples of 3, and user#1
		{[]string{"count", "t1", "--prefix", "nope"}, "0"},
	} {
		if out := r.ok(tc.args...); strings.TrimSpace(out) != tc.want {
			t.Errorf("bighive %s printed %q, want %s", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	r.ok("checkpoint")
	if out := r.ok("count", "t1"); strings.TrimSpace(out) != "31" {
		t.Fatalf("count t1 after a checkpoint printed %q", out)
	}

	out = r.ok("samplerowkeys", "t1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "m ") || !strings.HasPrefix(lines[2], "(end)") {
		t.Fatalf("samplerowkeys t1 (a header, the tablet boundary m, the end):\n%s", out)
	}
	var last struct {
		RowKey      string `json:"row_key"`
		OffsetBytes int64  `json:"offset_bytes"`
	}
	lines := strings.Split(strings.TrimSpace(r.ok("samplerowkeys", "t1", "--json")), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.RowKey != "" || last.OffsetBytes <= 0 {
		t.Fatalf("samplerowkeys --json: last %+v %v from %q", last, err, lines)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"set", "t1", "r"}, 2, "usage"},
		{[]string{"set", "t1", "r", "cf:q"}, 2, "FAMILY:QUALIFIER=VALUE"},
		{[]string{"set", "t1", "r", "cfq=v"}, 2, "FAMILY:QUALIFIER=VALUE"},
		{[]string{"set", "t1", "r", "cf:q=v", "nofam:q=v"}, 1, "InvalidArgument"},
		{[]string{"count", "t1", "--prefix", "a", "--start", "b"}, 2, "--prefix"},
		{[]string{"count", "nope"}, 1, "NotFound"},
		{[]string{"samplerowkeys", "nope"}, 1, "NotFound"},
	} {
		if out, errs, code := r.do(tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("bighive %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, out, tc.code, tc.want)
		}
	}
	// The refused mutation wrote nothing, not even its valid cell.
	if out := r.ok("lookup", "t1", "r"); !strings.Contains(out, "not found") {
		t.Fatalf("a refused set wrote part of its mutation:\n%s", out)
	}
}
