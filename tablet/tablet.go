package tablet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"bighive/blockstore"
	"bighive/internal/mutation"
	"bighive/memstore"
	"bighive/tablet/blockcache"
	"bighive/tablet/tsfile"
)

// TSFileInfo describes a TSFile of the tablet (what its metadata records).
type TSFileInfo = tsfile.Info

// FileRef names an existing TSFile to open: its footer block and the block
// store holding it (nil: Options.Store). After a failover a tablet reads
// files from the previous owner's store, opened read-only.
type FileRef struct {
	Footer blockstore.BlockID
	Store  blockstore.Manager
}

// Options configures Open.
type Options struct {
	// ID is the tablet id, passed to the block store with new blocks.
	ID     string
	Schema Schema
	// Store is the block store new TSFiles are written to (and read from
	// unless a FileRef says otherwise).
	Store blockstore.Manager
	// Files are the tablet's existing TSFiles, newest first.
	Files []FileRef
	// Cache and CacheOwner (the table's owner, carrying its priority) hold
	// TSFile pages; a nil Cache disables caching.
	Cache      *blockcache.Cache
	CacheOwner *blockcache.Owner
	// PageSize of written TSFiles (default tsfile.DefaultPageSize).
	PageSize int
	// Now is the clock for timestamps and max age (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Tablet is one tablet's engine: two write buffers, the TSFiles, and reads
// merged over them. All methods are safe for concurrent use.
type Tablet struct {
	opts Options
	log  *slog.Logger

	writeMu sync.Mutex // serialises Apply and SwapBuffers

	mu      sync.RWMutex // guards the fields below
	schema  Schema
	active  *memstore.Memstore
	standby *memstore.Memstore // nil when none
	files   []*file            // newest first
	closed  bool

	clockMu sync.Mutex
	lastTS  int64  // the largest timestamp assigned or observed
	lastSeq uint64 // the largest write sequence assigned or observed

	// rowsExamined counts the rows scans resolved, visible or not (added
	// once per scan); tests use it to check that a cancelled scan stops.
	rowsExamined atomic.Int64
}

// file is an open TSFile with a reference count, so a reader that took a
// snapshot keeps it open after compaction removed it from the read set.
type file struct {
	info    TSFileInfo
	r       *tsfile.Reader
	mu      sync.Mutex
	refs    int
	dropped bool
}

func (f *file) acquire() { f.mu.Lock(); f.refs++; f.mu.Unlock() }

func (f *file) release() {
	f.mu.Lock()
	f.refs--
	closeIt := f.refs == 0 && f.dropped
	f.mu.Unlock()
	if closeIt {
		f.r.Close()
	}
}

func (f *file) drop() {
	f.mu.Lock()
	f.dropped = true
	closeIt := f.refs == 0
	f.mu.Unlock()
	if closeIt {
		f.r.Close()
	}
}

// Open opens a tablet with its existing TSFiles (reading only their
// footers) and empty write buffers; the caller then replays the log.
func Open(opts Options) (*Tablet, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Cache != nil && opts.CacheOwner == nil {
		opts.CacheOwner = opts.Cache.NewOwner(opts.ID, blockcache.Medium)
	}
	t := &Tablet{opts: opts, log: opts.Logger.With("tablet", opts.ID), schema: opts.Schema, active: memstore.New()}
	for _, ref := range opts.Files {
		store := ref.Store
		if store == nil {
			store = opts.Store
		}
		f, err := t.openFile(store, ref.Footer)
		if err != nil {
			for _, f := range t.files {
				f.r.Close()
			}
			return nil, err
		}
		t.files = append(t.files, f)
		// The clock and the write sequence continue above the files: a
		// tablet loaded on a server whose clock is behind, or whose log
		// holds none of the tablet's records, still writes newer cells.
		t.ObserveTimestamp(f.info.MaxTimestamp)
		t.ObserveSeq(f.info.MaxSeq)
	}
	return t, nil
}

func (t *Tablet) openFile(store blockstore.Manager, footer blockstore.BlockID) (*file, error) {
	r, err := tsfile.Open(store, footer, tsfile.ReaderOptions{Cache: t.opts.Cache, Owner: t.opts.CacheOwner})
	if err != nil {
		return nil, fmt.Errorf("tablet %s: open TSFile %s: %w", t.opts.ID, footer, err)
	}
	return &file{info: r.Info(), r: r}, nil
}

// RowsExamined is the number of rows scans have resolved so far, visible
// or not (each scan adds its count when it returns).
func (t *Tablet) RowsExamined() int64 { return t.rowsExamined.Load() }

// ID is the tablet id.
func (t *Tablet) ID() string { return t.opts.ID }

// SetSchema replaces the schema (e.g. a family was added).
func (t *Tablet) SetSchema(s Schema) {
	t.mu.Lock()
	t.schema = s
	t.mu.Unlock()
}

// Schema returns the current schema.
func (t *Tablet) Schema() Schema {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.schema
}

// maxObservedTS bounds what the clock observes, so that a client timestamp
// near the int64 limit cannot make assigned ones overflow.
const maxObservedTS = 1<<62 - 1

// ObserveTimestamp moves the tablet clock to at least ts, so timestamps
// assigned later are greater. Open calls it with the largest timestamp of
// each TSFile, recovery with the timestamps of replayed log records
// (another server's clock may have been ahead).
func (t *Tablet) ObserveTimestamp(ts int64) {
	ts = min(ts, maxObservedTS)
	t.clockMu.Lock()
	if ts > t.lastTS {
		t.lastTS = ts
	}
	t.clockMu.Unlock()
}

// ObserveSeq moves the write sequence to at least seq, so sequences
// assigned later are greater. Open calls it with each TSFile's largest,
// recovery with the sequence of each replayed log record.
func (t *Tablet) ObserveSeq(seq uint64) {
	t.clockMu.Lock()
	if seq > t.lastSeq {
		t.lastSeq = seq
	}
	t.clockMu.Unlock()
}

// ObserveMutation observes a logged mutation's sequence and the largest of
// its timestamps (replay calls it before applying the record).
func (t *Tablet) ObserveMutation(m *mutation.RowMutation) {
	var ts int64
	for i := range m.Ops {
		op := &m.Ops[i]
		ts = max(ts, op.Timestamp)
		if op.Kind == mutation.DeleteColumn && op.End > 0 {
			ts = max(ts, op.End-1)
		}
	}
	t.ObserveTimestamp(ts)
	t.ObserveSeq(m.Seq)
}

// AssignTimestamps validates m, gives it the tablet's next write sequence
// (m.Seq, strictly increasing over the tablet's life: Open and replay
// observe the sequences already used) and replaces every ServerTime
// timestamp by a server timestamp (µs), strictly increasing per tablet: op
// i of the mutation gets base+i, so later ops of one mutation are newer,
// and the next mutation gets a larger base. A DeleteColumn with ServerTime
// covers every timestamp ([0, 0)). Call it once per write, before the WAL
// append, so the log holds the sequence and concrete timestamps and replay
// is idempotent.
func (t *Tablet) AssignTimestamps(m *mutation.RowMutation) error {
	t.mu.RLock()
	err := t.schema.validate(m, false)
	t.mu.RUnlock()
	if err != nil {
		return err
	}
	need := 0
	for i := range m.Ops {
		if m.Ops[i].Timestamp == mutation.ServerTime {
			need++
		}
	}
	t.clockMu.Lock()
	t.lastSeq++
	m.Seq = t.lastSeq
	if need == 0 {
		t.clockMu.Unlock()
		return nil
	}
	base := t.opts.Now().UnixMicro()
	if base <= t.lastTS {
		base = t.lastTS + 1
	}
	t.lastTS = base + int64(len(m.Ops)) - 1
	t.clockMu.Unlock()
	for i := range m.Ops {
		op := &m.Ops[i]
		if op.Timestamp != mutation.ServerTime {
			continue
		}
		if op.Kind == mutation.DeleteColumn {
			op.Timestamp, op.End = 0, 0
		} else {
			op.Timestamp = base + int64(i)
		}
	}
	return nil
}

// Validate checks a mutation whose timestamps are assigned.
func (t *Tablet) Validate(m *mutation.RowMutation) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.schema.validate(m, true)
}

// Apply applies a mutation with an assigned sequence and timestamps to the
// active buffer, atomically: a concurrent reader sees all of its ops or
// none. Applying the same mutation again changes nothing visible (replay
// is idempotent: the entries have the same keys and sequence).
func (t *Tablet) Apply(m *mutation.RowMutation) error {
	if err := t.Validate(m); err != nil {
		return err
	}
	if m.Seq == 0 {
		return fmt.Errorf("%w: row %q has no write sequence assigned", ErrInvalidMutation, m.Row)
	}
	entries := make([]memstore.Entry, len(m.Ops))
	for i := range m.Ops {
		op := &m.Ops[i]
		e := &entries[i]
		e.Row, e.Kind, e.Timestamp, e.Seq = m.Row, op.Kind, op.Timestamp, m.Seq
		switch op.Kind {
		case mutation.SetCell:
			e.Family, e.Qualifier, e.Value = op.Family, op.Qualifier, op.Value
		case mutation.DeleteColumn:
			e.Family, e.Qualifier, e.End = op.Family, op.Qualifier, op.End
		case mutation.DeleteFamily:
			e.Family = op.Family
		}
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.RLock()
	active, closed := t.active, t.closed
	t.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	active.Apply(entries)
	return nil
}

// MemoryUsage is the exact memory of both write buffers (see memstore).
func (t *Tablet) MemoryUsage() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.active.MemoryUsage()
	if t.standby != nil {
		n += t.standby.MemoryUsage()
	}
	return n
}

// ActiveMemoryUsage is the memory of the active buffer alone.
func (t *Tablet) ActiveMemoryUsage() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.active.MemoryUsage()
}

// HasStandby reports whether a swapped buffer awaits FlushStandby.
func (t *Tablet) HasStandby() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.standby != nil
}

// SwapBuffers makes the active buffer the (read-only) standby and starts a
// new empty active one. Memory operations only. It returns false, and
// changes nothing, when the active buffer is empty or a standby buffer is
// still waiting to be flushed (then the caller must not move this tablet's
// log position).
func (t *Tablet) SwapBuffers() bool {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.active.Empty() || t.standby != nil {
		return false
	}
	t.standby, t.active = t.active, memstore.New()
	return true
}

// FlushStandby writes the standby buffer as a TSFile into Options.Store in
// one creation transaction; the file is durable when it returns. The
// standby buffer stays in the read set until InstallFlushed.
func (t *Tablet) FlushStandby(ctx context.Context) (TSFileInfo, error) {
	t.mu.RLock()
	sb := t.standby
	t.mu.RUnlock()
	if sb == nil {
		return TSFileInfo{}, ErrNoStandby
	}
	start := time.Now()
	info, err := tsfile.Write(ctx, t.opts.Store, sb.NewIterator(), tsfile.WriterOptions{TabletID: t.opts.ID, PageSize: t.opts.PageSize})
	if err != nil {
		return TSFileInfo{}, fmt.Errorf("tablet %s: flush standby buffer: %w", t.opts.ID, err)
	}
	t.log.Info("tablet: flushed standby buffer", "footer", info.Footer, "entries", info.Entries, "bytes", info.Size, "took", time.Since(start))
	return info, nil
}

// InstallFlushed adds the TSFile FlushStandby wrote to the read set and
// drops the standby buffer, in one step for readers. Call it after the
// tablet metadata names the file.
func (t *Tablet) InstallFlushed(info TSFileInfo) error {
	f, err := t.openFile(t.opts.Store, info.Footer)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		f.r.Close()
		return ErrClosed
	}
	if t.standby == nil {
		f.r.Close()
		return ErrNoStandby
	}
	t.files = append([]*file{f}, t.files...)
	t.standby = nil
	return nil
}

// Files lists the TSFiles of the read set, newest first.
func (t *Tablet) Files() []TSFileInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]TSFileInfo, len(t.files))
	for i, f := range t.files {
		out[i] = f.info
	}
	return out
}

// Close releases the TSFile readers. Reads in flight finish first.
func (t *Tablet) Close() error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	files := t.files
	t.files = nil
	t.mu.Unlock()
	for _, f := range files {
		f.drop()
	}
	return nil
}
