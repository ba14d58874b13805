package cli_test

import (
	"strings"
	"testing"
)

// TestCheckAndPutOnRealCluster: checkandput writes only when the latest
// value equals the expected one exactly (not a prefix, not an older
// version), says whether it applied with exit status 0 either way, may
// write another column than it checks, and refuses bad arguments.
func TestCheckAndPutOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf")
	r.waitFor("serving", "tablets", "t1")
	latest := func(col string) string {
		t.Helper()
		out := r.ok("get", "t1", "lock", "--columns", col, "--versions", "1")
		return out
	}
	if out := r.ok("checkandput", "t1", "lock", "cf:owner=free", "cf:owner=w1"); !strings.Contains(out, "not applied") {
		t.Fatalf("checkandput on a missing cell printed %q, want not applied", out)
	}
	r.ok("put", "t1", "lock", "cf:owner", "free")
	if out := r.ok("checkandput", "t1", "lock", "cf:owner=fre", "cf:owner=w1"); !strings.Contains(out, "not applied") {
		t.Fatalf("checkandput with a prefix of the value printed %q, want not applied", out)
	}
	if out := r.ok("checkandput", "t1", "lock", "cf:owner=free", "cf:owner=w1"); strings.TrimSpace(out) != "applied" {
		t.Fatalf("checkandput with the right value printed %q, want applied", out)
	}
	if out := latest("cf:owner"); !strings.Contains(out, "w1") {
		t.Fatalf("after the applied checkandput:\n%s", out)
	}
	// The older version "free" no longer counts.
	if out := r.ok("checkandput", "t1", "lock", "cf:owner=free", "cf:owner=w2"); !strings.Contains(out, "not applied") {
		t.Fatalf("second checkandput printed %q, want not applied", out)
	}
	if out := r.ok("checkandput", "t1", "lock", "cf:owner=w1", "cf:since=now", "--json"); !strings.Contains(out, `"applied": true`) && !strings.Contains(out, `"applied":true`) {
		t.Fatalf("checkandput --json of another column printed %q", out)
	}
	if out := latest("cf:since"); !strings.Contains(out, "now") {
		t.Fatalf("cf:since after the checkandput:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"checkandput", "t1", "lock", "cf:owner", "cf:owner=w3"}, 2, "FAMILY:QUALIFIER=VALUE"},
		{[]string{"checkandput", "t1", "lock", "cf:owner=w1"}, 2, ""},
		{[]string{"checkandput", "t1", "lock", "cf:owner=w1", "nofam:x=1"}, 1, "InvalidArgument"},
	} {
		if out, errs, code := r.do(tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("bighive %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, out, tc.code, tc.want)
		}
	}
	if out := latest("cf:owner"); !strings.Contains(out, "w1") {
		t.Fatalf("the refused calls changed the row:\n%s", out)
	}
}
