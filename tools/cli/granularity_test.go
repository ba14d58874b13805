package cli_test

import (
	"strings"
	"testing"
)

// TestGranularityOnRealCluster: create's --granularity is what tables
// shows (micros by default); in a millis table put and set with the
// client's clock write whole milliseconds, and a --timestamp that is not
// one is refused.
func TestGranularityOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "ms", "--families", "cf", "--granularity", "millis")
	r.ok("create", "us", "--families", "cf")
	r.waitFor("serving", "tablets", "ms")
	r.waitFor("serving", "tablets", "us")
	out := r.ok("tables", "--json")
	for _, want := range []string{`"granularity":"millis"`, `"granularity":"micros"`} {
		if !strings.Contains(out, want) {
			t.Errorf("tables --json does not show %s:\n%s", want, out)
		}
	}
	r.ok("put", "ms", "p", "cf:a", "v")
	r.ok("set", "ms", "s", "cf:a=v")
	for _, row := range []string{"p", "s"} {
		out := r.ok("get", "ms", row, "--json")
		i := strings.Index(out, `"timestamp":`)
		if i < 0 {
			t.Fatalf("get ms %s: no timestamp:\n%s", row, out)
		}
		ts := strings.TrimLeft(out[i+len(`"timestamp":`):], " ")
		ts = ts[:strings.IndexAny(ts, ",}")]
		if !strings.HasSuffix(ts, "000") {
			t.Errorf("get ms %s: timestamp %s is not a whole millisecond:\n%s", row, ts, out)
		}
	}
	if _, errs, code := r.do("set", "ms", "s", "cf:a=v", "--timestamp", "1500"); code == 0 || !strings.Contains(errs, "1500") {
		t.Errorf("set --timestamp 1500 in a millis table: exit %d, stderr %q", code, errs)
	}
	r.ok("set", "us", "s", "cf:a=v", "--timestamp", "1500")
	if _, errs, code := r.do("create", "x", "--families", "cf", "--granularity", "nanos"); code != 2 || !strings.Contains(errs, "micros or millis") {
		t.Errorf("--granularity nanos: exit %d, stderr %q", code, errs)
	}
}
