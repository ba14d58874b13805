package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestMkdirAllContradictedExist: mkdirAll retries only an EEXIST whose name
// this host cannot see (another host's mkdir of it still under way on a
// shared file system); an EEXIST of a file that is there stands, and a
// directory made already is no error.
func TestMkdirAllContradictedExist(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"EEXIST of a name not to be seen", &fs.PathError{Op: "mkdir", Path: filepath.Join(dir, "missing"), Err: syscall.EEXIST}, true},
		{"EEXIST of a file that is there", &fs.PathError{Op: "mkdir", Path: file, Err: syscall.EEXIST}, false},
		{"another error", &fs.PathError{Op: "mkdir", Path: filepath.Join(dir, "missing"), Err: syscall.EACCES}, false},
	} {
		if got := contradicted(tc.err); got != tc.want {
			t.Errorf("%s: contradicted = %v, want %v", tc.name, got, tc.want)
		}
	}
	if err := mkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Errorf("making a directory that is there: %v", err)
	}
	if err := mkdirAll(filepath.Join(file, "sub"), 0o755); err == nil || errors.Is(err, fs.ErrExist) && contradicted(err) {
		t.Errorf("a directory under a file: %v, want an error that is not retried", err)
	}
}
