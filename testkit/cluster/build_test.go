package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildInto builds the named commands of this checkout into dir.
func buildInto(t *testing.T, dir string, names ...string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, strings.Fields(cmdPackages(names))...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestModuleRoot: inside the checkout the harness builds (the default);
// outside any module it says why it cannot.
func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("inside the checkout: %v", err)
	}
	if name, err := moduleName(filepath.Join(root, "go.mod")); err != nil || name != modulePath {
		t.Fatalf("module at %s is %q (%v), want %q", root, name, err, modulePath)
	}
	t.Chdir(t.TempDir())
	if root, err := moduleRoot(); err == nil {
		t.Fatalf("outside any module: root %s, want an error", root)
	} else if !strings.Contains(err.Error(), "not inside the bighive module") {
		t.Fatalf("outside any module: %v", err)
	}
}

// TestLocateOrder checks where each binary comes from, with real files:
// BIGHIVE_BIN_DIR only; in the checkout a build; else beside the
// executable, then PATH; and that every missing binary is named.
func TestLocateOrder(t *testing.T) {
	names := []string{"master", "tserver", "frontend"}
	exe := func(dir string, names ...string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, beside, onPath, partial := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	exe(all, names...)
	exe(beside, "bighive", "master")
	exe(onPath, "tserver", "frontend", "master")
	exe(partial, "master")
	if err := os.WriteFile(filepath.Join(partial, "tserver"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	lookPath := func(name string) (string, error) {
		if p := filepath.Join(onPath, name); isExecutable(p) {
			return p, nil
		}
		return "", exec.ErrNotFound
	}
	noPath := func(string) (string, error) { return "", exec.ErrNotFound }
	inModule := func() (string, error) { return "/checkout", nil }
	outside := func() (string, error) {
		return "", errors.New("the working directory is not inside the bighive module")
	}
	built := func(root, name string) (string, error) { return root + "/built/" + name, nil }
	noBuild := func(root, name string) (string, error) {
		t.Errorf("built %s outside the checkout", name)
		return "", errors.New("no")
	}

	for _, tc := range []struct {
		name    string
		l       locator
		want    []string // paths, or nil for an error
		wantErr []string // substrings of the error
	}{
		{"bin dir overrides the checkout", locator{binDir: all, executable: beside + "/bighive", lookPath: lookPath, moduleRoot: inModule, build: noBuild},
			[]string{all + "/master", all + "/tserver", all + "/frontend"}, nil},
		{"bin dir missing some", locator{binDir: partial, lookPath: lookPath, moduleRoot: inModule, build: noBuild},
			nil, []string{"missing: tserver, frontend (not in BIGHIVE_BIN_DIR=" + partial + ")", "go build -o " + partial + " ./cmd/tserver ./cmd/frontend"}},
		{"checkout builds", locator{executable: beside + "/bighive", lookPath: lookPath, moduleRoot: inModule, build: built},
			[]string{"/checkout/built/master", "/checkout/built/tserver", "/checkout/built/frontend"}, nil},
		{"beside first, then PATH", locator{executable: beside + "/bighive", lookPath: lookPath, moduleRoot: outside, build: noBuild},
			[]string{beside + "/master", onPath + "/tserver", onPath + "/frontend"}, nil},
		{"nothing anywhere", locator{executable: beside + "/bighive", lookPath: noPath, moduleRoot: outside, build: noBuild},
			nil, []string{"missing: tserver, frontend (not beside " + beside + "/bighive, not on PATH; not built: the working directory is not inside the bighive module)", "set BIGHIVE_BIN_DIR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.l.locate(names)
			if tc.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			if !errors.Is(err, ErrBinaryNotFound) {
				t.Errorf("error %v does not wrap ErrBinaryNotFound", err)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestInstalledBinaries runs what a user without a checkout has: binaries
// built into a directory. A cluster starts from outside the module with
// BIGHIVE_BIN_DIR, and a `bighive` installed alone, outside the module and
// with no go command on PATH, fails saying which binaries are missing.
func TestInstalledBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster started from built binaries outside the module: runs without -short")
	}
	haveCmd(t, "tserver")
	bin := t.TempDir()
	buildInto(t, bin, "master", "tserver", "frontend", "bighive")

	t.Run("BIGHIVE_BIN_DIR outside the module", func(t *testing.T) {
		t.Setenv(BinDirEnv, bin)
		t.Chdir(t.TempDir())
		paths, err := Binaries("master", "tserver", "frontend")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if filepath.Dir(p) != bin {
				t.Fatalf("binary %s is not from %s", p, bin)
			}
		}
		c := New(t, Options{Masters: 1, TServers: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl, err := c.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.ListTables(ctx); err != nil {
			t.Fatal(err)
		}
	})

	alone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(bin, "bighive"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, "bighive"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	partial := t.TempDir()
	if err := os.Link(filepath.Join(bin, "master"), filepath.Join(partial, "master")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     []string
		wantErr []string
	}{
		{"installed alone", []string{"PATH=" + t.TempDir()},
			[]string{"missing: master, frontend, tserver (not beside " + filepath.Join(alone, "bighive") + ", not on PATH; not built: the go command is not installed)", "set " + BinDirEnv}},
		{"bin dir without tserver and frontend", []string{"PATH=" + t.TempDir(), BinDirEnv + "=" + partial},
			[]string{"missing: frontend, tserver (not in " + BinDirEnv + "=" + partial + ")"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(alone, "bighive"), "demo", "--rows", "10")
			cmd.Dir = t.TempDir()
			cmd.Env = append([]string{"HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}, tc.env...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("bighive demo: %v, want a failure exit\n%s", err, stderr.Bytes())
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("output does not say %q:\n%s", s, stderr.Bytes())
				}
			}
		})
	}
}
