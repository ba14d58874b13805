package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"bighive/internal/vfs"
)

// preparer keeps the next log file ready in the background (pre-zeroed or
// fallocated, synced) and retires finished files, so that the flusher
// never waits for either.
type preparer struct {
	fs    vfs.FS
	dir   string
	n     int // names prepared files uniquely: the flusher renames one while the next is made
	size  int64
	mode  Prealloc
	log   *slog.Logger
	ready chan vfs.File // at most one prepared file
	retq  chan *segment // files to retire
	stop  chan struct{}
	done  chan struct{}
}

const zeroChunk = 1 << 20

func newPreparer(fsys vfs.FS, dir string, size int64, mode Prealloc, log *slog.Logger) *preparer {
	return &preparer{
		fs: fsys, dir: dir, size: size, mode: mode, log: log,
		ready: make(chan vfs.File, 1),
		retq:  make(chan *segment, 16),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// prepare creates the prepared file and fills it.
func (p *preparer) prepare(ctx context.Context) (vfs.File, error) {
	p.n++
	path := filepath.Join(p.dir, fmt.Sprintf("%s%d%s", preparedPrefix, p.n, vfs.TempSuffix))
	f, err := p.fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", path, err)
	}
	switch p.mode {
	case PreallocZero:
		zero := make([]byte, zeroChunk)
		for off := int64(0); off < p.size && err == nil; off += zeroChunk {
			if err = ctx.Err(); err != nil {
				break
			}
			n := min(int64(zeroChunk), p.size-off)
			if _, err = f.WriteAt(zero[:n], off); err == nil {
				// Start write-out now so that the final fdatasync does
				// not flush the whole file at once next to the log's syncs.
				err = f.SyncRange(off, n)
			}
		}
	case PreallocFallocate:
		err = f.Preallocate(0, p.size)
	}
	if err == nil {
		err = f.Datasync()
	}
	if err != nil {
		f.Close()
		p.fs.Remove(path)
		return nil, fmt.Errorf("wal: prepare %s: %w", path, err)
	}
	return f, nil
}

// run prepares files until close. With PreallocNone it only retires.
func (p *preparer) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var f vfs.File
		if p.mode != PreallocNone {
			var err error
			if f, err = p.prepare(ctx); err != nil {
				if ctx.Err() != nil {
					p.drain()
					return
				}
				p.log.Error("wal: preparing next file failed; the next roll creates it unprepared", "err", err)
				select {
				case <-time.After(time.Second):
				case <-p.stop:
					p.drain()
					return
				}
				continue
			}
		}
		readyq := p.ready
		if f == nil {
			readyq = nil
		}
		for sent := false; !sent; {
			select {
			case readyq <- f:
				sent = true
			case s := <-p.retq:
				p.retireLogged(s)
			case <-p.stop:
				if f != nil {
					p.discard(f)
				}
				p.drain()
				return
			}
		}
	}
}

// take returns the prepared file, or nil when it is not ready yet.
func (p *preparer) take() vfs.File {
	select {
	case f := <-p.ready:
		return f
	default:
		return nil
	}
}

// discard closes and removes a prepared file that will not be used.
func (p *preparer) discard(f vfs.File) {
	f.Close()
	if err := p.fs.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Warn("wal: remove prepared file", "err", err)
	}
}

// retire hands a finished file to the background; when the queue is full it
// retires inline.
func (p *preparer) retire(s *segment) {
	select {
	case p.retq <- s:
	default:
		p.retireLogged(s)
	}
}

func (p *preparer) retireLogged(s *segment) {
	if err := retire(s); err != nil {
		p.log.Warn("wal: retiring a finished file failed (it replays the same)", "err", err)
	}
}

func (p *preparer) drain() {
	for {
		select {
		case s := <-p.retq:
			p.retireLogged(s)
		case f := <-p.ready:
			p.discard(f)
		default:
			return
		}
	}
}

// close stops the background work, retiring what is queued and removing
// the prepared file.
func (p *preparer) close() error {
	close(p.stop)
	<-p.done
	return nil
}
