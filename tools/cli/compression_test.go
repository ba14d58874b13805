package cli_test

import (
	"strings"
	"testing"
)

// TestCompressionCommandsOnRealCluster: the codec given by create's
// --compression and per-family compression=, by createfamily
// --compression and by setcompression is the one tables shows; bad codec
// names are usage errors.
func TestCompressionCommandsOnRealCluster(t *testing.T) {
	t.Parallel()
	r := run{t: t, masters: startCluster(t)}
	r.ok("create", "t1", "--families", "cf,raw:compression=none", "--compression", "zstd")
	r.waitFor("serving", "tablets", "t1")
	r.ok("createfamily", "t1", "blobs", "--compression", "none")
	r.ok("createfamily", "t1", "plain")
	r.ok("setcompression", "t1", "plain", "zstd")
	r.ok("put", "t1", "r", "cf:a", "v1")
	r.ok("checkpoint")
	if out := r.ok("get", "t1", "r"); !strings.Contains(out, "v1") {
		t.Fatalf("get after checkpoint:\n%s", out)
	}
	out := r.ok("tables")
	for _, want := range []string{"cf:compression=zstd", "raw:compression=none", "blobs:compression=none", "plain:compression=zstd"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables does not show %q:\n%s", want, out)
		}
	}
	if out := r.ok("tables", "--json"); !strings.Contains(out, `"compression":"zstd"`) {
		t.Errorf("tables --json shows no compression:\n%s", out)
	}
	for _, args := range [][]string{
		{"create", "t2", "--families", "cf", "--compression", "lz4"},
		{"create", "t2", "--families", "cf:compression=lz4"},
		{"createfamily", "t1", "x", "--compression", "gzip"},
		{"setcompression", "t1", "cf", "default"},
	} {
		if _, errs, code := r.do(args...); code != 2 || !strings.Contains(errs, "none, snappy or zstd") {
			t.Errorf("bighive %s: exit %d, stderr %q; want a usage error naming the codecs", strings.Join(args, " "), code, errs)
		}
	}
}
