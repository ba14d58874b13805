package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackupCommand: `bighive backup` on a real cluster: create (every row
// put before it is in the backup), list, describe, update, restore (the
// restored table reads the rows at the backup's split points, not the
// rows written after), delete; bad uses fail naming what is wrong.
func TestBackupCommand(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "src", "--families", "cf", "--splits", "m")
	r.waitFor("serving", "tablets", "src")
	for _, row := range []string{"a", "b", "n", "z"} {
		r.ok("put", "src", row, "cf:q", "v-"+row)
	}
	out := r.ok("--json", "backup", "create", "src", "b1", "--expire", "48h")
	var obj struct {
		Backup  string   `json:"backup"`
		Table   string   `json:"table"`
		Tablets int      `json:"tablets"`
		Splits  []string `json:"split_keys"`
		Expires string   `json:"expires"`
		Files   int      `json:"files"`
		Bytes   int64    `json:"bytes"`
		// The space: the table names every file of a fresh backup.
		Exclusive int64 `json:"exclusive_bytes"`
		Shared    int64 `json:"shared_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.Backup != "b1" || obj.Table != "src" || obj.Tablets != 2 ||
		len(obj.Splits) != 1 || obj.Splits[0] != "m" || obj.Files == 0 || obj.Exclusive != 0 || obj.Shared != obj.Bytes || obj.Bytes == 0 {
		t.Fatalf("--json backup create printed %q (%v)", out, err)
	}
	if exp, err := time.Parse(time.RFC3339Nano, obj.Expires); err != nil || time.Until(exp) < 47*time.Hour || time.Until(exp) > 49*time.Hour {
		t.Fatalf("backup expires %q (%v), want in 48h", obj.Expires, err)
	}
	r.ok("put", "src", "c", "cf:q", "after")
	r.ok("backup", "create", "src", "b2")
	if out := r.ok("backup", "list"); !strings.Contains(out, "b1") || !strings.Contains(out, "b2") || !strings.Contains(out, "EXCLUSIVE") || !strings.Contains(out, "SHARED") {
		t.Fatalf("backup list printed:\n%s", out)
	}
	if out := r.ok("backup", "describe", "b1"); !strings.Contains(out, "src") || !strings.Contains(out, "SPLITS") {
		t.Fatalf("backup describe printed:\n%s", out)
	}
	if out := r.ok("backup", "update", "b1", "--expire", "2099-01-02T03:04:05Z"); !strings.Contains(out, "2099-01-02T03:04:05Z") {
		t.Fatalf("backup update printed:\n%s", out)
	}
	if out := r.ok("backup", "restore", "b1", "dst"); !strings.Contains(out, "restored backup b1 as table dst (2 tablets)") {
		t.Fatalf("backup restore printed:\n%s", out)
	}
	r.waitFor("serving", "tablets", "dst")
	out = r.ok("scan", "dst")
	for _, row := range []string{"a", "b", "n", "z"} {
		if !strings.Contains(out, "v-"+row) {
			t.Errorf("restored table lacks row %s:\n%s", row, out)
		}
	}
	if strings.Contains(out, "after") {
		t.Errorf("restored table holds a row written after the backup:\n%s", out)
	}
	if out := r.ok("tablets", "dst"); strings.Count(out, "serving") != 2 {
		t.Errorf("restored table's tablets, want 2 serving:\n%s", out)
	}
	r.ok("backup", "delete", "b1")
	if out := r.ok("backup", "list", "--json"); strings.Contains(out, `"b1"`) || !strings.Contains(out, `"b2"`) {
		t.Fatalf("backup list after delete printed:\n%s", out)
	}
	// With its table dropped and b1 deleted, b2 alone keeps the file that
	// holds row c, and shares the files dst (restored from b1) names.
	r.ok("drop", "src")
	out = r.ok("--json", "backup", "list", "src")
	obj.Exclusive, obj.Shared = 0, 0
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.Backup != "b2" || obj.Exclusive == 0 || obj.Shared == 0 {
		t.Fatalf("backup list after drop printed %q (%v), want b2 with exclusive and shared bytes", out, err)
	}
	// copy, export and import (into this cluster, under a new name), then
	// restores of both.
	if out := r.ok("backup", "copy", "b2", "b2-copy"); !strings.Contains(out, "copied backup b2 as b2-copy") {
		t.Fatalf("backup copy printed:\n%s", out)
	}
	dir := filepath.Join(t.TempDir(), "exp")
	if out := r.ok("backup", "export", "b2", dir); !strings.Contains(out, "exported backup b2 to "+dir) {
		t.Fatalf("backup export printed:\n%s", out)
	}
	if out := r.ok("--json", "backup", "import", dir, "--name", "b2-in", "--expire", "24h"); !strings.Contains(out, `"backup":"b2-in"`) {
		t.Fatalf("backup import printed:\n%s", out)
	}
	for _, b := range []string{"b2-copy", "b2-in"} {
		r.ok("backup", "restore", b, "from-"+b)
		r.waitFor("serving", "tablets", "from-"+b)
		out := r.ok("scan", "from-"+b)
		for _, row := range []string{"a", "b", "c", "n", "z"} {
			if !strings.Contains(out, "v-"+row) && !(row == "c" && strings.Contains(out, "after")) {
				t.Errorf("table restored from %s lacks row %s:\n%s", b, row, out)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"backup", "export", "b2"}, 2, "export BACKUP DIR"},
		{[]string{"backup", "copy", "b2", "x", "--name", "y"}, 2, "--name"},
		{[]string{"backup", "import", dir}, 1, "already exists"},
		{[]string{"backup", "import", t.TempDir()}, 1, "no export"},
		{[]string{"backup", "describe", "b1"}, 1, "b1"},
		{[]string{"backup", "create", "nope", "b3"}, 1, "nope"},
		{[]string{"backup", "restore", "b2", "dst"}, 1, "dst"},
		{[]string{"backup", "create", "src", "b4", "--expire", "soon"}, 2, "--expire"},
		{[]string{"backup", "update", "b2"}, 2, "--expire"},
		{[]string{"backup", "frobnicate"}, 2, "unknown subcommand"},
		{[]string{"backup", "restore", "b2"}, 2, "restore BACKUP TABLE"},
	} {
		if out, errs, code := r.do(tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("bighive %s: exit %d, stderr %q, stdout %q; want exit %d and %q", strings.Join(tc.args, " "), code, errs, out, tc.code, tc.want)
		}
	}
}
