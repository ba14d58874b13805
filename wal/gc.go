package wal

import (
	"errors"
	"fmt"
	"io/fs"

	"bighive/internal/vfs"
)

// DeleteBefore deletes the log files of pos.Prefix that lie wholly before
// pos: those with a timestamp below pos.FileTS. The file pos names, and
// every later one, is never deleted. pos must be the oldest position any
// tablet still names for the prefix (invariant 9 in docs/design.md,
// 'nothing named is deleted'); the caller
// learns it from the master. It returns the deleted positions; the
// deletions are durable when it returns nil.
func DeleteBefore(fsys vfs.FS, root string, pos Position) ([]Position, error) {
	files, err := Files(fsys, root, pos.Prefix)
	if err != nil {
		return nil, err
	}
	var deleted []Position
	for _, p := range files {
		if p.FileTS >= pos.FileTS {
			break
		}
		if err := fsys.Remove(FilePath(root, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return deleted, fmt.Errorf("wal: delete %s: %w", FilePath(root, p), err)
		}
		deleted = append(deleted, p)
	}
	if len(deleted) > 0 {
		if err := fsys.SyncDir(PrefixDir(root, pos.Prefix)); err != nil {
			return deleted, fmt.Errorf("wal: sync dir %s: %w", PrefixDir(root, pos.Prefix), err)
		}
	}
	return deleted, nil
}

// DeleteBefore deletes this log's files that lie wholly before pos, as the
// package function does, but never the file the flusher still writes (a
// position just returned by Roll may name a file not started yet). It
// refuses a position of another prefix or one later than Position(). A
// live tserver deletes its own files only through this method.
func (l *Log) DeleteBefore(pos Position) ([]Position, error) {
	l.mu.Lock()
	cur, active := l.pos, l.activeTS
	l.mu.Unlock()
	if pos.Prefix != cur.Prefix || pos.FileTS > cur.FileTS {
		return nil, fmt.Errorf("%w: %s is not at or before the log's position %s", ErrBadPosition, pos, cur)
	}
	pos.FileTS = min(pos.FileTS, active)
	return DeleteBefore(l.fs, l.opts.Root, pos)
}
