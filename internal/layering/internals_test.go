package layering

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// internalsDoc is the page whose package table TestInternalsTable checks.
const internalsDoc = "../../docs/internals.md"

// packageRow is one row of the package table.
type packageRow struct {
	pkg   string
	layer string // as written
	line  int
}

// packageTable returns the rows of the table under "## Packages" in the
// markdown file at path: the first column (a package path in backquotes)
// and the second (its layer), skipping the header and separator rows.
func packageTable(t *testing.T, path string) []packageRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []packageRow
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = line == "## Packages"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("%s:%d: a row of the package table needs package, layer and job: %q", path, n, line)
		}
		first := strings.TrimSpace(cells[0])
		if first == "package" || strings.Trim(first, "-: ") == "" {
			continue // header, separator
		}
		pkg, ok := strings.CutPrefix(first, "`")
		pkg, ok2 := strings.CutSuffix(pkg, "`")
		if !ok || !ok2 || pkg == "" || strings.ContainsAny(pkg, "`, ") {
			t.Errorf("%s:%d: the first column must be one package path in backquotes, got %q", path, n, first)
			continue
		}
		rows = append(rows, packageRow{pkg: pkg, layer: strings.TrimSpace(cells[1]), line: n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no package table under \"## Packages\"", path)
	}
	return rows
}

// TestInternalsTable checks docs/internals.md's package table against the
// module: every package listed exactly once, nothing listed that is not a
// package, and each row's layer the one LayerOf gives.
func TestInternalsTable(t *testing.T) {
	pkgs := moduleImports(t)
	seen := map[string]int{} // package → line of its first row
	for _, r := range packageTable(t, internalsDoc) {
		if first, ok := seen[r.pkg]; ok {
			t.Errorf("%s:%d: %s is listed again (first at line %d)", internalsDoc, r.line, r.pkg, first)
			continue
		}
		seen[r.pkg] = r.line
		if _, ok := pkgs[r.pkg]; !ok {
			t.Errorf("%s:%d: %s is not a package of the module (go list)", internalsDoc, r.line, r.pkg)
			continue
		}
		want, ok := LayerOf(r.pkg)
		if !ok {
			continue // TestLayering reports a package without a layer
		}
		if got, err := strconv.Atoi(r.layer); err != nil || got != want {
			t.Errorf("%s:%d: %s is at layer %d (internal/layering.Layers), the table says %q", internalsDoc, r.line, r.pkg, want, r.layer)
		}
	}
	var missing []string
	for p := range pkgs {
		if _, ok := seen[p]; !ok {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("%s: package %s has no row in the package table (## Packages): add one with its layer and job", internalsDoc, p)
	}
}

func TestPackageTableParse(t *testing.T) {
	path := t.TempDir() + "/doc.md"
	doc := "# x\n\n## Packages\n\ntext\n\n| package | layer | job |\n| --- | --- | --- |\n" +
		"| `a/b` | 3 | does a thing |\n| `c` | 0 | plumbing |\n\n## Next\n\n| `d` | 1 | not in the table |\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := packageTable(t, path)
	var got []string
	for _, r := range rows {
		got = append(got, r.pkg+"@"+r.layer)
	}
	if want := "a/b@3 c@0"; strings.Join(got, " ") != want {
		t.Errorf("rows %q, want %q", got, want)
	}
}
