package faultfile

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func TestAct(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		missing       bool
		step          int
		want          action
		removed       bool
	}{
		{name: "missing file", missing: true, step: 1, want: none},
		{name: "other step", content: "3", step: 2, want: none},
		{name: "garbage", content: "three", step: 3, want: none},
		{name: "kill", content: "3\n", step: 3, want: kill, removed: true},
		{name: "pause", content: "pause:5", step: 5, want: pause, removed: true},
		{name: "pause other step", content: "pause:5", step: 4, want: none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fault")
			if !tc.missing {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := act(path, tc.step); got != tc.want {
				t.Fatalf("act = %d, want %d", got, tc.want)
			}
			_, err := os.Stat(path)
			if gone := os.IsNotExist(err); gone != (tc.removed || tc.missing) {
				t.Fatalf("file removed %v, want %v", gone, tc.removed || tc.missing)
			}
			if tc.removed && act(path, tc.step) != none {
				t.Fatal("a step fired twice")
			}
		})
	}
}

func TestHookWithoutFile(t *testing.T) {
	if Hook[int]("", "merge", slog.Default()) != nil {
		t.Fatal("an empty path gave a hook")
	}
	h := Hook[int](filepath.Join(t.TempDir(), "none"), "merge", slog.Default())
	if err := h(1); err != nil {
		t.Fatal(err)
	}
}
