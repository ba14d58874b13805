package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"bighive/tools/cli"
)

// TestEveryCommandHelp: `bighive COMMAND --help` exits 0 and prints the
// command's synopsis, its flags and at least one example of the command.
func TestEveryCommandHelp(t *testing.T) {
	for _, cmd := range cli.Commands() {
		t.Run(cmd.Name, func(t *testing.T) {
			if strings.TrimSpace(cmd.Example) == "" {
				t.Fatalf("command %q has no example", cmd.Name)
			}
			var out, errb bytes.Buffer
			code := cli.Run(context.Background(), []string{cmd.Name, "--help"}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			s := out.String()
			for _, want := range []string{"usage: bighive " + cmd.Name, "flags:", "-masters", "example:\n  bighive " + cmd.Name} {
				if !strings.Contains(s, want) {
					t.Errorf("help lacks %q:\n%s", want, s)
				}
			}
		})
	}
}

// TestCommandNamesUnique: no two built-in commands share a name (Run keys
// them by name, so one would hide the other, in `bighive help` too).
func TestCommandNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, cmd := range cli.Commands() {
		if seen[cmd.Name] {
			t.Errorf("two commands are named %q", cmd.Name)
		}
		seen[cmd.Name] = true
	}
}
