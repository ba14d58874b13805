package cli_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// scanKeys runs a scan with --json and returns the row keys in order.
func (r run) scanKeys(args ...string) []string {
	r.t.Helper()
	out := r.ok(append(args, "--json")...)
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var obj struct{ Row string }
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			r.t.Fatalf("bighive %s: line %q: %v", strings.Join(args, " "), line, err)
		}
		keys = append(keys, obj.Row)
	}
	return keys
}

// TestScanReverseCountKeysOnRealCluster: scan's --reverse, --count and
// --keys over a table of several tablets of a real cluster.
func TestScanReverseCountKeysOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t", "--families", "cf", "--splits", "k03,k06")
	r.waitFor("serving", "tablets", "t")
	var all []string
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%02d", i)
		all = append(all, k)
		r.ok("put", "t", k, "cf:a", "value-"+k)
		r.ok("put", "t", k, "cf:b", "other")
	}
	rev := slices.Clone(all)
	slices.Reverse(rev)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"scan", "t", "--reverse"}, rev},
		{[]string{"read", "t", "--reverse", "--limit", "4"}, rev[:4]},
		{[]string{"scan", "t", "--end", "k05", "--reverse", "--limit", "3"}, []string{"k04", "k03", "k02"}},
		{[]string{"scan", "t", "--keys", "k07,k01,nope,k04"}, []string{"k01", "k04", "k07"}},
		{[]string{"scan", "t", "--keys", "k07,k01,k04", "--reverse"}, []string{"k07", "k04", "k01"}},
		{[]string{"scan", "t", "--prefix", "k0", "--regex", "k0[2-8]", "--reverse", "--limit", "2"}, []string{"k08", "k07"}},
	} {
		if got := r.scanKeys(tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("bighive %s: rows %v, want %v", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scan", "t", "--count"}, "10"},
		{[]string{"read", "t", "--start", "k02", "--end", "k08", "--count"}, "6"},
		{[]string{"scan", "t", "--regex", ".*[13]", "--count", "--reverse"}, "2"},
		{[]string{"scan", "t", "--keys", "k01,k09,zz", "--count"}, "2"},
	} {
		if out := r.ok(tc.args...); strings.TrimSpace(out) != tc.want {
			t.Errorf("bighive %s printed %q, want %q", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	if out := r.ok("scan", "t", "--count", "--json"); strings.TrimSpace(out) != `{"count":10}` {
		t.Errorf("scan --count --json printed %q", out)
	}
	if _, errs, code := r.do("scan", "t", "--keys", "k01", "--prefix", "k"); code != 2 || !strings.Contains(errs, "--keys") {
		t.Errorf("--keys with --prefix: exit %d, %q", code, errs)
	}
}
