package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestMkdirAllContradictedExist: mkdirAll retries only an EEXIST that does
// not stand: after a wait when this host cannot see the name (another
// host's mkdir of it still under way on a shared file system), at once
// when the name is a directory by now (os.MkdirAll's own lookup came a
// moment too early); an EEXIST of a file that is there stands, and a
// directory made already is no error.
func TestMkdirAllContradictedExist(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		err         error
		retry, wait bool
	}{
		{"no error", nil, false, false},
		{"EEXIST of a name not to be seen", &fs.PathError{Op: "mkdir", Path: filepath.Join(dir, "missing"), Err: syscall.EEXIST}, true, true},
		{"EEXIST of a directory there by now", &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.EEXIST}, true, false},
		{"EEXIST of a file that is there", &fs.PathError{Op: "mkdir", Path: file, Err: syscall.EEXIST}, false, false},
		{"another error", &fs.PathError{Op: "mkdir", Path: filepath.Join(dir, "missing"), Err: syscall.EACCES}, false, false},
	} {
		if retry, wait := contradicted(tc.err); retry != tc.retry || wait != tc.wait {
			t.Errorf("%s: contradicted = %v, %v, want %v, %v", tc.name, retry, wait, tc.retry, tc.wait)
		}
	}
	if err := mkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Errorf("making a directory that is there: %v", err)
	}
	err := mkdirAll(filepath.Join(file, "sub"), 0o755)
	if retry, _ := contradicted(err); err == nil || retry {
		t.Errorf("a directory under a file: %v, want an error that is not retried", err)
	}
}
