package tablet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
	"bighive/storage/tablet/tsfile"
)

// TSFileInfo describes a TSFile of the tablet (what its metadata records).
type TSFileInfo = tsfile.Info

// FileRef names an existing TSFile to open: its footer block, named by the
// UUID of the store holding it and its ID there, and that store, open
// (nil: Options.Store, whose UUID Footer.Store must then be or leave
// empty). After a failover a tablet reads files from the previous owner's
// store, opened read-only.
type FileRef struct {
	Footer blockstore.BlockRef
	Store  blockstore.Manager
	// Release, if set, is called once when the tablet stops reading the
	// file: its reader closed (after Close, or after a compaction replaced
	// it, once the last read using it ended), or Open failed. The caller
	// may then close Store if nothing else reads through it.
	Release func()
}

// Options configures Open.
type Options struct {
	// ID is the tablet id, passed to the block store with new blocks.
	ID     string
	Schema Schema
	// Store is the block store new TSFiles are written to (and read from
	// unless a FileRef says otherwise).
	Store blockstore.Manager
	// StoreUUID names Store in tablet metadata; the TSFiles written to
	// Store carry it (tsfile.Info.Store). Block IDs are unique only per
	// store, so files are told apart by (store, footer).
	StoreUUID string
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
	// spare is an empty buffer made outside a checkpoint's lock window
	// (at Open and when a flushed standby is dropped), which SwapBuffers
	// makes the next active one: the window then only moves pointers.
	spare  *memstore.Memstore
	files  []*file // newest first
	closed bool

	clockMu sync.Mutex
	lastTS  int64  // the largest timestamp assigned or observed
	lastSeq uint64 // the largest write sequence assigned or observed
	// flushedSeq is the largest MaxSeq of the files Open was given (see
	// FlushedSeq); fixed after Open.
	flushedSeq uint64
	seq        seqState
	seqCond    *sync.Cond // on clockMu; signalled when visible moves
	// visible is the largest sequence below every write in flight
	// (sequence.go): reads see no buffer entry above it.
	visible atomic.Uint64

	// garbage caches EstimateGarbage's row samples of the read set.
	garbage garbageSamples

	// rowsExamined counts the rows scans resolved, visible or not (added
	// once per scan); tests use it to check that a cancelled scan stops.
	rowsExamined atomic.Int64
}

// file is an open TSFile with a reference count, so a reader that took a
// snapshot keeps it open after compaction removed it from the read set.
type file struct {
	info    TSFileInfo
	r       *tsfile.Reader
	onClose func() // FileRef.Release, or nil
	mu      sync.Mutex
	refs    int
	dropped bool
}

// close closes the reader and tells the FileRef's owner.
func (f *file) close() {
	f.r.Close()
	if f.onClose != nil {
		f.onClose()
	}
}

func (f *file) acquire() { f.mu.Lock(); f.refs++; f.mu.Unlock() }

func (f *file) release() {
	f.mu.Lock()
	f.refs--
	closeIt := f.refs == 0 && f.dropped
	f.mu.Unlock()
	if closeIt {
		f.close()
	}
}

func (f *file) drop() {
	f.mu.Lock()
	f.dropped = true
	closeIt := f.refs == 0
	f.mu.Unlock()
	if closeIt {
		f.close()
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
	t := &Tablet{opts: opts, log: opts.Logger.With("tablet", opts.ID), schema: opts.Schema, active: memstore.New(), spare: memstore.New()}
	t.seqCond = sync.NewCond(&t.clockMu)
	for i, ref := range opts.Files {
		f, err := t.openRef(ref)
		if err != nil {
			for _, f := range t.files {
				f.close()
			}
			for _, ref := range opts.Files[i:] {
				if ref.Release != nil {
					ref.Release()
				}
			}
			return nil, err
		}
		t.files = append(t.files, f)
		// The clock and the write sequence continue above the files: a
		// tablet loaded on a server whose clock is behind, or whose log
		// holds none of the tablet's records, still writes newer cells.
		t.ObserveTimestamp(f.info.MaxTimestamp)
		t.ObserveSeq(f.info.MaxSeq)
		t.flushedSeq = max(t.flushedSeq, f.info.MaxSeq)
	}
	return t, nil
}

// FlushedSeq is the largest write sequence of the TSFiles the tablet was
// opened with (0: none). Every logged record of the tablet whose sequences
// are all at or below it is in those files — or was dropped from them by a
// compaction, with the tombstone that hid it — so replay must skip it (see
// "Compactions" in the package doc): applying it again could bring back a
// cell whose tombstone a major compaction purged.
func (t *Tablet) FlushedSeq() uint64 { return t.flushedSeq }

// openRef opens an existing TSFile of Options.Files.
func (t *Tablet) openRef(ref FileRef) (*file, error) {
	store := ref.Store
	if store == nil {
		if ref.Footer.Store != "" && ref.Footer.Store != t.opts.StoreUUID {
			return nil, fmt.Errorf("tablet %s: TSFile %s: no open store given for store %q", t.opts.ID, ref.Footer, ref.Footer.Store)
		}
		store, ref.Footer.Store = t.opts.Store, t.opts.StoreUUID
	}
	f, err := t.openFile(store, ref.Footer)
	if err != nil {
		return nil, err
	}
	f.onClose = ref.Release
	return f, nil
}

func (t *Tablet) openFile(store blockstore.Manager, footer blockstore.BlockRef) (*file, error) {
	r, err := tsfile.Open(store, footer, tsfile.ReaderOptions{Cache: t.opts.Cache, Owner: t.opts.CacheOwner})
	if err != nil {
		return nil, fmt.Errorf("tablet %s: open TSFile %s: %w", t.opts.ID, footer, err)
	}
	return &file{info: r.Info(), r: r}, nil
}

// openOwn opens a TSFile this tablet wrote into Options.Store.
func (t *Tablet) openOwn(info TSFileInfo) (*file, error) {
	if info.Store != t.opts.StoreUUID {
		return nil, fmt.Errorf("tablet %s: TSFile %s is not in this tablet's store %q", t.opts.ID, info.FooterRef(), t.opts.StoreUUID)
	}
	return t.openFile(t.opts.Store, info.FooterRef())
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
	t.publishLocked()
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
	t.ObserveSeq(m.LastSeq())
}

// Replay applies a logged mutation to the active buffer with its logged
// write sequence and timestamps (so replaying twice is replaying once),
// and moves the clock and the write sequence past the record's: past its
// sequence, its op timestamps and appended, the time the log stamped on
// the record plus one µs per op, so sequences and timestamps assigned
// later are greater than the replayed ones (another server's clock may
// have been ahead). A record whose last sequence is at or below
// FlushedSeq is in the TSFiles already and is not applied again: a major
// compaction may have purged the tombstone that hides its cells (package
// doc, "Compactions", 3). Recovery replays the log, recovery files and
// child logs through it before the tablet serves.
func (t *Tablet) Replay(m *mutation.RowMutation, appended int64) error {
	t.ObserveTimestamp(appended + int64(len(m.Ops)))
	t.ObserveMutation(m)
	if m.LastSeq() <= t.FlushedSeq() {
		return nil
	}
	return t.Apply(m)
}

// AssignTimestamps validates m, gives it the tablet's next write sequence
// (m.Seq, strictly increasing over the tablet's life: Open and replay
// observe the sequences already used) and replaces every ServerTime
// timestamp by a server timestamp (µs), strictly increasing per tablet: op
// i of the mutation gets base+i, so later ops of one mutation are newer,
// and the next mutation gets a larger base. Under Millis granularity the
// server timestamp is the clock truncated to whole milliseconds, never
// below the largest timestamp assigned or observed (rounded up to a
// millisecond): every op of the mutation gets it, and so may the next
// mutations within the same millisecond (of equal timestamps, the higher
// sequence wins); a client timestamp that is not a multiple of 1000 µs is
// ErrInvalidMutation there. A DeleteColumn with ServerTime
// covers every timestamp ([0, 0)). Call it once per write, before the WAL
// append, so the log holds the sequence and concrete timestamps and replay
// is idempotent.
func (t *Tablet) AssignTimestamps(m *mutation.RowMutation) error {
	return t.assign(m, false, false)
}

// assign is AssignTimestamps; track keeps the sequence in flight
// (BeginWrite); anyFamily accepts families absent from the schema.
func (t *Tablet) assign(m *mutation.RowMutation, track, anyFamily bool) error {
	// The schema stays read-locked until the sequence is assigned: once
	// SetSchema returns, every write validated against the old schema has
	// its sequence (WaitWrites relies on it).
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.schema.validate(m, false, anyFamily); err != nil {
		return err
	}
	need := 0
	for i := range m.Ops {
		if m.Ops[i].Timestamp == mutation.ServerTime {
			need++
		}
	}
	t.clockMu.Lock()
	m.Seq = t.lastSeq + 1
	t.lastSeq = m.LastSeq() // op i has sequence Seq+i
	if track {
		t.seq.inflight = append(t.seq.inflight, m.Seq)
	}
	t.publishLocked()
	if need == 0 {
		t.clockMu.Unlock()
		return nil
	}
	base, step := t.opts.Now().UnixMicro(), int64(1)
	if t.schema.Granularity == Millis {
		// Whole milliseconds, not decreasing: writes within one
		// millisecond share its timestamp (the higher sequence wins, as a
		// later write of the same timestamp in Bigtable), and every op of
		// the mutation has it.
		base, step = base-base%1000, 0
		if base < t.lastTS {
			base = ceilMillis(t.lastTS)
		}
	} else if base <= t.lastTS {
		base = t.lastTS + 1
	}
	t.lastTS = base + step*int64(len(m.Ops)-1)
	t.clockMu.Unlock()
	for i := range m.Ops {
		op := &m.Ops[i]
		if op.Timestamp != mutation.ServerTime {
			continue
		}
		if op.Kind == mutation.DeleteColumn {
			op.Timestamp, op.End = 0, 0
		} else {
			op.Timestamp = base + step*int64(i)
		}
	}
	return nil
}

// ceilMillis is ts rounded up to a whole millisecond (a multiple of 1000
// µs); ts is at most maxObservedTS, so it does not overflow.
func ceilMillis(ts int64) int64 {
	if r := ts % 1000; r != 0 {
		return ts + 1000 - r
	}
	return ts
}

// Validate checks a mutation whose timestamps are assigned.
func (t *Tablet) Validate(m *mutation.RowMutation) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.schema.validate(m, true, false)
}

// Apply applies a mutation with an assigned sequence and timestamps to the
// active buffer, atomically: a concurrent reader sees all of its ops or
// none. It does not check the families against the schema: the write path
// did when it assigned the sequence, and a logged record replayed after
// its family was deleted must still apply (reads hide cells of families
// the schema lacks, and major compactions drop them). Applying the same mutation again changes nothing visible (replay
// is idempotent: the entries have the same keys and sequence) while the
// TSFiles do not hold it: a compaction may have folded its aggregate
// operands into one of another sequence (replay skips what the files
// hold, see FlushedSeq). A write
// begun by BeginWrite is finished by Apply, whatever its outcome, and Apply
// returns nil only once the write is visible to reads, i.e. once every
// write of lower sequence has finished too.
func (t *Tablet) Apply(m *mutation.RowMutation) error {
	return t.ApplyBatch([]*mutation.RowMutation{m})[0]
}

// ApplyBatch is Apply for the writes of one batch, which must be in the
// order their sequences were assigned: errs[i] is the outcome of ms[i].
// Each is applied and finished, then ApplyBatch waits once, until the
// last of them is visible (every write of lower sequence finished).
func (t *Tablet) ApplyBatch(ms []*mutation.RowMutation) (errs []error) {
	errs = make([]error, len(ms))
	var last uint64
	for i, m := range ms {
		errs[i] = t.apply(m)
		if t.finish(m) && errs[i] == nil {
			last = max(last, m.LastSeq())
		}
	}
	if last > 0 {
		t.waitVisible(last)
	}
	return errs
}

func (t *Tablet) apply(m *mutation.RowMutation) error {
	t.mu.RLock()
	err := t.schema.validate(m, true, true)
	t.mu.RUnlock()
	if err != nil {
		return err
	}
	if m.Seq == 0 {
		return fmt.Errorf("%w: row %q has no write sequence assigned", ErrInvalidMutation, m.Row)
	}
	entries := make([]memstore.Entry, len(m.Ops))
	for i := range m.Ops {
		op := &m.Ops[i]
		e := &entries[i]
		e.Row, e.Kind, e.Timestamp, e.Seq = m.Row, op.Kind, op.Timestamp, m.OpSeq(i)
		switch op.Kind {
		case mutation.SetCell, mutation.MergeCell:
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
	next := t.spare
	if next == nil {
		next = memstore.New()
	}
	t.standby, t.active, t.spare = t.active, next, nil
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
	info, err := tsfile.Write(ctx, t.opts.Store, sb.NewIterator(), t.writerOptions())
	if err != nil {
		return TSFileInfo{}, fmt.Errorf("tablet %s: flush standby buffer: %w", t.opts.ID, err)
	}
	t.log.Info("tablet: flushed standby buffer", "footer", info.FooterRef(), "entries", info.Entries, "bytes", info.Size, "took", time.Since(start))
	return info, nil
}

// InstallFlushed adds the TSFile FlushStandby wrote to the read set and
// drops the standby buffer, in one step for readers. Call it after the
// tablet metadata names the file.
func (t *Tablet) InstallFlushed(info TSFileInfo) error {
	f, err := t.openOwn(info)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		f.close()
		return ErrClosed
	}
	if t.standby == nil {
		f.close()
		return ErrNoStandby
	}
	t.files = append([]*file{f}, t.files...)
	t.standby = nil
	if t.spare == nil {
		t.spare = memstore.New()
	}
	return nil
}

// writerOptions are the options of every TSFile this tablet writes: each
// family's pages compressed with the codec the current schema gives it.
func (t *Tablet) writerOptions() tsfile.WriterOptions {
	return tsfile.WriterOptions{Store: t.opts.StoreUUID, TabletID: t.opts.ID, PageSize: t.opts.PageSize, Compression: t.Compression()}
}

// Compression returns the codec of each family's pages under the current
// schema, for TSFiles of the tablet's data written elsewhere (a split's
// children).
func (t *Tablet) Compression() func(family string) tsfile.Compression {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.schema.compression()
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
