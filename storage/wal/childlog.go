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

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// A single-file log in this package's format, for child logs
// (<root>/splitlog/<tablet-id>.log, docs/design.md 'Split'): the same file
// header (Version) and the same record frames, so ReplayFile reads it
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
//
// A crash can damage only what was written after the last completed sync.
// Appenders keep that unsynced tail within ChildLogMaxFlush bytes, or one
// larger record alone: a record that would push it past the window waits
// until the syncs in flight have made room. So the header's MaxFlush is a
// true bound, and replay tells a torn tail from corruption with the same
// window rule as for a tserver's log (a single-file log is the newest and
// only file of its owner).

// ChildLogMaxFlush is the torn-tail window written into a single-file
// log's header: the most bytes written and not yet synced at any time
// (or one larger record).
const ChildLogMaxFlush = 1 << 20

// ErrSingleClosed is returned by Append after Close or Remove.
var ErrSingleClosed = errors.New("wal: single-file log closed")

// SingleFile is one single-file log open for appending. Its methods are
// safe for concurrent use.
type SingleFile struct {
	fsys   vfs.FS
	path   string
	frames frameFmt // version 2, the header's FileTS as log number

	mu     sync.Mutex // guards the fields below and orders writes
	f      vfs.File
	off    int64
	seq    uint64
	closed bool
	err    error
	// durable is the offset synced so far, as the writers see it; room is
	// closed and replaced whenever durable grows or the file fails or
	// closes, to wake appenders waiting for the window.
	durable int64
	room    chan struct{}

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
	h := fileHeader{Prefix: owner, FileTS: time.Now().UnixMicro(), FirstSeq: 1, MaxFlush: ChildLogMaxFlush}
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
	return &SingleFile{fsys: fsys, path: path, f: f, off: int64(len(buf)), frames: framesV2(h.FileTS),
		seq: 1, synced: int64(len(buf)), durable: int64(len(buf)), room: make(chan struct{})}, nil
}

// Path is the file's path.
func (s *SingleFile) Path() string { return s.path }

// Append writes one record (tablet id, row mutation, the wall time) and
// returns once it is durable (fdatasync returned), together with every
// record appended before it. After an I/O error every later Append fails
// with an error wrapping ErrFailed.
//
// The context only bounds the wait before the record is written: if ctx
// is done when Append is called, or ends while Append waits for room in
// the unsynced window, Append returns ctx.Err() and the record is never
// written. Once it is written, Append waits for its sync whatever ctx
// does: nil means durable, an error wrapping ErrFailed means its fate is
// unknown (it may replay).
func (s *SingleFile) Append(ctx context.Context, tabletID string, m *mutation.RowMutation) error {
	return s.AppendBatch(ctx, tabletID, []*mutation.RowMutation{m})[0]
}

// AppendBatch is Append for several records of one owner: each is
// written in order, then one sync covers them all. errs[i] is the outcome
// of ms[i], with Append's meaning; once one record fails (ctx ended
// before it was written, or the file failed or closed) the ones after it
// fail with it and are not written.
func (s *SingleFile) AppendBatch(ctx context.Context, tabletID string, ms []*mutation.RowMutation) (errs []error) {
	errs = make([]error, len(ms))
	written := 0
	var end int64
	ts := time.Now().UnixMicro()
	var frame []byte
	for i, m := range ms {
		if recordSize(tabletID, m)-frameHeaderLen > MaxRecordBytes {
			errs[i] = fmt.Errorf("%w: record of row %q", ErrRecordTooLarge, m.Row)
			continue
		}
		err := ctx.Err()
		if err == nil {
			var partial uint32
			frame, partial = encodeFrame(frame[:0], frameHeaderLen, ts, tabletID, m)
			s.mu.Lock()
			var e int64
			e, err = s.writeLocked(ctx, frame, partial, written > 0)
			s.mu.Unlock()
			if errors.Is(err, errWindowFull) {
				// Our own unsynced records fill the window: nobody else
				// will sync them, so sync before waiting for room.
				if err = s.syncTo(end); err == nil {
					s.mu.Lock()
					e, err = s.writeLocked(ctx, frame, partial, false)
					s.mu.Unlock()
				}
			}
			if err == nil {
				end, written = e, i+1
				continue
			}
		}
		for j := i; j < len(ms); j++ {
			errs[j] = err
		}
		break
	}
	if written > 0 {
		if err := s.syncTo(end); err != nil {
			for i := 0; i < written; i++ {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// errWindowFull: writeLocked was told not to wait for room.
var errWindowFull = errors.New("wal: single-file log window full")

// writeLocked writes one encoded record at the end of the file, waiting
// (until ctx ends) for room in the unsynced window, or failing with
// errWindowFull if noWait, and returns the end offset the appender must
// sync to. s.mu is held (released while waiting).
func (s *SingleFile) writeLocked(ctx context.Context, frame []byte, partial uint32, noWait bool) (int64, error) {
	n := int64(len(frame) + 8)
	for {
		if s.closed {
			return 0, ErrSingleClosed
		}
		if s.err != nil {
			return 0, s.err
		}
		if s.off == s.durable || s.off-s.durable+n <= ChildLogMaxFlush {
			break
		}
		if noWait {
			return 0, errWindowFull
		}
		// The window is full: wait for the syncs in flight (every record
		// written has an appender in syncTo, or one of AppendBatch that
		// syncs before it waits) to make room.
		ch := s.room
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			s.mu.Lock()
			return 0, ctx.Err()
		}
		s.mu.Lock()
	}
	buf := sealFrame(nil, frame, partial, s.seq, s.frames)
	if _, err := s.f.WriteAt(buf, s.off); err != nil {
		s.failLocked(fmt.Errorf("%w: write %s: %w", ErrFailed, s.path, err))
		return 0, s.err
	}
	s.seq++
	s.off += int64(len(buf))
	return s.off, nil
}

// failLocked sets the sticky error and wakes the appenders waiting for
// room. s.mu is held.
func (s *SingleFile) failLocked(err error) {
	if s.err == nil {
		s.err = err
		close(s.room)
		s.room = make(chan struct{})
	}
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
		s.failLocked(fmt.Errorf("%w: fdatasync %s: %w", ErrFailed, s.path, err))
		err = s.err
		s.mu.Unlock()
		return err
	}
	s.synced = upTo
	s.mu.Lock()
	s.durable = upTo
	close(s.room)
	s.room = make(chan struct{})
	s.mu.Unlock()
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
	close(s.room) // wake appenders waiting for room; they see closed
	s.room = make(chan struct{})
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
