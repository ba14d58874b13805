package cli_test

import (
	"strings"
	"testing"
)

// TestAggregatesOnRealCluster: createtable with cbt's FAMILY:GCPOLICY:TYPE
// families makes aggregate families, ls and tables show their type,
// createfamily --type adds one, addtocell sums (min, max) integers into
// one cell per timestamp, and what Cloud Bigtable refuses is refused: a set
// into an aggregate family, an addtocell into a plain one, HyperLogLog++,
// a value type changed by setvaluetype (NotFound first for a missing
// family).
func TestAggregatesOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("createtable", "at", "families=sum:never:intsum,mx:intmax,plain")
	r.ok("createfamily", "at", "mn", "--type", "intmin")
	out := r.ok("ls", "at")
	for _, want := range []string{"intsum", "intmax", "intmin"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ls at lacks %q:\n%s", want, out)
		}
	}
	r.waitFor("ok", "addtocell", "at", "r", "sum:c=5@1000")
	r.ok("addtocell", "at", "r", "sum:c=7@1000", "mx:c=3@1000", "mn:c=3@1000")
	r.ok("addtocell", "at", "r", "sum:c=-2@1000", "mx:c=-9@1000", "mn:c=-9@1000", "sum:c=1@2000")
	var lines []string
	for _, l := range strings.Split(r.ok("lookup", "at", "r"), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	out = strings.Join(lines, "\n")
	for _, want := range []string{
		`r sum:c 1000 "\x00\x00\x00\x00\x00\x00\x00\n"`, // 10
		`r sum:c 2000 "\x00\x00\x00\x00\x00\x00\x00\x01"`,
		`r mx:c 1000 "\x00\x00\x00\x00\x00\x00\x00\x03"`,
		`r mn:c 1000 "\xff\xff\xff\xff\xff\xff\xff\xf7"`, // -9
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lookup at r lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "at", "r", "sum:c=x"}, `aggregate family "sum"`},
		{[]string{"addtocell", "at", "r", "plain:c=1@1000"}, `family "plain"`},
		{[]string{"addtocell", "at", "r", "sum:c=x@1000"}, "not an int64"},
		{[]string{"createfamily", "at", "h", "--type", "inthll"}, "HyperLogLog++"},
		{[]string{"createtable", "hll", "families=h:never:inthll"}, "HyperLogLog++"},
		{[]string{"setvaluetype", "at", "plain", "intsum"}, "InvalidArgument: column family \"plain\" of table \"at\": its value type is set at its creation and is immutable"},
		{[]string{"setvaluetype", "at", "nofam", "stringutf8bytes"}, "NotFound: column family \"nofam\" of table \"at\" does not exist"},
	} {
		if _, errs, code := r.do(bad.args...); code == 0 || !strings.Contains(errs, bad.want) {
			t.Errorf("bighive %s: exit %d, stderr %q; want an error saying %s", strings.Join(bad.args, " "), code, errs, bad.want)
		}
	}
}
