package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"bighive/storage/vfs"
)

// preparer keeps the next log file ready in the background and retires
// finished files, so that the flusher never waits for either. The next
// file is a kept retired file when there is one (recycled: its first page
// zeroed, synced), else a new one (pre-zeroed or fallocated, synced).
type preparer struct {
	fs    vfs.FS
	dir   string
	n     atomic.Int64 // names temporary files uniquely
	size  int64
	mode  Prealloc
	keep  int // most retired files kept for recycling
	log   *slog.Logger
	ready chan *preparedFile // at most one prepared file
	retq  chan *segment      // files to retire
	stop  chan struct{}
	done  chan struct{}

	mu       sync.Mutex
	pool     []string      // kept retired files (temporary names), oldest first
	poolKick chan struct{} // capacity 1: a file was kept
}

// preparedFile is a file ready to become the next log file.
type preparedFile struct {
	f        vfs.File
	recycled bool // a retired log file: stale frames follow what is written
}

const (
	// zeroChunk is the piece of a new file zero-filled and sent to the
	// disk at a time. Each piece's write-out queues in front of the log's
	// own syncs: with 1 MiB pieces the log's p99 Put latency was 6.6–8.1
	// ms under `bighive bench`, with 256 KiB 4.0–5.1 ms, and the Puts no
	// slower (docs/performance.md, "Issue 29, eleventh round").
	zeroChunk = 256 << 10
	// recycleZeroLen is the head of a recycled file zeroed before reuse:
	// more than any header, so that a crash before the new header is
	// durable leaves a file that reads as unused, not one whose stale
	// header names its previous life.
	recycleZeroLen = 4096
)

func newPreparer(fsys vfs.FS, dir string, size int64, mode Prealloc, keep int, log *slog.Logger) *preparer {
	return &preparer{
		fs: fsys, dir: dir, size: size, mode: mode, keep: keep, log: log,
		ready:    make(chan *preparedFile, 1),
		retq:     make(chan *segment, 16),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		poolKick: make(chan struct{}, 1),
	}
}

// tempPath is a new temporary name in the log's directory.
func (p *preparer) tempPath(prefix string) string {
	return filepath.Join(p.dir, fmt.Sprintf("%s%d%s", prefix, p.n.Add(1), vfs.TempSuffix))
}

// prepare creates a new file and fills it.
func (p *preparer) prepare(ctx context.Context) (*preparedFile, error) {
	path := p.tempPath(preparedPrefix)
	f, err := p.fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", path, err)
	}
	err = p.fill(ctx, f, 0, p.size)
	if err == nil {
		err = f.Datasync()
	}
	if err != nil {
		f.Close()
		p.fs.Remove(path)
		return nil, fmt.Errorf("wal: prepare %s: %w", path, err)
	}
	return &preparedFile{f: f}, nil
}

// zeroes is what fill and recycle write: read-only, shared by every
// preparation, so preparing a log file allocates no buffer.
var zeroes [zeroChunk]byte

// fill prepares [from, to) of f as the mode says.
func (p *preparer) fill(ctx context.Context, f vfs.File, from, to int64) error {
	var err error
	switch p.mode {
	case PreallocZero:
		for off := from; off < to && err == nil; off += zeroChunk {
			if err = ctx.Err(); err != nil {
				break
			}
			n := min(int64(zeroChunk), to-off)
			if _, err = f.WriteAt(zeroes[:n], off); err == nil {
				// Start write-out now so that the final fdatasync does
				// not flush the whole file at once next to the log's syncs.
				err = f.SyncRange(off, n)
			}
		}
	case PreallocFallocate:
		if to > from {
			err = f.Preallocate(from, to-from)
		}
	}
	return err
}

// recycle prepares the kept file at path for reuse: its first page
// zeroed (the old header), synced. Its old frames stay: the new header
// says the file is recycled, and replay tells them by their log number.
// It is not topped up: a kept file smaller than the file size (one that
// was created unprepared and grew) grows again past its end as it is
// written, and keeps that size for its next reuse, so sizes converge
// instead of every reuse zeroing again.
func (p *preparer) recycle(ctx context.Context, path string) (*preparedFile, error) {
	f, err := p.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", path, err)
	}
	if err = ctx.Err(); err == nil {
		_, err = f.WriteAt(zeroes[:recycleZeroLen], 0)
	}
	if err == nil {
		err = f.Datasync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: recycle %s: %w", path, err)
	}
	return &preparedFile{f: f, recycled: true}, nil
}

// next prepares the next file: a kept one if there is one, else a new one
// (nil with PreallocNone).
func (p *preparer) next(ctx context.Context) (*preparedFile, error) {
	for {
		path := p.takeKept()
		if path == "" {
			break
		}
		pf, err := p.recycle(ctx, path)
		if err == nil {
			return pf, nil
		}
		if ctx.Err() != nil {
			p.fs.Remove(path)
			return nil, ctx.Err()
		}
		p.log.Warn("wal: recycling a retired file failed; removing it", "file", path, "err", err)
		p.fs.Remove(path)
	}
	if p.mode == PreallocNone {
		return nil, nil
	}
	return p.prepare(ctx)
}

// room is how many more retired files the pool takes.
func (p *preparer) room() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keep - len(p.pool)
}

// keepFiles adds retired files (already renamed to temporary names, the
// renames durable) to the pool; files beyond its size are removed.
func (p *preparer) keepFiles(paths []string) {
	if len(paths) == 0 {
		return
	}
	p.mu.Lock()
	p.pool = append(p.pool, paths...)
	var extra []string
	if n := len(p.pool) - p.keep; n > 0 {
		extra = append(extra, p.pool[:n]...)
		p.pool = append(p.pool[:0], p.pool[n:]...)
	}
	p.mu.Unlock()
	for _, path := range extra {
		if err := p.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Warn("wal: remove a retired file", "file", path, "err", err)
		}
	}
	select {
	case p.poolKick <- struct{}{}:
	default:
	}
}

// takeKept removes the newest kept file from the pool and returns its
// path, or "" when the pool is empty.
func (p *preparer) takeKept() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.pool)
	if n == 0 {
		return ""
	}
	path := p.pool[n-1]
	p.pool = p.pool[:n-1]
	return path
}

// run prepares files until close. With PreallocNone and no kept file it
// only retires.
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
		pf, err := p.next(ctx)
		if err != nil {
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
		readyq := p.ready
		if pf == nil {
			readyq = nil
		}
		for sent := false; !sent; {
			select {
			case readyq <- pf:
				sent = true
			case s := <-p.retq:
				p.retireLogged(s)
			case <-p.poolKick:
				// A file was kept: with nothing prepared, go recycle it;
				// else it waits in the pool for the next round.
				sent = pf == nil
			case <-p.stop:
				if pf != nil {
					p.discard(pf)
				}
				p.drain()
				return
			}
		}
	}
}

// take returns the prepared file, or nil when it is not ready yet.
func (p *preparer) take() *preparedFile {
	select {
	case f := <-p.ready:
		return f
	default:
		return nil
	}
}

// discard closes and removes a prepared file that will not be used.
func (p *preparer) discard(pf *preparedFile) {
	pf.f.Close()
	if err := p.fs.Remove(pf.f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
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

// retireLogged retires s. With recycling it keeps the file's full size:
// a file rolled long before it was full (a checkpoint rolls the log) then
// needs no zeroing when it is reused; the cost is that replay reads the
// unused space of the files left.
func (p *preparer) retireLogged(s *segment) {
	p.mu.Lock()
	truncate := p.keep == 0
	p.mu.Unlock()
	if err := retire(s, truncate); err != nil {
		p.log.Warn("wal: retiring a finished file failed (it replays the same)", "err", err)
	}
}

func (p *preparer) drain() {
	for {
		select {
		case s := <-p.retq:
			p.retireLogged(s)
		case pf := <-p.ready:
			p.discard(pf)
		default:
			return
		}
	}
}

// close stops the background work, retiring what is queued and removing
// the prepared file and the kept ones.
func (p *preparer) close() error {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	pool := p.pool
	p.pool, p.keep = nil, 0
	p.mu.Unlock()
	for _, path := range pool {
		if err := p.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Warn("wal: remove a retired file", "file", path, "err", err)
		}
	}
	return nil
}
