package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

type osFile struct{ *os.File }

func (f *osFile) WriteV(bufs [][]byte, off int64) (int, error) {
	total := 0
	for len(bufs) > 0 {
		n, err := unix.Pwritev(int(f.File.Fd()), bufs, off)
		if n > 0 {
			total += n
			off += int64(n)
		}
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		// Drop the buffers written in full; trim a partial one.
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			} else {
				bufs[0] = bufs[0][n:]
				n = 0
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return total, nil
}

func (f *osFile) Datasync() error {
	if err := unix.Fdatasync(int(f.File.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

func (f *osFile) SyncRange(off, n int64) error {
	if err := unix.SyncFileRange(int(f.File.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
	}
	return nil
}

func (f *osFile) Preallocate(off, n int64) error {
	if err := unix.Fallocate(int(f.File.Fd()), 0, off, n); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

func (f *osFile) PunchHole(off, n int64) error {
	if err := unix.Fallocate(int(f.File.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
		return &os.PathError{Op: "punch hole", Path: f.Name(), Err: err}
	}
	return nil
}
