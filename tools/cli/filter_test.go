package cli_test

import (
	"strings"
	"testing"

	"bighive/client/clienttest"
)

// TestReadFilterFlags: scan and read narrow rows with --prefix and
// --regex, and cells with --columns and --keys-only.
func TestReadFilterFlags(t *testing.T) {
	fc := clienttest.Start(t, clienttest.Options{TServers: 1})
	r := run{t: t, masters: strings.Join(fc.MasterAddrs(), ",")}
	r.ok("create", "t", "--families", "cf,meta")
	for _, row := range []string{"user#1", "user#2", "userx", "admin#1"} {
		r.ok("put", "t", row, "cf:name", "value-of-"+row)
		r.ok("put", "t", row, "meta:seen", "yes")
	}
	rows := func(out string) []string {
		var keys []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] != "ROW" && (len(keys) == 0 || keys[len(keys)-1] != f[0]) {
				keys = append(keys, f[0])
			}
		}
		return keys
	}
	tests := []struct {
		args     []string
		rows     string
		contains string
		absent   string
	}{
		{[]string{"scan", "t", "--prefix", "user"}, "user#1 user#2 userx", "", ""},
		{[]string{"read", "t", "--prefix", "user#"}, "user#1 user#2", "", ""},
		{[]string{"scan", "t", "--regex", ".*#1"}, "admin#1 user#1", "", ""},
		{[]string{"scan", "t", "--regex", "user"}, "", "", ""}, // the regex matches whole keys
		{[]string{"scan", "t", "--columns", "meta:seen"}, "admin#1 user#1 user#2 userx", "meta:seen", "cf:name"},
		{[]string{"scan", "t", "--keys-only", "--prefix", "admin"}, "admin#1", "cf:name", "value-of"},
		{[]string{"get", "t", "user#2", "--columns", "cf:name", "--keys-only"}, "user#2", "cf:name", "value-of"},
	}
	for _, tt := range tests {
		out := r.ok(tt.args...)
		if got := strings.Join(rows(out), " "); got != tt.rows && !(tt.rows == "" && strings.TrimSpace(out) == "") {
			t.Errorf("%s: rows %q, want %q\n%s", strings.Join(tt.args, " "), got, tt.rows, out)
		}
		if tt.contains != "" && !strings.Contains(out, tt.contains) || tt.absent != "" && strings.Contains(out, tt.absent) {
			t.Errorf("%s: want %q and not %q in\n%s", strings.Join(tt.args, " "), tt.contains, tt.absent, out)
		}
	}
	if _, errs, code := r.do("scan", "t", "--regex", "a("); code == 0 || !strings.Contains(errs, "InvalidArgument") || !strings.Contains(errs, "does not compile") {
		t.Errorf("scan --regex 'a(': exit %d, stderr %s", code, errs)
	}
	if _, errs, code := r.do("scan", "t", "--prefix", "u", "--start", "a"); code != 2 {
		t.Errorf("--prefix with --start: exit %d, stderr %s", code, errs)
	}
}
