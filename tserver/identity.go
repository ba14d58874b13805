package tserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"bighive/storage/vfs"
	"bighive/storage/wal"
)

// Shared-root layout (docs/design.md 'Storage layout') beyond wal/ and splitlog/:
//
//	<root>/tservers/<prefix>         the UUID of the tserver at that address
//	<root>/blocks/<uuid>/            its block store's default data dir
//	<root>/blocks/<uuid>.dirs        its data dirs, one per line, so any
//	                                 tserver can open the store read-only
const (
	tserversDir = "tservers"
	blocksDir   = "blocks"
	dirsSuffix  = ".dirs"
)

// identity loads the UUID of the tserver with this WAL prefix from the
// shared root, or makes and records a new one. A tserver restarted at the
// same address keeps its UUID, its block store and its log prefix.
func identity(fsys vfs.FS, root, prefix string) (string, error) {
	dir := filepath.Join(root, tserversDir)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tserver: %w", err)
	}
	path := filepath.Join(dir, prefix)
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !validUUID(id) {
			return "", fmt.Errorf("tserver: %s holds %q, not a UUID; remove it to start afresh", path, id)
		}
		return id, nil
	case errors.Is(err, fs.ErrNotExist):
		id := newUUID()
		if err := vfs.WriteFileAtomic(fsys, path, []byte(id+"\n")); err != nil {
			return "", fmt.Errorf("tserver: record identity: %w", err)
		}
		return id, nil
	default:
		return "", fmt.Errorf("tserver: read identity: %w", err)
	}
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// storeDirs returns the data dirs of the block store with this UUID: the
// ones recorded in <root>/blocks/<uuid>.dirs, else the default one.
func storeDirs(fsys vfs.FS, root, uuid string) ([]string, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(root, blocksDir, uuid+dirsSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{filepath.Join(root, blocksDir, uuid)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tserver: block store %s: %w", uuid, err)
	}
	var dirs []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			dirs = append(dirs, l)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("tserver: %s lists no directories", filepath.Join(root, blocksDir, uuid+dirsSuffix))
	}
	return dirs, nil
}

// recordStoreDirs records this tserver's data dirs for other tservers.
func recordStoreDirs(fsys vfs.FS, root, uuid string, dirs []string) error {
	if err := fsys.MkdirAll(filepath.Join(root, blocksDir), 0o755); err != nil {
		return fmt.Errorf("tserver: %w", err)
	}
	abs := make([]string, len(dirs))
	for i, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			return fmt.Errorf("tserver: data dir %s: %w", d, err)
		}
		abs[i] = a
	}
	return vfs.WriteFileAtomic(fsys, filepath.Join(root, blocksDir, uuid+dirsSuffix), []byte(strings.Join(abs, "\n")+"\n"))
}

// walPrefix is the file-name-safe WAL prefix of a tserver address.
func walPrefix(addr string) string { return wal.FormatPrefix(addr) }
