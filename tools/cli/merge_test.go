package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMergeCommand: `bighive merge` merges the tablet holding a row with
// its successor on a real cluster: the table has one tablet less, and every
// row of both reads back; merging the last tablet, or a missing argument,
// fails with a message naming what is wrong.
func TestMergeCommand(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "m1", "--families", "cf", "--splits", "f,m,t")
	r.waitFor("serving", "tablets", "m1")
	rows := []string{"a", "b", "g", "h", "n", "u"}
	for _, row := range rows {
		r.ok("put", "m1", row, "cf:q", "v-"+row)
	}
	out := r.ok("--json", "merge", "m1", "b")
	var obj struct {
		Table  string `json:"table"`
		Merged string `json:"merged_tablet"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.Table != "m1" || obj.Merged == "" {
		t.Fatalf("--json merge m1 b printed %q (%v)", out, err)
	}
	r.waitFor("serving", "tablets", "m1")
	if out := r.ok("tablets", "m1", "--json"); strings.Count(out, "\n") != 3 || !strings.Contains(out, obj.Merged) {
		t.Fatalf("after merge, want 3 tablets, one of them %s:\n%s", obj.Merged, out)
	}
	if out := r.ok("merge", "m1", "m"); !strings.Contains(out, "merged the tablet of table m1") {
		t.Fatalf("merge m1 m printed:\n%s", out)
	}
	if out := r.ok("tablets", "m1", "--json"); strings.Count(out, "\n") != 2 {
		t.Fatalf("after the second merge, want 2 tablets:\n%s", out)
	}
	out = r.ok("scan", "m1")
	for _, row := range rows {
		if strings.Count(out, "v-"+row) != 1 {
			t.Errorf("scan after merges shows v-%s %d times:\n%s", row, strings.Count(out, "v-"+row), out)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"merge", "m1", "z"}, 1, "no successor"},
		{[]string{"merge", "nope", "a"}, 1, "nope"},
		{[]string{"merge", "m1"}, 2, "ROW"},
	} {
		if out, errs, code := r.do(tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("bighive %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, out, tc.code, tc.want)
		}
	}
}
