package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"bighive/tools/cli"
)

// TestHelpListsEachCommandOnce: `bighive help` lists every command, the
// CLI's and bighive's own (dev, demo, bench), each once, by name.
func TestHelpListsEachCommandOnce(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli.Run(context.Background(), []string{"help"}, &out, &errb, extra...); code != 0 {
		t.Fatalf("bighive help: exit %d, stderr %q", code, errb.String())
	}
	listed := map[string]int{}
	_, commands, ok := strings.Cut(out.String(), "\ncommands:\n")
	if !ok {
		t.Fatalf("bighive help has no commands: section:\n%s", out.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(commands), "\n") {
		listed[strings.Fields(line)[0]]++
	}
	want := map[string]bool{}
	for _, c := range append(cli.Commands(), extra...) {
		want[c.Name] = true
	}
	for name, n := range listed {
		if n != 1 || !want[name] {
			t.Errorf("bighive help lists %q %d times; want each command once", name, n)
		}
	}
	for name := range want {
		if listed[name] == 0 {
			t.Errorf("bighive help does not list %q", name)
		}
	}
	// 41 today: a list this short lost commands.
	if len(listed) < 40 {
		t.Errorf("bighive help lists %d commands; want the 41 there are:\n%s", len(listed), out.String())
	}
}

// TestInstalledName: `go install ./cmd/bighive` installs a binary named
// bighive (README's "Running a cluster by hand" says so).
func TestInstalledName(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Target}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if target := strings.TrimSpace(string(out)); filepath.Base(target) != "bighive" {
		t.Errorf("go install ./cmd/bighive installs %q; want a binary named bighive", target)
	}
}
