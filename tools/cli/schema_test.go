package cli_test

import (
	"strings"
	"testing"

	"bighive/tools/cli"
)

func TestParseGCPolicy(t *testing.T) {
	tests := []struct {
		in, want string // want "" means a parse error
	}{
		{"maxversions=3", "versions() > 3"},
		{"maxage=36h", "age() > 36h0m0s"},
		{"maxage=7d", "age() > 168h0m0s"},
		{"maxage=1d and maxversions=2", "(age() > 24h0m0s) && (versions() > 2)"},
		{"maxage=1d || maxversions=2", "(age() > 24h0m0s) || (versions() > 2)"},
		{"(maxage=1d and maxversions=2) or maxversions=10", "((age() > 24h0m0s) && (versions() > 2)) || (versions() > 10)"},
		{"((maxversions=1 or maxage=1h) and (maxversions=5))", "((versions() > 1) || (age() > 1h0m0s)) && (versions() > 5)"},
		{"never", ""},
		{"maxversions=1 and maxversions=2 or maxversions=3", ""},
		{"maxversions=0", ""},
		{"maxage=-1h", ""},
		{"(maxversions=1", ""},
		{"maxversions=1)", ""},
		{"bogus=1", ""},
		{"", ""},
		{"maxversions=1 and", ""},
	}
	for _, tc := range tests {
		p, err := cli.ParseGCPolicy(tc.in)
		switch {
		case tc.in == "never":
			if err != nil || p.String() != "" {
				t.Errorf("%q: %v, %v; want the no-GC policy", tc.in, p, err)
			}
		case tc.want == "":
			if err == nil {
				t.Errorf("%q: parsed as %s, want an error", tc.in, p)
			}
		case err != nil || p.String() != tc.want:
			t.Errorf("%q: %v (err %v), want %s", tc.in, p, err, tc.want)
		}
	}
}

// TestSchemaCommandsOnRealCluster: createfamily, then a put to it at once;
// setgcpolicy; droprowrange and deleteallrows; deletefamily, after which
// a put to the family fails.
func TestSchemaCommandsOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf")
	r.waitFor("serving", "tablets", "t1")
	r.ok("createfamily", "t1", "f2")
	r.ok("put", "t1", "a1", "f2:q", "x")
	r.ok("put", "t1", "b1", "cf:q", "y")
	r.ok("put", "t1", "b1", "cf:q", "z")
	r.ok("setgcpolicy", "t1", "cf", "(maxage=30d", "and", "maxversions=5)", "or", "maxversions=1")
	if out := r.ok("get", "t1", "b1"); strings.Contains(out, "y") || !strings.Contains(out, "z") {
		t.Fatalf("get after setgcpolicy maxversions=1:\n%s", out)
	}
	r.ok("droprowrange", "t1", "a")
	if out := r.ok("scan", "t1"); strings.Contains(out, "a1") || !strings.Contains(out, "b1") {
		t.Fatalf("scan after droprowrange a:\n%s", out)
	}
	r.ok("deleteallrows", "t1")
	if out := r.ok("scan", "t1"); strings.Contains(out, "b1") {
		t.Fatalf("scan after deleteallrows:\n%s", out)
	}
	r.ok("deletefamily", "t1", "f2")
	if _, _, code := r.do("put", "t1", "a2", "f2:q", "x"); code == 0 {
		t.Fatal("put to a deleted family succeeded")
	}
	if _, _, code := r.do("setgcpolicy", "t1", "cf", "maxversions=1", "and"); code == 0 {
		t.Fatal("a bad policy was accepted")
	}
}
