package wal

import (
	"errors"
	"fmt"
	"io/fs"

	"bighive/storage/vfs"
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
//
// With recycling (Options.RecycleFiles), up to that many of the files are
// not removed but renamed to temporary names and kept, to become later
// log files: they leave the log (Files and replay no longer see them) as
// deleted files do, and are returned with them.
func (l *Log) DeleteBefore(pos Position) ([]Position, error) {
	l.mu.Lock()
	cur, active := l.pos, l.activeTS
	l.mu.Unlock()
	if pos.Prefix != cur.Prefix || pos.FileTS > cur.FileTS {
		return nil, fmt.Errorf("%w: %s is not at or before the log's position %s", ErrBadPosition, pos, cur)
	}
	pos.FileTS = min(pos.FileTS, active)
	room := l.prep.room()
	if room <= 0 {
		return DeleteBefore(l.fs, l.opts.Root, pos)
	}
	files, err := Files(l.fs, l.opts.Root, pos.Prefix)
	if err != nil {
		return nil, err
	}
	var deleted []Position
	var kept []string
	var ferr error
	for _, p := range files {
		if p.FileTS >= pos.FileTS {
			break
		}
		path := FilePath(l.opts.Root, p)
		if len(kept) < room {
			tmp := l.prep.tempPath(recyclePrefix)
			err := l.fs.Rename(path, tmp)
			if err == nil {
				kept = append(kept, tmp)
				deleted = append(deleted, p)
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				deleted = append(deleted, p)
				continue
			}
			l.log.Warn("wal: keeping a retired file for reuse failed; removing it", "file", path, "err", err)
		}
		if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			ferr = fmt.Errorf("wal: delete %s: %w", path, err)
			break
		}
		deleted = append(deleted, p)
	}
	if len(deleted) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil && ferr == nil {
			ferr = fmt.Errorf("wal: sync dir %s: %w", l.dir, err)
		}
	}
	if ferr != nil {
		// The renames may not be durable: do not reuse those files.
		for _, tmp := range kept {
			l.fs.Remove(tmp)
		}
		return deleted, ferr
	}
	l.prep.keepFiles(kept)
	return deleted, nil
}
