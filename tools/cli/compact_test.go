package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompactOnRealCluster: compact and compact --major of a table across
// two tablets succeed and keep what reads show (the deleted row stays
// deleted, the live ones stay); --json prints the table and the kind; an
// unknown table and a missing argument fail.
func TestCompactOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf", "--splits", "m")
	r.waitFor("serving", "tablets", "t1")
	for _, row := range []string{"a", "b", "x", "y"} {
		r.ok("put", "t1", row, "cf:q", "v-"+row)
	}
	r.ok("checkpoint")
	r.ok("delete", "t1", "b")
	r.ok("delete", "t1", "y", "cf:q")
	r.ok("checkpoint")
	if out := r.ok("compact", "t1"); !strings.Contains(out, "compacted table t1 (merging)") {
		t.Fatalf("compact t1 printed:\n%s", out)
	}
	out := r.ok("--json", "compact", "t1", "--major")
	var obj struct {
		Table string `json:"table"`
		Major bool   `json:"major"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.Table != "t1" || !obj.Major {
		t.Fatalf("--json compact t1 --major printed %q (%v)", out, err)
	}
	out = r.ok("scan", "t1")
	for _, row := range []string{"v-a", "v-x"} {
		if !strings.Contains(out, row) {
			t.Errorf("scan after compact --major misses %s:\n%s", row, out)
		}
	}
	if strings.Contains(out, "v-b") || strings.Contains(out, "v-y") {
		t.Errorf("scan after compact --major shows a deleted cell:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"compact", "nope", "--major"}, 1, "nope"},
		{[]string{"compact"}, 2, "TABLE"},
	} {
		if out, errs, code := r.do(tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("bighive %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, out, tc.code, tc.want)
		}
	}
}
