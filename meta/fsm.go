package meta

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
	"bighive/storage/vfs"
)

// ErrClosed is returned by reads of a closed FSM.
var ErrClosed = errors.New("meta: closed")

// ErrVersion is returned when meta.db or a command has a newer version than
// this binary understands.
var ErrVersion = errors.New("meta: unsupported format version")

// CorruptionError reports a record of meta.db that does not decode. It
// names the file, the bucket and the key; on-disk garbage is reported, never
// a panic.
type CorruptionError struct {
	File   string
	Bucket string
	Key    string
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("meta: corrupt record in %s bucket %s key %q: %v", e.File, e.Bucket, e.Key, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Result is the response of Apply for one command (what
// raft.ApplyFuture.Response returns). Err non-nil means the command was
// refused and changed nothing; it is an apierr error carrying a gRPC code.
type Result struct {
	Err error
	// Tablets: CreateTable's initial tablets, ReportSplit's children, the
	// loaded tablet of TabletLoad, the tablets Assign changed; TabletLoads'
	// loaded tablets, one per load in order (nil where it was refused).
	Tablets []*pb.TabletMeta
	// IDs: AllocateIds' tablet ids; RegisterTServer's tablets made UNASSIGNED.
	IDs []string
	// Statuses: Checkpoint's per-report and TabletLoads' per-load outcome,
	// in order (nil = applied).
	Statuses []error
	// Applied: how many Assign/Unassign items applied.
	Applied int
	// Done: DeleteTablets found no tablet left and removed the table.
	Done bool
	// Backup: the backup CreateBackup recorded or UpdateBackup changed.
	Backup *pb.BackupMeta
}

// FSM is the raft state machine. Apply, Snapshot and Restore are called by
// raft from its FSM goroutine, one at a time; View may be called from any
// goroutine concurrently with them.
type FSM struct {
	fs   vfs.FS
	path string
	log  *slog.Logger

	mu sync.RWMutex // guards db against Restore swapping it
	db *bolt.DB

	gens ownerGens
}

var _ raft.FSM = (*FSM)(nil)

// OpenFSM opens (creating if needed) the FSM database at path.
func OpenFSM(fsys vfs.FS, path string, log *slog.Logger) (*FSM, error) {
	if log == nil {
		log = slog.Default()
	}
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := fsys.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("meta: create data directory: %w", err)
	}
	// A leftover restore file is from a crash before its rename: the old
	// meta.db is intact, the snapshot will be installed again if needed.
	if ok, _ := vfs.Exists(fsys, path+restoreSuffix); ok {
		if err := fsys.Remove(path + restoreSuffix); err != nil {
			return nil, fmt.Errorf("meta: remove stale restore file: %w", err)
		}
	}
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	return &FSM{fs: fsys, path: path, log: log, db: db}, nil
}

const restoreSuffix = ".restore"

func openDB(path string) (*bolt.DB, error) {
	// A snapshot holds a read transaction while raft persists it; bbolt
	// cannot remap under an open reader, so a writer that grows the file
	// past the mapping would wait for the snapshot. Map 1 GiB of address
	// space up front so Apply never waits on a snapshot in practice.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, InitialMmapSize: 1 << 30})
	if err != nil {
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		v := m.Get(keyVersion)
		if v == nil {
			return m.Put(keyVersion, u64(FormatVersion))
		}
		ver, ok := getU64(v)
		if !ok {
			return &CorruptionError{File: path, Bucket: "meta", Key: "version", Err: errors.New("not 8 bytes")}
		}
		if ver > FormatVersion {
			return fmt.Errorf("%w: %s has version %d, this binary knows %d", ErrVersion, path, ver, FormatVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("meta: initialise %s: %w", path, err)
	}
	return db, nil
}

// Close closes the database. Raft must be shut down first.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}

// AppliedIndex is the raft index of the last command applied to the state.
func (f *FSM) AppliedIndex() uint64 {
	var idx uint64
	_ = f.View(func(r *Reader) error { idx = r.AppliedIndex(); return nil })
	return idx
}

// View runs fn in a read transaction of the current state.
func (f *FSM) View(fn func(*Reader) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return ErrClosed
	}
	return f.db.View(func(tx *bolt.Tx) error { return fn(&Reader{tx: tx, file: f.path}) })
}

var _ raft.BatchingFSM = (*FSM)(nil)

// Apply applies one raft entry; see ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies raft entries committed together in one bbolt
// transaction (one fsync for the batch, however many commands). Each
// command's result is a *Result, or nil for entries already applied
// before a restart and for non-command entries.
//
// A refused command changes nothing: every command checks all it refuses
// for before it writes (the writer methods keep this rule), so refused and
// applied commands can share the transaction.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	cmds := make([]*spb.MetaCommand, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		cmd := &spb.MetaCommand{}
		if err := proto.Unmarshal(l.Data, cmd); err != nil {
			f.log.Error("undecodable raft command", "index", l.Index, "err", err)
			out[i] = &Result{Err: apierr.Wrap(apierrInternal, err, "meta: raft entry %d does not decode", l.Index)}
			continue
		}
		if cmd.Version > CommandVersion {
			out[i] = &Result{Err: apierr.Wrap(apierrInternal, ErrVersion, "meta: raft entry %d has command version %d", l.Index, cmd.Version)}
			continue
		}
		cmds[i] = cmd
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	err := f.applyTx(logs, cmds, out)
	if errors.Is(err, errAbort) {
		// A command failed inside (a corrupt record, a failed write): run
		// each command alone so only that one is refused, with its error.
		for i := range logs {
			if err = f.applyTx(logs[i:i+1], cmds[i:i+1], out[i:i+1]); errors.Is(err, errAbort) {
				err = nil
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		// The state on disk could not be committed: continuing would let
		// this replica diverge from the others.
		f.log.Error("cannot apply raft commands", "first_index", logs[0].Index, "err", err)
		panic(fmt.Sprintf("meta: cannot commit raft entries from %d: %v", logs[0].Index, err))
	}
	return out
}

// errAbort rolls back a transaction in which a command failed with an
// internal error (the results in out say which).
var errAbort = errors.New("meta: command failed inside the transaction")

func (f *FSM) applyTx(logs []*raft.Log, cmds []*spb.MetaCommand, out []any) error {
	w := &writer{}
	defer func() { f.gens.bump(w.touched) }() // after the commit
	return f.db.Update(func(tx *bolt.Tx) error {
		mb := tx.Bucket(bucketMeta)
		applied, _ := getU64(mb.Get(keyApplied))
		last := applied
		w.Reader = Reader{tx: tx, file: f.path}
		for i, l := range logs {
			if l.Index != 0 && l.Index <= applied {
				out[i] = nil // replayed after a restart; already in the state
				continue
			}
			last = max(last, l.Index)
			if cmds[i] == nil {
				continue
			}
			res := w.apply(cmds[i])
			out[i] = res
			if res.Err != nil && apierr.CodeOf(res.Err) == apierrInternal {
				f.log.Error("raft command failed", "index", l.Index, "err", res.Err)
				return errAbort
			}
		}
		if last == applied {
			return nil
		}
		return mb.Put(keyApplied, u64(last))
	})
}

// Snapshot captures the current state in a read transaction; Persist
// writes it as a copy of the bbolt file.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, ErrClosed
	}
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("meta: begin snapshot: %w", err)
	}
	return &fsmSnapshot{tx: tx}, nil
}

type fsmSnapshot struct {
	tx   *bolt.Tx
	once sync.Once
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("meta: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.once.Do(func() { _ = s.tx.Rollback() }) }

// Restore replaces the whole state by a snapshot: it writes it beside
// meta.db, fsyncs it, checks it, and renames it over meta.db.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + restoreSuffix
	if err := f.writeRestoreFile(tmp, rc); err != nil {
		_ = f.fs.Remove(tmp)
		return err
	}
	// Check the snapshot before it replaces anything.
	check, err := openDB(tmp)
	if err != nil {
		_ = f.fs.Remove(tmp)
		return fmt.Errorf("meta: snapshot is not a usable database: %w", err)
	}
	if err := check.Close(); err != nil {
		return fmt.Errorf("meta: close checked snapshot: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db != nil {
		if err := f.db.Close(); err != nil {
			return fmt.Errorf("meta: close state for restore: %w", err)
		}
		f.db = nil
	}
	if err := f.fs.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("meta: install snapshot: %w", err)
	}
	if err := f.fs.SyncDir(filepath.Dir(f.path)); err != nil {
		return fmt.Errorf("meta: sync directory after restore: %w", err)
	}
	db, err := openDB(f.path)
	if err != nil {
		return err
	}
	f.db = db
	f.gens.reset()
	f.log.Info("restored metadata from snapshot", "file", f.path)
	return nil
}

func (f *FSM) writeRestoreFile(tmp string, r io.Reader) error {
	file, err := f.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("meta: create %s: %w", tmp, err)
	}
	if _, err := io.Copy(file, r); err != nil {
		_ = file.Close()
		return fmt.Errorf("meta: write %s: %w", tmp, err)
	}
	if err := file.Sync(); err != nil {
		_ = file.Close()
		return fmt.Errorf("meta: sync %s: %w", tmp, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("meta: close %s: %w", tmp, err)
	}
	return nil
}
