package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "bighive"

// moduleImports lists every package of the module with the module packages
// it imports (non-test imports), by go list.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		from, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		imports[from] = nil
		for _, imp := range p.Imports {
			if to, ok := strings.CutPrefix(imp, module+"/"); ok {
				imports[from] = append(imports[from], to)
			}
		}
	}
	if len(imports) < 10 {
		t.Fatalf("go list found only %d packages of %s", len(imports), module)
	}
	return imports
}

// TestLayering fails when a package of the module imports one of a higher
// layer or when a package has no layer.
func TestLayering(t *testing.T) {
	var msgs []string
	for _, v := range Check(moduleImports(t)) {
		msgs = append(msgs, v.String())
	}
	sort.Strings(msgs)
	for _, m := range msgs {
		t.Error(m)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    []string // substrings, one per violation
	}{
		{"down and sideways", map[string][]string{
			"storage/tablet/tsfile": {"storage/blockstore", "storage/memstore", "storage/tablet/blockcache", "storage/mutation"},
			"frontend":              {"client", "meta", "internal/apierr"},
			"e2e":                   {"testkit/cluster", "client"},
			"tools/demo":            {"testkit/cluster"},
		}, nil},
		{"up", map[string][]string{"storage/wal": {"storage/tablet"}}, []string{"storage/wal imports storage/tablet: a lower layer must not import a higher one (layer 1 → 2)"}},
		{"internal base up to a tool", map[string][]string{"storage/vfs": {"tools/cli"}}, []string{"layer 0 → 8"}},
		{"harness below the top", map[string][]string{"client": {"testkit/cluster"}}, []string{"client imports testkit/cluster: a lower layer must not import a higher one (layer 6 → 8)"}},
		{"no layer", map[string][]string{"status": nil}, []string{"status: package has no layer"}},
		{"no layer in the engine", map[string][]string{"storage/index": {"storage/wal"}}, []string{"storage/index: package has no layer"}},
		{"sub-package inherits", map[string][]string{"tserver/status": {"client"}}, []string{"layer 5 → 6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.imports)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %d violations", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].String(), w) {
					t.Errorf("violation %q does not contain %q", got[i], w)
				}
			}
		})
	}
}
