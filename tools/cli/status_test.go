package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"bighive/tools/cli"
)

// TestHelpCommand: `bighive help CMD` prints the command's full help
// (what `bighive CMD --help` prints); an unknown command is a usage error.
func TestHelpCommand(t *testing.T) {
	for _, name := range []string{"put", "status", "version"} {
		var help, direct, errb bytes.Buffer
		if code := cli.Run(context.Background(), []string{"help", name}, &help, &errb); code != 0 {
			t.Fatalf("help %s: exit %d, %s", name, code, errb.String())
		}
		cli.Run(context.Background(), []string{name, "--help"}, &direct, &errb)
		if help.String() != direct.String() || !strings.Contains(help.String(), "example:\n  bighive "+name) {
			t.Errorf("help %s printed:\n%s\nwant:\n%s", name, help.String(), direct.String())
		}
	}
	var out, errb bytes.Buffer
	if code := cli.Run(context.Background(), []string{"help", "nonesuch"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "nonesuch"`) {
		t.Errorf("help nonesuch: exit %d, stderr %q", code, errb.String())
	}
}

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := cli.Run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errb.String())
		}
		if s := out.String(); !strings.HasPrefix(s, "bighive ") || !strings.Contains(s, "go1.") {
			t.Errorf("%v printed %q", args, s)
		}
	}
	var out, errb bytes.Buffer
	if code := cli.Run(context.Background(), []string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("version --json: exit %d, %s", code, errb.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || !strings.HasPrefix(v["go"].(string), "go1.") || v["module"] == nil {
		t.Errorf("version --json printed %q: %v", out.String(), err)
	}
}
