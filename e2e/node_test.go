package e2e_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/testkit/cluster"
)

// nodeDir holds the Node.js project of TestBigtableNodeClient: its
// package.json and package-lock.json pin @google-cloud/bigtable, and
// bigtable.js is the script the test runs.
const nodeDir = "testdata/node"

// TestBigtableNodeClient drives the cluster's frontend process with the
// official Node.js client, @google-cloud/bigtable (installed with npm
// into a directory under $TMPDIR that later runs reuse), reached the way
// an application reaches the emulator (BIGTABLE_EMULATOR_HOST). The
// script testdata/node/bigtable.js creates a table with families and
// splits, reads the families' GC rules (null for a family without one),
// writes, reads by key, by ranges and through filters, runs
// conditional mutations, increments and appends, deletes cells and a
// row, writes a cell at the server's time, adds a family, samples row
// keys, reads a missing table (NotFound), drops a row prefix, deletes the table, and prints one JSON object of results that
// this test checks exactly. It fails, and never skips, without node and
// npm: bash .ci/run installs them (-short skips it, as every test here).
func TestBigtableNodeClient(t *testing.T) {
	skipShort(t, "official Node.js client test")
	modules := installNodeClient(t)
	c := cluster.New(t, cluster.Options{TServers: 2})

	start := time.Now()
	stdout, stderr := runNode(t, modules, c.BigtableAddr(), 3*time.Minute, "bigtable.js")

	type sample struct {
		Key    string `json:"key"`
		Offset int64  `json:"offset"`
	}
	type cells map[string][]string
	var got struct {
		Families            []string
		FamilyRules         map[string]any
		CFMetadata          map[string]any
		Tables              []string
		ByKey               map[string]cells
		Apple               map[string]cells
		AbsentExists        bool
		RangeClosed         []string
		RangeHalfOpen       []string
		Prefix              []string
		Limit               []string
		FilterColumn        map[string]cells
		FilterValue         map[string]cells
		FilterFamily        map[string]cells
		CondMatched         bool
		CondNotMatched      bool
		CondRows            map[string]cells
		Increments          []int64
		Edited              map[string]cells
		ServerTimestamp     string
		FamiliesAfterCreate []string
		RulesAfterCreate    map[string]any
		Samples             []sample
		MissingTableCode    codes.Code
		AfterDeleteRows     []string
		ExistsAfterDelete   bool
		TablesAfterDelete   []string
	}
	decodeNode(t, stdout, stderr, &got)
	t.Logf("node results: %s", bytes.TrimSpace(stdout.Bytes()))

	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	row := func(k string) cells {
		return cells{"cf:name": {"name-" + k}, "cf:size": {strconv.Itoa(len(k))}}
	}
	check("families", got.Families, []string{"cf", "meta"})
	// A family without a GC rule has none on the wire (gc_rule absent, as
	// Cloud Bigtable sends it): the client shows null, where an empty
	// GcRule message would show {}.
	versions := func(n float64) map[string]any { return map[string]any{"maxNumVersions": n, "rule": "maxNumVersions"} }
	check("families' GC rules", got.FamilyRules, map[string]any{"cf": nil, "meta": versions(1)})
	check("family cf's metadata", got.CFMetadata, map[string]any{"gcRule": nil, "valueType": nil})
	check("tables", got.Tables, []string{"nodetbl"})
	check("rows by key", got.ByKey, map[string]cells{"banana": row("banana"), "zebra": row("zebra")})
	apple := row("apple")
	apple["meta:tag"] = []string{"fruit"}
	check("row apple", got.Apple, map[string]cells{"apple": apple})
	check("absent row exists", got.AbsentExists, false)
	check("closed range [banana, lemon]", got.RangeClosed, []string{"banana", "cherry", "kiwi", "lemon"})
	check("half-open range [banana, lemon)", got.RangeHalfOpen, []string{"banana", "cherry", "kiwi"})
	check("prefix user#", got.Prefix, []string{"user#1", "user#2", "user#3"})
	check("limit 3", got.Limit, []string{"apple", "banana", "cherry"})
	check("column filter size on [a, c]", got.FilterColumn, map[string]cells{
		"apple": {"cf:size": {"5"}}, "banana": {"cf:size": {"6"}}})
	check("value regex filter", got.FilterValue, map[string]cells{
		"kiwi": {"cf:name": {"name-kiwi"}}, "mango": {"cf:name": {"name-mango"}}})
	check("family filter meta", got.FilterFamily, map[string]cells{"apple": {"meta:tag": {"fruit"}}})
	check("conditional mutation matched", got.CondMatched, true)
	check("conditional mutation not matched", got.CondNotMatched, false)
	check("conditional mutation rows", got.CondRows, map[string]cells{
		"kiwi": {"cf:cond": {"matched"}}, "lemon": {"cf:cond": {"unmatched"}}})
	check("increments", got.Increments, []int64{5, 6, 4})

	check("after append, deleteCells and row delete", got.Edited, map[string]cells{
		"cherry": {"cf:name": {"name-cherry"}}, "mango": {"cf:name": {"name-mango-ripe", "name-mango"}, "cf:size": {"5"}}}) // cf keeps every version, newest first
	// -1 asks for the server's time, in microseconds since the epoch
	// (Bighive does not round it to milliseconds; see README's Known limits).
	if ts, err := strconv.ParseInt(got.ServerTimestamp, 10, 64); err != nil ||
		ts < start.Add(-time.Minute).UnixMicro() || ts > time.Now().Add(time.Minute).UnixMicro() {
		t.Errorf("server-assigned timestamp %q (%v), want the server's time, about %d", got.ServerTimestamp, err, start.UnixMicro())
	}
	check("families after createFamily", got.FamiliesAfterCreate, []string{"cf", "extra", "meta", "norule"})
	check("families' GC rules after createFamily", got.RulesAfterCreate,
		map[string]any{"cf": nil, "extra": versions(2), "meta": versions(1), "norule": nil})
	if len(got.Samples) == 0 {
		t.Errorf("sampleRowKeys returned nothing")
	}
	if !slices.IsSortedFunc(got.Samples, func(a, b sample) int {
		if a.Key == "" || b.Key == "" { // the empty key, the table's end, is last
			return cmp.Compare(b2i(a.Key == ""), b2i(b.Key == ""))
		}
		return strings.Compare(a.Key, b.Key)
	}) {
		t.Errorf("samples not sorted by key: %v", got.Samples)
	}
	var sampled []string
	for _, s := range got.Samples {
		sampled = append(sampled, s.Key)
	}
	for _, split := range []string{"k", "u", ""} { // every tablet's end is a sample
		if !slices.Contains(sampled, split) {
			t.Errorf("samples %q lack the tablet end %q", sampled, split)
		}
	}
	for i := 1; i < len(got.Samples); i++ {
		if got.Samples[i].Offset < got.Samples[i-1].Offset {
			t.Errorf("sample offsets decrease: %v", got.Samples)
		}
	}
	check("reading a missing table: gRPC code", got.MissingTableCode, codes.NotFound)
	check("rows after deleteRows(user#)", got.AfterDeleteRows, []string{
		"apple", "banana", "cherry", "counter", "kiwi", "lemon", "mango"})
	check("table exists after delete", got.ExistsAfterDelete, false)
	check("tables after delete", got.TablesAfterDelete, []string{})
	if t.Failed() {
		t.Logf("node stderr:\n%s", stderr.String())
	}
}

// runNode runs the script name of testdata/node with node in modules (the
// directory installNodeClient returns, where the script is copied so that
// it finds the client), BIGTABLE_EMULATOR_HOST set to addr and args after
// the script, within timeout, and returns its stdout and stderr; it fails
// the test if the script fails.
func runNode(t *testing.T, modules, addr string, timeout time.Duration, name string, args ...string) (stdout, stderr *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	script := filepath.Join(modules, name)
	src, err := os.ReadFile(filepath.Join(nodeDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = modules
	// METADATA_SERVER_DETECTION=none: Google's auth library must not probe
	// for a GCE metadata server (link-local 169.254.169.254); the script
	// reaches the frontend on loopback only.
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr, "METADATA_SERVER_DETECTION=none")
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("node %s ran in %v", name, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s\nstdout:\n%s", name, err, stderr.String(), stdout.String())
	}
	return stdout, stderr
}

// decodeNode parses a script's one JSON object into v, refusing fields v
// lacks.
func decodeNode(t *testing.T, stdout, stderr *bytes.Buffer, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("parse the script's output: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
}

// installNodeClient installs the pinned Node.js project into
// $TMPDIR/bighive-node-<hash of its package files> with npm ci, unless an
// earlier run already did, and returns that directory. Install scripts
// are skipped: the only one that matters, sse4_crc32's native CRC32C,
// is an optional dependency the client replaces with JavaScript, and
// skipping it needs no compiler and behaves alike under every npm.
func installNodeClient(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (%v): bash .ci/run installs node and npm (Debian's nodejs and npm)", tool, err)
		}
	}
	lock, err := os.ReadFile(filepath.Join(nodeDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(nodeDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(append([]byte{}, pkg...), lock...))
	dir := filepath.Join(os.TempDir(), "bighive-node-"+hex.EncodeToString(sum[:8]))
	done := filepath.Join(dir, ".installed")
	if _, err := os.Stat(done); err == nil {
		return dir
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	t.Logf("npm ci installed @google-cloud/bigtable into %s in %v", dir, time.Since(start).Round(time.Millisecond))
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
