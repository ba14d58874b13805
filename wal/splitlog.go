package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"bighive/internal/mutation"
	"bighive/internal/vfs"
)

// A single-file log in this package's format, for split logs
// (<root>/splitlog/<tablet-id>.log, DESIGN.md 'Split'): the same file
// header (version 1) and the same record frames, so ReplayFile reads it
// and tells a torn tail from corruption exactly as for a tserver's log.
// The header's prefix is the file's owner tag (the child tablet id), its
// FileTS the creation time, FirstSeq 1.
//
// Appends are group-committed: a record is written under the writer's
// lock at the end of the file, then the appender waits for an fdatasync
// that started after its write; one sync covers every record written
// before it started. The file is created, synced, and its directory
// synced before CreateSingle returns, so a record acknowledged later is
// never in a file whose name a crash can lose.

// SplitLogMaxFlush is the torn-tail window written into a single-file
// log's header: the unsynced tail can hold the records of every appender
// waiting for the same sync, so the window is wide (a crash can damage
// only bytes written after the last completed sync).
const SplitLogMaxFlush = 256 << 20

// ErrSingleClosed is returned by Append after Close or Remove.
var ErrSingleClosed = errors.New("wal: single-file log closed")

// SingleFile is one single-file log open for appending. Its methods are
// safe for concurrent use.
type SingleFile struct {
	fsys vfs.FS
	path string

	mu     sync.Mutex // guards the fields below and orders writes
	f      vfs.File
	off    int64
	seq    uint64
	closed bool
	err    error

	syncMu sync.Mutex // one fdatasync at a time
	synced int64      // guarded by syncMu: offset durable so far
}

// CreateSingle creates the single-file log at path (which must not exist)
// with owner as the header's prefix, and makes its header and its
// directory entry durable.
func CreateSingle(fsys vfs.FS, path, owner string) (*SingleFile, error) {
	if owner == "" || len(owner) > maxPrefixLen {
		return nil, fmt.Errorf("%w: single-file log owner %q", ErrBadOptions, owner)
	}
	dir := filepath.Dir(path)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: mkdir %s: %w", dir, err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", path, err)
	}
	h := fileHeader{Prefix: owner, FileTS: time.Now().UnixMicro(), FirstSeq: 1, MaxFlush: SplitLogMaxFlush}
	buf := h.appendTo(nil)
	if _, err := f.WriteAt(buf, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		fsys.Remove(path)
		return nil, fmt.Errorf("wal: create %s: %w", path, err)
	}
	return &SingleFile{fsys: fsys, path: path, f: f, off: int64(len(buf)),
		seq: 1, synced: int64(len(buf))}, nil
}

// Path is the file's path.
func (s *SingleFile) Path() string { return s.path }

// Append writes one record (tablet id, row mutation, the wall time) and
// returns once it is durable (fdatasync returned), together with every
// record appended before it. After an I/O error every later Append fails.
func (s *SingleFile) Append(ctx context.Context, tabletID string, m *mutation.RowMutation) error {
	if recordSize(tabletID, m)-frameHeaderLen > MaxRecordBytes {
		return fmt.Errorf("%w: record of row %q", ErrRecordTooLarge, m.Row)
	}
	frame, partial := encodeFrame(nil, time.Now().UnixMicro(), tabletID, m)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSingleClosed
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	buf := sealFrame(nil, frame, partial, s.seq)
	if _, err := s.f.WriteAt(buf, s.off); err != nil {
		s.err = fmt.Errorf("%w: write %s: %w", ErrFailed, s.path, err)
		s.mu.Unlock()
		return s.err
	}
	s.seq++
	s.off += int64(len(buf))
	end := s.off
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.syncTo(end)
}

// syncTo returns once the file is durable up to end.
func (s *SingleFile) syncTo(end int64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced >= end {
		return nil
	}
	s.mu.Lock()
	upTo, f, err := s.off, s.f, s.err
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if f == nil {
		return ErrSingleClosed
	}
	if err := f.Datasync(); err != nil {
		s.mu.Lock()
		s.err = fmt.Errorf("%w: fdatasync %s: %w", ErrFailed, s.path, err)
		err = s.err
		s.mu.Unlock()
		return err
	}
	s.synced = upTo
	return nil
}

// Close closes the file; what Append acknowledged stays durable.
func (s *SingleFile) Close() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.f.Close()
	s.f = nil
	return err
}

// Remove closes and deletes the file (its directory entry removal is
// synced too).
func (s *SingleFile) Remove() error {
	cerr := s.Close()
	if err := s.fsys.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Join(cerr, fmt.Errorf("wal: remove %s: %w", s.path, err))
	}
	return errors.Join(cerr, s.fsys.SyncDir(filepath.Dir(s.path)))
}
