package blockstore

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"bighive/storage/vfs"
)

// dirLock is the exclusive flock a read-write open holds on
// <dir>/block_manager.lock until Close. Files not backed by an OS
// descriptor (in-memory filesystems of tests) are not locked.
type dirLock struct {
	f    vfs.File
	path string
}

// lockDir takes the lock of dir, creating the lock file if needed
// (created says so). A held lock fails with ErrLocked naming the holder.
func lockDir(fsys vfs.FS, dir string) (l *dirLock, created bool, err error) {
	p := filepath.Join(dir, lockFile)
	exists, err := vfs.Exists(fsys, p)
	if err != nil {
		return nil, false, fmt.Errorf("blockstore: stat %s: %w", p, err)
	}
	f, err := fsys.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("blockstore: open %s: %w", p, err)
	}
	created = !exists
	fd := f.Fd()
	if fd == ^uintptr(0) {
		return &dirLock{f: f, path: p}, created, nil
	}
	if err := unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, created, fmt.Errorf("%w: %s is held by %s: another process has this store open read-write",
				ErrLocked, p, holder)
		}
		return nil, created, fmt.Errorf("blockstore: flock %s: %w", p, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		f.WriteAt(pid, 0) // informational only: no sync
	}
	return &dirLock{f: f, path: p}, created, nil
}

func (l *dirLock) release() error {
	if fd := l.f.Fd(); fd != ^uintptr(0) {
		unix.Flock(int(fd), unix.LOCK_UN)
	}
	return l.f.Close()
}

// lockHolder names the process holding the flock of f: from /proc/locks
// (matched by inode), else from the pid the holder wrote into the file.
func lockHolder(f vfs.File) string {
	var ino uint64
	if st, err := f.Stat(); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
	}
	if ino != 0 {
		if pid := flockHolderFromProc(ino); pid > 0 {
			return fmt.Sprintf("process %d", pid)
		}
	}
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); err == nil && pid > 0 {
		return fmt.Sprintf("process %d", pid)
	}
	return "an unknown process"
}

// flockHolderFromProc scans /proc/locks for a granted FLOCK on inode ino.
// Lines look like "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF";
// blocked waiters carry "->" after the index.
func flockHolderFromProc(ino uint64) int {
	pf, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer pf.Close()
	sc := bufio.NewScanner(pf)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		if got, err := strconv.ParseUint(parts[2], 10, 64); err != nil || got != ino {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			return pid
		}
	}
	return 0
}
