package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"bighive/storage/vfs"
)

// flushLoop is the one flusher goroutine. It takes batches in order, so a
// record is durable only after every record of lower sequence number.
// Before it takes a small batch right after releasing a large one, it
// waits a little for the released appenders (awaitCohort).
func (l *Log) flushLoop() {
	defer close(l.flDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lastSync time.Duration
	for {
		l.mu.Lock()
		if want := l.cohortWantLocked(); want > 0 {
			l.awaitCohort(want, timer, min(max(lastSync, cohortWaitMin), cohortWaitMax))
		}
		b := l.takeLocked()
		closed := l.closed
		l.mu.Unlock()
		if b == nil {
			if closed {
				return
			}
			<-l.kick
			continue
		}
		var prepared *preparedFile
		if b.newFileTS != 0 {
			prepared = l.prep.take()
		}
		start := time.Now()
		l.writeBatch(b, prepared)
		lastSync = time.Since(start)
		if b.records > 1 {
			// Let the appenders just released run before the next take,
			// so that they join the next batch instead of forming a
			// third cohort behind it: batches at 16-64 appenders grow
			// from about n/2 to about 3n/4 records (docs/internals.md, "Write-ahead log"). A
			// yield: a lone appender never pays it.
			runtime.Gosched()
		}
		l.mu.Lock()
		if cap(b.buf) <= 2*l.opts.MaxBatchBytes && len(l.free) < maxQueued+2 {
			l.free = append(l.free, b.buf[:0])
		}
		b.buf = nil
		l.cohort = b.appenders
		l.mu.Unlock()
	}
}

// minCohort is the smallest number of released appenders the flusher
// waits for (see awaitCohort).
const minCohort = 4

// The flusher waits for a cohort about as long as its last write and
// sync took, within these bounds. Variables, so that a test can make the
// wait last until the cohort is back.
var (
	cohortWaitMin = 50 * time.Microsecond
	cohortWaitMax = 2 * time.Millisecond
)

// cohortWantLocked returns the number of appenders the flusher should
// wait for in the open batch before it takes it, or 0 to take it now:
// half the appenders its last batch released, when that was at least
// minCohort, and nothing else asks for a write (a full batch, a roll,
// Close).
func (l *Log) cohortWantLocked() int {
	if l.closed || l.cohort < minCohort || len(l.queue) > 0 || l.cur.newFileTS != 0 || l.cur.records == 0 {
		return 0
	}
	if want := l.cohort / 2; l.cur.appenders < want {
		return want
	}
	return 0
}

// awaitCohort waits, with l.mu held and released meanwhile, until the open
// batch has want appenders or bound passed; any kick ends it (an appender
// reaching want, a full batch, a roll, Close). Without it, an appender
// that arrives just after a large batch was released is written alone:
// its fdatasync holds the flusher while the released appenders come back,
// and at 64 callers a third of the batches held one record. The bound
// keeps the cost for a load that stopped to one wait: if the cohort is not
// back by then it is forgotten, and the next wait follows a large batch
// again. Go's timers may fire up to 1 ms late when the process is idle.
func (l *Log) awaitCohort(want int, timer *time.Timer, bound time.Duration) {
	l.want = want
	select { // a kick from before the wait must not end it
	case <-l.kick:
	default:
	}
	l.mu.Unlock()
	timer.Reset(bound)
	select {
	case <-l.kick:
	case <-timer.C:
	}
	timer.Stop()
	l.mu.Lock()
	l.want = 0
	expired := l.cur.appenders < want
	if expired {
		l.cohort = 0
	}
	l.stats.wait(expired)
}

// takeLocked returns the next batch to write, or nil when there is none.
func (l *Log) takeLocked() *batch {
	var b *batch
	switch {
	case len(l.queue) > 0:
		b = l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
	case l.cur.records > 0 || l.cur.newFileTS != 0:
		b = l.cur
		l.cur = l.newBatch()
	default:
		return nil
	}
	if !l.closed {
		close(l.space)
		l.space = make(chan struct{})
	}
	return b
}

// writeBatch writes b (starting its new file first, if it names one) with
// one write and one fdatasync, then completes it. prepared is a prepared
// file for a new file, or nil.
func (l *Log) writeBatch(b *batch, prepared *preparedFile) {
	err := l.flErr
	if err == nil && b.newFileTS != 0 {
		err = l.activate(b.newFileTS, b.firstSeq, prepared)
	} else if prepared != nil {
		l.prep.discard(prepared)
	}
	if err == nil && b.records > 0 && b.logNum != l.seg.ts {
		// Cannot happen: records carry the log number of the file that
		// was current when they were sealed.
		err = fmt.Errorf("wal: batch of log number %d for file %s", b.logNum, l.seg.path)
	}
	var wrote int
	if err == nil {
		s := l.seg
		bufs := make([][]byte, 0, 2)
		if s.header != nil {
			bufs = append(bufs, s.header)
		}
		if len(b.buf) > 0 {
			bufs = append(bufs, b.buf)
		}
		if len(bufs) > 0 {
			wrote, err = s.f.WriteV(bufs, s.off)
			s.off += int64(wrote)
			if err != nil {
				err = fmt.Errorf("wal: write %s: %w", s.path, err)
			}
		}
		if err == nil {
			start := time.Now()
			if err = s.f.Datasync(); err != nil {
				err = fmt.Errorf("wal: fdatasync %s: %w", s.path, err)
			}
			l.stats.sync(time.Since(start))
		}
		if err == nil && s.dirSync {
			if err = l.fs.SyncDir(l.dir); err != nil {
				err = fmt.Errorf("wal: sync dir %s: %w", l.dir, err)
			}
			s.dirSync = false
		}
		if err == nil {
			s.header = nil
			l.stats.batch(b.records, wrote)
		}
	}
	if err != nil {
		if l.flErr == nil {
			l.log.Error("wal: log failed", "err", err)
			l.flErr = fmt.Errorf("%w: %w", ErrFailed, err)
			// Failed before the batch's appenders learn it, so that a
			// watcher of Failed sees the failure no later than they do.
			l.fail(l.flErr)
		}
		err = l.flErr
	}
	b.err = err
	close(b.done)
}

// activate retires the current file and makes the file of ts current: the
// prepared file (new or recycled) renamed to its name, or a new empty
// file. The header and the directory entry become durable with the next
// batch.
func (l *Log) activate(ts int64, firstSeq uint64, prepared *preparedFile) error {
	if old := l.seg; old != nil {
		l.seg = nil
		l.prep.retire(old)
	}
	name := FormatFileName(ts)
	path := filepath.Join(l.dir, name)
	var f vfs.File
	var flags uint32
	if prepared != nil {
		f = prepared.f
		if prepared.recycled {
			flags = flagRecycled
		}
		if err := l.fs.Rename(f.Name(), path); err != nil {
			f.Close()
			l.fs.Remove(f.Name())
			return fmt.Errorf("wal: rename prepared file to %s: %w", path, err)
		}
	} else {
		var err error
		if f, err = l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
			return fmt.Errorf("wal: create %s: %w", path, err)
		}
	}
	h := fileHeader{Prefix: l.opts.Prefix, FileTS: ts, FirstSeq: firstSeq, Flags: flags,
		MaxFlush: uint32(l.opts.MaxBatchBytes) + uint32(l.headerSize)}
	l.seg = &segment{f: f, path: path, ts: ts, header: h.appendTo(nil), dirSync: true}
	l.mu.Lock()
	l.activeTS = ts
	l.mu.Unlock()
	l.stats.file(flags&flagRecycled != 0)
	return nil
}

// retire closes a finished file; with truncate, it first truncates it to
// its data (dropping the unused pre-zeroed space and, in a recycled file,
// the stale frames after it) and syncs it. Every batch of it is durable
// already; a crash in retire leaves a file that replays the same.
func retire(s *segment, truncate bool) error {
	var err error
	if truncate {
		err = s.f.Truncate(s.off)
		if err == nil {
			err = s.f.Sync()
		}
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: retire %s: %w", s.path, err)
	}
	return nil
}
