package blockstore

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStaleHandleIsNoDiskFailure: the default disk-failure rule takes the
// errors of a dead or read-only disk, wrapped or not, and not ESTALE,
// which on a shared file system means another host replaced a file this
// one had open, nor an ordinary error.
func TestStaleHandleIsNoDiskFailure(t *testing.T) {
	var o Options
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{unix.EIO, true},
		{fmt.Errorf("read container: %w", &fs.PathError{Op: "read", Path: "/d/c.data", Err: unix.EIO}), true},
		{unix.ENODEV, true},
		{unix.ENXIO, true},
		{unix.EROFS, true},
		{unix.EUCLEAN, true},
		{unix.ESTALE, false},
		{fmt.Errorf("open container: %w", &fs.PathError{Op: "open", Path: "/d/c.metadata", Err: unix.ESTALE}), false},
		{fs.ErrNotExist, false},
		{errors.New("checksum mismatch"), false},
		{nil, false},
	} {
		if got := o.isDiskFailure(tc.err); got != tc.want {
			t.Errorf("isDiskFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
