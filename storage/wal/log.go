package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"bighive/storage/mutation"
	"bighive/storage/vfs"
)

// Prealloc says how the next log file is prepared in the background.
type Prealloc int

const (
	// PreallocZero writes the whole file with zeros and syncs it, so that
	// appends overwrite blocks that are already allocated and written. The
	// default: fdatasync on such a file is about twice as fast as on a
	// fallocated one (docs/performance.md, "Write-ahead log").
	PreallocZero Prealloc = iota
	// PreallocFallocate reserves the file with fallocate. The blocks stay
	// "unwritten" extents whose conversion costs journal writes at every
	// sync. For comparison only.
	PreallocFallocate
	// PreallocNone prepares nothing: each file grows as it is written.
	PreallocNone
)

// Options configure a Log.
type Options struct {
	// FS is the filesystem; default vfs.Default.
	FS vfs.FS
	// Root is the shared root; the files live in Root/wal/Prefix.
	Root string
	// Prefix names this tserver's log: FormatPrefix(host:port).
	Prefix string
	// MaxBatchBytes bounds the records of one group-commit batch (one write,
	// one fdatasync). A single larger record is written alone. Default 1 MiB.
	MaxBatchBytes int
	// FileSize is the size each file is prepared to; a file that would grow
	// past it rolls to the next. Default 64 MiB.
	FileSize int64
	// Prealloc is how the next file is prepared when no retired file is
	// there to recycle. Default PreallocZero.
	Prealloc Prealloc
	// RecycleFiles is how many retired log files (those DeleteBefore
	// removes from the log) are kept, under a temporary name, to become
	// later files instead of preparing new ones: a recycled file is
	// renamed to the next file's name and overwritten in place, so
	// neither zeroing nor block allocation is paid again. 0 means
	// DefaultRecycleFiles; a negative value disables recycling. Kept files
	// do not survive a restart (Open removes them).
	RecycleFiles int
	// Clock gives record and file timestamps; default time.Now.
	Clock func() time.Time
	// Logger receives start-up repairs and background errors; default
	// slog.Default().
	Logger *slog.Logger
}

// DefaultRecycleFiles is the number of retired files kept for reuse
// when Options.RecycleFiles is 0.
const DefaultRecycleFiles = 4

const (
	defaultMaxBatchBytes = 1 << 20
	defaultFileSize      = 64 << 20
	// maxQueued bounds the sealed batches waiting behind the one being
	// written; appenders beyond it wait for the flusher.
	maxQueued = 2
)

// Log is the write-ahead log of one tserver. It is safe for concurrent use.
//
// Appends are group-committed by one flusher goroutine: it takes the batch
// that formed while the previous write and fdatasync ran, writes it with one
// write and makes it durable with one fdatasync. A lone appender waits for
// no timer.
type Log struct {
	opts   Options
	dir    string
	fs     vfs.FS
	log    *slog.Logger
	prep   *preparer
	kick   chan struct{} // wakes the flusher; capacity 1
	flDone chan struct{} // closed when the flusher exits

	mu         sync.Mutex
	cur        *batch        // the open batch, receiving appends
	queue      []*batch      // sealed batches, oldest first, not yet taken by the flusher
	space      chan struct{} // closed and replaced whenever the flusher takes a batch
	nextSeq    uint64
	rolledAt   uint64   // nextSeq at the last Roll (0: none): a Roll with no append since returns pos
	lastTS     int64    // newest file timestamp handed out
	pos        Position // file that records appended now go to (or a later one)
	fileBytes  int64    // bytes assigned to the file of cur
	closed     bool
	err        error         // sticky: the log failed; wraps ErrFailed and the cause
	failed     chan struct{} // closed when err is set
	free       [][]byte
	activeTS   int64 // file the flusher writes; set by activate
	headerSize int64
	// cohort is the number of appenders the flusher released with its
	// last batch (0 after a wait for them ran out); want, while the
	// flusher waits for them to come back, the appenders of the open
	// batch that end the wait (0: not waiting). See awaitCohort.
	cohort, want int

	// Owned by the flusher goroutine (and by Open and Close before/after it runs).
	seg   *segment
	flErr error
	stats statsCounters
}

// batch is the records of one write and one fdatasync.
type batch struct {
	buf       []byte
	records   int
	firstSeq  uint64 // seq of the first record, or of the next record when empty
	newFileTS int64  // when non-zero, start the file of this timestamp before writing
	logNum    int64  // the log number the records carry (set with the first record)
	appenders int    // AppendBatch calls with a record in the batch
	done      chan struct{}
	err       error // set before done is closed
}

// segment is the file the flusher writes.
type segment struct {
	f       vfs.File
	path    string
	ts      int64
	off     int64  // end of written data
	header  []byte // written with the first batch
	dirSync bool   // the directory entry still needs a SyncDir
}

// scratch holds appenders' encoding buffers.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxScratch = 64 << 10

// Open opens the log of opts.Prefix under opts.Root for appending. It
// repairs the newest file of the prefix (a torn tail is truncated and
// logged; a corrupt file fails Open with a *CorruptionError), continues the
// sequence numbers where that file ended, and starts a new file whose
// timestamp is later than every existing file's, even if the clock went
// backwards. The new file exists and is durable when Open returns.
func Open(ctx context.Context, opts Options) (*Log, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = defaultMaxBatchBytes
	}
	if opts.FileSize <= 0 {
		opts.FileSize = defaultFileSize
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.RecycleFiles == 0 {
		opts.RecycleFiles = DefaultRecycleFiles
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Root == "" {
		return nil, fmt.Errorf("%w: empty Root", ErrBadOptions)
	}
	if _, err := ParsePrefix(opts.Prefix); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if opts.MaxBatchBytes > MaxRecordBytes {
		return nil, fmt.Errorf("%w: MaxBatchBytes %d over %d", ErrBadOptions, opts.MaxBatchBytes, MaxRecordBytes)
	}
	l := &Log{
		opts:   opts,
		dir:    PrefixDir(opts.Root, opts.Prefix),
		fs:     opts.FS,
		log:    opts.Logger.With("wal", opts.Prefix),
		kick:   make(chan struct{}, 1),
		flDone: make(chan struct{}),
		space:  make(chan struct{}),
		failed: make(chan struct{}),
	}
	l.headerSize = int64((&fileHeader{Prefix: opts.Prefix}).size())
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: mkdir %s: %w", l.dir, err)
	}
	for _, d := range []string{opts.Root, filepath.Join(opts.Root, walDir), l.dir} {
		if err := l.fs.SyncDir(d); err != nil {
			return nil, fmt.Errorf("wal: sync dir %s: %w", d, err)
		}
	}
	if err := l.removeTemps(); err != nil {
		return nil, err
	}
	lastSeq, lastTS, err := l.recover(ctx)
	if err != nil {
		return nil, err
	}
	l.nextSeq = lastSeq + 1
	l.lastTS = lastTS
	l.prep = newPreparer(l.fs, l.dir, opts.FileSize, opts.Prealloc, max(opts.RecycleFiles, 0), l.log)

	// The first file: prepared and activated before Open returns.
	first := l.newBatch()
	first.newFileTS = l.allocTS()
	var prepared *preparedFile
	if opts.Prealloc != PreallocNone {
		if prepared, err = l.prep.prepare(ctx); err != nil {
			return nil, err
		}
	}
	l.writeBatch(first, prepared)
	<-first.done
	if first.err != nil {
		if l.seg != nil {
			l.seg.f.Close()
		}
		return nil, first.err
	}
	l.pos = Position{Prefix: opts.Prefix, FileTS: first.newFileTS}
	l.fileBytes = l.seg.off
	l.cur = l.newBatch()
	go l.prep.run()
	go l.flushLoop()
	return l, nil
}

// recover repairs the newest file with a header and returns the last
// sequence number in the log and the newest file timestamp.
func (l *Log) recover(ctx context.Context) (lastSeq uint64, lastTS int64, err error) {
	files, err := Files(l.fs, l.opts.Root, l.opts.Prefix)
	if err != nil {
		return 0, 0, err
	}
	if len(files) == 0 {
		return 0, 0, nil
	}
	lastTS = files[len(files)-1].FileTS
	for i := len(files) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		pos := files[i]
		path := FilePath(l.opts.Root, pos)
		rep, err := replayFile(l.fs, path, &pos, nil)
		if err != nil {
			return 0, 0, err
		}
		if rep.Unused {
			// No record was ever durable in it. A recycled file whose
			// first flush a crash cut off holds a zeroed header and its
			// previous life's frames: drop those, so that the file reads
			// as unused and clean from now on.
			if rep.Torn {
				if err := l.truncate(path, 0); err != nil {
					return 0, 0, err
				}
				l.log.Warn("wal: emptied a file whose header never became durable", "file", path, "bytes", rep.Size)
			}
			continue
		}
		if rep.Size > rep.End {
			if err := l.truncate(path, rep.End); err != nil {
				return 0, 0, err
			}
			if rep.Torn {
				l.log.Warn("wal: truncated torn tail", "file", path, "offset", rep.End,
					"torn_bytes", rep.TornBytes, "last_seq", rep.LastSeq)
			}
		}
		if rep.Records > 0 {
			return rep.LastSeq, lastTS, nil
		}
		return rep.FirstSeq - 1, lastTS, nil
	}
	return 0, lastTS, nil
}

// removeTemps removes prepared and kept (recyclable) files an earlier
// run left behind.
func (l *Log) removeTemps() error {
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", l.dir, err)
	}
	for _, e := range ents {
		if (strings.HasPrefix(e.Name(), preparedPrefix) || strings.HasPrefix(e.Name(), recyclePrefix)) &&
			strings.HasSuffix(e.Name(), vfs.TempSuffix) {
			if err := l.fs.Remove(filepath.Join(l.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("wal: remove %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

func (l *Log) truncate(path string, size int64) error {
	f, err := l.fs.OpenFile(path, 0x2 /* O_RDWR */, 0)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", path, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: truncate %s to %d: %w", path, size, err)
	}
	return nil
}

// Append logs one row mutation of a tablet and returns its sequence
// number. It returns only once the record is durable (written and
// fdatasync'ed, with every record of lower sequence number). The record's
// timestamp is the wall time of the call.
//
// The context only bounds the wait to be queued: if ctx is done when Append
// is called, or ends while Append waits for room behind full batches
// (back-pressure), Append returns ctx.Err() and the record is never
// written. Once the record is queued for a group commit, Append waits for
// its fate whatever ctx does, and returns nil (durable) or the log's
// failure. So a nil error means the record is durable, ctx.Err() means it
// was not and never will be logged, and an error wrapping ErrFailed means
// its fate is unknown (written but perhaps not synced: it may or may not
// replay). The group commit itself never waits long: one write and one
// fdatasync.
//
// After an I/O error the log is failed and stays failed: this and every
// later Append return an error wrapping ErrFailed and the cause (Err,
// Failed); ErrClosed after Close.
func (l *Log) Append(ctx context.Context, tabletID string, m *mutation.RowMutation) (uint64, error) {
	seqs, errs := l.AppendBatch(ctx, tabletID, []*mutation.RowMutation{m})
	return seqs[0], errs[0]
}

// AppendBatch logs the row mutations of one tablet, in order, and returns
// once each is durable or failed: errs[i] is the outcome of ms[i], with
// the meaning of Append's error (nil: durable, and seqs[i] is its
// sequence number). The records are queued
// together, so they share one group commit (one write, one fdatasync)
// unless they pass MaxBatchBytes or the file rolls, and the caller waits
// once per batch they fill, not once per record.
//
// A record over MaxRecordBytes fails alone with ErrRecordTooLarge. The
// context bounds only the wait to be queued, as for Append: the records
// queued before ctx ended are waited for whatever ctx does; the records
// after get ctx.Err() and are never written.
func (l *Log) AppendBatch(ctx context.Context, tabletID string, ms []*mutation.RowMutation) (seqs []uint64, errs []error) {
	seqs, errs = make([]uint64, len(ms)), make([]error, len(ms))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return seqs, errs
	}
	ts := l.opts.Clock().UnixMicro()
	sp := scratch.Get().(*[]byte)
	buf := (*sp)[:0]
	type enc struct {
		off, end int
		partial  uint32
	}
	encs := make([]enc, len(ms))
	for i, m := range ms {
		if size := recordSize(tabletID, m); size-frameHeaderLen > MaxRecordBytes {
			errs[i] = fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, size, MaxRecordBytes)
			continue
		}
		off := len(buf)
		var partial uint32
		buf, partial = encodeFrame(buf, frameHeaderLen, ts, tabletID, m)
		encs[i] = enc{off: off, end: len(buf), partial: partial}
	}
	defer func() {
		if cap(buf) <= maxScratch {
			*sp = buf[:0]
			scratch.Put(sp)
		}
	}()
	batches := make([]*batch, len(ms)) // the batch each queued record is in
	var joined *batch
	l.mu.Lock()
	for i := range ms {
		if errs[i] != nil {
			continue
		}
		e := encs[i]
		frame := buf[e.off:e.end]
		b, seq, err := l.queueLocked(ctx, frame, e.partial, len(frame)+8)
		if err != nil {
			for j := i; j < len(ms); j++ {
				if errs[j] == nil {
					errs[j] = err
				}
			}
			break
		}
		batches[i], seqs[i] = b, seq
		if b != joined {
			b.appenders++
			joined = b
		}
	}
	// While the flusher waits for the appenders it released last, only
	// the one that brings the open batch to the wanted size wakes it.
	kick := l.want == 0 || len(l.queue) > 0 || l.cur.appenders >= l.want
	l.mu.Unlock()
	// One kick after every record is queued, so the flusher takes them
	// together instead of the first one alone.
	if kick {
		l.kickFlusher()
	}
	// Queued records are waited for whatever ctx says (see Append).
	var last *batch
	for i, b := range batches {
		if b == nil {
			continue
		}
		if b != last {
			<-b.done
			last = b
		}
		if errs[i] = b.err; errs[i] != nil {
			seqs[i] = 0
		}
	}
	return seqs, errs
}

// queueLocked adds one encoded record to the open batch, sealing it or
// rolling the file first if the record does not fit; the caller kicks
// the flusher once it released l.mu (kickFlusher). It waits for room behind
// full batches (releasing l.mu meanwhile) until ctx ends. l.mu is held.
func (l *Log) queueLocked(ctx context.Context, frame []byte, partial uint32, size int) (*batch, uint64, error) {
	var b *batch
	for {
		if l.closed {
			return nil, 0, ErrClosed
		}
		if l.err != nil {
			return nil, 0, l.err
		}
		b = l.cur
		full := b.records > 0 && len(b.buf)+size > l.opts.MaxBatchBytes
		roll := l.fileBytes > l.headerSize && l.fileBytes+int64(size) > l.opts.FileSize
		if !full && !roll {
			break
		}
		if b.records > 0 {
			if len(l.queue) >= maxQueued {
				// The queue is full: the flusher has work, but a batch
				// appender may have sealed it without kicking yet.
				l.kickFlusher()
				ch := l.space
				l.mu.Unlock()
				select {
				case <-ch:
				case <-ctx.Done():
					l.mu.Lock()
					return nil, 0, ctx.Err()
				}
				l.mu.Lock()
				continue
			}
			l.sealLocked()
		}
		if roll {
			l.startFileLocked()
		}
	}
	seq := l.nextSeq
	l.nextSeq++
	// l.pos names the file the open batch goes to: its log number is
	// what the frame carries.
	b.buf = sealFrame(b.buf, frame, partial, seq, framesV2(l.pos.FileTS))
	if b.records == 0 {
		b.logNum = l.pos.FileTS
	}
	l.fileBytes += int64(size)
	b.records++
	return b, seq, nil
}

// kickFlusher wakes the flusher (it may be idle) without blocking.
func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Err returns nil while the log works, and the sticky failure once an I/O
// error (a write, an fdatasync, creating or syncing a file at a roll) has
// failed it: an error wrapping ErrFailed and the cause. A failed log never
// recovers; its owner should stop using it (a tserver gives up its tablets)
// and reopen the log after a restart, which replays every acknowledged
// record.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Failed returns a channel that is closed when the log fails (Err then
// returns the cause). It is the same channel on every call and is never
// closed by Close.
func (l *Log) Failed() <-chan struct{} { return l.failed }

// fail puts the log in the failed state (once).
func (l *Log) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		close(l.failed)
	}
}

// Position is the file that every record appended from now on goes to, or
// a later file. A tserver records it in a tablet's metadata before it
// acknowledges the tablet's first write (docs/design.md 'Log positions').
func (l *Log) Position() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos
}

// Roll switches to a new file and returns its position: every record
// appended after Roll returns lies in that file or a later one, every
// record appended before in an earlier one. Roll does no I/O and waits for
// nothing, so it may run under the checkpoint's exclusive lock; the
// flusher creates the file (prepared in the background) right away, and
// makes it durable before it acknowledges any record in it. A Roll with no
// Append since the previous Roll returns the same position.
func (l *Log) Roll() (Position, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Position{}, ErrClosed
	}
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return Position{}, err
	}
	// No append since the last roll (or the open batch already starts a
	// file): the current position covers everything. The flusher may
	// have taken the last roll's empty batch already, so the batch alone
	// does not tell.
	if l.cur.records == 0 && (l.cur.newFileTS != 0 || l.rolledAt == l.nextSeq) {
		pos := l.pos
		l.mu.Unlock()
		return pos, nil
	}
	if l.cur.records > 0 {
		l.sealLocked()
	}
	l.startFileLocked()
	l.rolledAt = l.nextSeq
	pos := l.pos
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return pos, nil
}

// sealLocked moves the open batch to the queue and opens a new one.
func (l *Log) sealLocked() {
	l.queue = append(l.queue, l.cur)
	l.cur = l.newBatch()
}

// startFileLocked makes the open batch (empty) start a new file.
func (l *Log) startFileLocked() {
	ts := l.allocTS()
	l.cur.newFileTS = ts
	l.pos = Position{Prefix: l.opts.Prefix, FileTS: ts}
	l.fileBytes = l.headerSize
}

// allocTS returns a file timestamp later than every earlier one.
func (l *Log) allocTS() int64 {
	ts := l.opts.Clock().UnixMicro()
	if ts <= l.lastTS {
		ts = l.lastTS + 1
	}
	l.lastTS = ts
	return ts
}

func (l *Log) newBatch() *batch {
	b := &batch{firstSeq: l.nextSeq, done: make(chan struct{})}
	if n := len(l.free); n > 0 {
		b.buf = l.free[n-1][:0]
		l.free = l.free[:n-1]
	}
	return b
}

// Close flushes every appended record, truncates the current file to its
// data and closes the log. Appends that have not been queued when Close
// starts fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	close(l.space) // wake appenders waiting for room; they see closed
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	<-l.flDone
	var err error
	if l.seg != nil {
		if l.flErr == nil {
			err = retire(l.seg, true)
		} else {
			l.seg.f.Close()
		}
	}
	if perr := l.prep.close(); err == nil {
		err = perr
	}
	if err == nil && l.flErr != nil {
		err = l.flErr
	}
	return err
}
