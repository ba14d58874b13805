package blockstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"bighive/storage/vfs"
)

// BlockID identifies a block. It is opaque to callers; String is 16 hex
// digits. IDs are never reused by a store (see doc.go).
type BlockID uint64

// String returns the ID as 16 lower-case hex digits.
func (id BlockID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// ParseBlockID parses the String form.
func ParseBlockID(s string) (BlockID, error) {
	var v uint64
	if len(s) != 16 {
		return 0, fmt.Errorf("%w: block id %q", ErrInvalidArgument, s)
	}
	if _, err := fmt.Sscanf(s, "%016x", &v); err != nil {
		return 0, fmt.Errorf("%w: block id %q", ErrInvalidArgument, s)
	}
	return BlockID(v), nil
}

// State is the life-cycle state of a WritableBlock:
// Clean → Dirty (first Append) → Finalized → Closed.
type State int

// WritableBlock states.
const (
	// Clean: created, nothing appended.
	Clean State = iota
	// Dirty: at least one Append.
	Dirty
	// Finalized: no more appends; data may still be unsynced.
	Finalized
	// Closed: committed (durable and visible) or aborted.
	Closed
)

func (s State) String() string {
	switch s {
	case Clean:
		return "CLEAN"
	case Dirty:
		return "DIRTY"
	case Finalized:
		return "FINALIZED"
	case Closed:
		return "CLOSED"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// WritableBlock is a block being written. It is used by one goroutine at a
// time. Nothing appended is durable or visible until Close (or the
// CommitCreatedBlocks of a transaction holding it) returns nil.
type WritableBlock interface {
	ID() BlockID
	// Append adds p at the end of the block.
	Append(p []byte) error
	// AppendV adds the buffers at the end of the block in one pwritev.
	AppendV(ps ...[]byte) error
	// Finalize ends appends; starts the async pre-flush when the mode says so.
	// In the log manager it also returns the block's container to the pool.
	Finalize() error
	// Close makes data and metadata durable, then the block visible: when it
	// returns nil the block survives a crash and OpenBlock finds it.
	Close() error
	// Abort discards the block; a block never closed is never visible.
	Abort() error
	// BytesAppended is the block's length so far.
	BytesAppended() int64
	State() State
}

// ReadableBlock is an open committed block. Its methods are safe for
// concurrent use. While it is open a deleted block's space is not freed.
type ReadableBlock interface {
	ID() BlockID
	Size() (int64, error)
	// ReadAt has io.ReaderAt semantics within the block.
	ReadAt(p []byte, off int64) (int, error)
	// ReadV fills each buffer in turn from off, exactly; a range past the
	// end fails with ErrOutOfRange and no partial guarantee.
	ReadV(off int64, ps ...[]byte) error
	// Close releases memory and handles only.
	Close() error
	MemoryFootprint() int64
}

// CreateBlockOptions are the per-block options of CreateBlock.
type CreateBlockOptions struct {
	// TabletID is the tablet the block belongs to. The FsManager of the next
	// layer places blocks by it (tablet directory groups); here it is
	// passed to the directory picker only.
	TabletID string
}

// Manager creates, opens and deletes blocks. All methods are safe for
// concurrent use.
type Manager interface {
	CreateBlock(opts CreateBlockOptions) (WritableBlock, error)
	// OpenBlock opens a committed block; errors.Is(err, ErrNotFound) for
	// unknown or deleted IDs.
	OpenBlock(id BlockID) (ReadableBlock, error)
	NewCreationTransaction() CreationTransaction
	NewDeletionTransaction() DeletionTransaction
	// AllBlockIDs lists the committed, undeleted blocks, in no order.
	AllBlockIDs() ([]BlockID, error)
	// NotifyBlockID tells the manager id is in use elsewhere: IDs it hands
	// out from now on are greater.
	NotifyBlockID(id BlockID)
	// Close waits for background work (pre-flushes, hole punches), makes
	// pending DELETE records durable and releases every handle.
	Close() error
}

// CreationTransaction commits many blocks together.
type CreationTransaction interface {
	// AddCreatedBlock adds a block of this manager, in any state but Closed.
	AddCreatedBlock(b WritableBlock)
	// CommitCreatedBlocks finalizes and closes every added block with one
	// data sync and one metadata sync per container, containers in
	// parallel. When it returns nil every block is durable and visible;
	// when it fails, blocks whose container committed may be visible, the
	// rest are aborted. A second call fails with ErrTransactionDone.
	CommitCreatedBlocks() error
}

// DeletionTransaction deletes many blocks together.
type DeletionTransaction interface {
	AddDeletedBlock(id BlockID)
	// CommitDeletedBlocks removes the blocks from the index at once
	// (OpenBlock fails with ErrNotFound) and logs their deletion. The
	// deletion is not durable when it returns: after a crash a deleted
	// block may reappear, intact (its space is only freed once its DELETE
	// record is durable). deleted lists the IDs removed; err joins the
	// failures (ErrNotFound for unknown IDs).
	CommitDeletedBlocks() (deleted []BlockID, err error)
}

// PreFlushMode says when written data is handed to the kernel for write-out
// ahead of the fdatasync of Close.
type PreFlushMode int

// Pre-flush modes.
const (
	// PreFlushFinalize starts write-out (sync_file_range WRITE) at Finalize,
	// asynchronously. The default.
	PreFlushFinalize PreFlushMode = iota
	// PreFlushClose starts write-out of every block of a commit before the
	// first fdatasync.
	PreFlushClose
	// PreFlushNever leaves write-out to fdatasync.
	PreFlushNever
)

// Kinds of Manager.
const (
	KindLog  = "log"
	KindFile = "file"
)

// Options configure Open. The zero value of every field but Dirs is a sane
// default.
type Options struct {
	// Kind is KindLog (default, "") or KindFile.
	Kind string
	// Dirs are the data directories, one per disk. Required. Created (with
	// a sync of their parent) when missing, unless ReadOnly.
	Dirs []string
	// FS is the filesystem every file operation goes through; nil means vfs.Default.
	FS vfs.FS
	// ReadOnly opens existing data only: nothing is created, deleted or
	// repaired, so another process may own the store meanwhile. A block it
	// commits after this Open is seen too: OpenBlock of a block the view
	// lacks reloads the view (new containers, records appended to known
	// ones, new block files) before it answers ErrNotFound. Deletions are
	// not seen.
	ReadOnly bool

	// MaxContainerSize is the size past which a log container is full
	// (default 10 GiB).
	MaxContainerSize int64
	// MaxBlocksPerContainer, if positive, also makes a container full.
	MaxBlocksPerContainer int64
	// PreallocateStep is the fallocate step of log containers' data files
	// (default 32 MiB; negative disables preallocation).
	PreallocateStep int64
	// PreFlush is the pre-flush mode (default PreFlushFinalize).
	PreFlush PreFlushMode
	// OpenWorkersPerDir bounds the containers replayed at once per
	// directory at Open and the background tasks (punching, pre-flush) per
	// directory (default 4).
	OpenWorkersPerDir int
	// CompactLiveRatio: repair rewrites the metadata of a full container
	// whose live/total block ratio is at most this (default 0.5).
	CompactLiveRatio float64
	// ExcessSpaceFraction: repair re-punches a full container whose data
	// file holds more than (1+fraction) × its aligned live bytes (default 0.1).
	ExcessSpaceFraction float64

	// OnIOError is called (from any goroutine, never under a lock of the
	// manager) with the directory and the error of every failed I/O,
	// before the FsManager decides whether the directory failed.
	OnIOError func(dir string, err error)
	// Logger receives start-up and repair logs (default slog.Default()).
	Logger *slog.Logger

	// MetadataDir is the root for the caller's metadata; it gets an
	// instance file too (default: the first of Dirs).
	MetadataDir string
	// TargetDirsPerTablet is the size of a new tablet's data dir group
	// (default 3).
	TargetDirsPerTablet int
	// ReservedBytes: a data dir with less free space is full. 0 means 1%
	// of its capacity; negative means no reserve.
	ReservedBytes int64
	// FreeSpaceRefresh is how long a directory's free space is cached
	// (default 10 s).
	FreeSpaceRefresh time.Duration
	// FreeSpace reports a directory's available and total bytes (default
	// statfs; an error means unknown, never full). A test seam.
	FreeSpace func(dir string) (avail, capacity int64, err error)
	// IsDiskFailure says whether an I/O error means the directory's disk
	// failed (default: EIO, ENODEV, ENXIO, EROFS, EUCLEAN; not ESTALE, a
	// stale handle of a file another host replaced on a shared file system).
	IsDiskFailure func(err error) bool
	// OnTabletsFailed is called once per directory that fails, with its
	// UUID, path and the tablets whose group includes it (the tserver
	// stops serving them). From any goroutine, never under a lock.
	OnTabletsFailed func(dirUUID, dir string, tabletIDs []string)
	// PlacementSeed seeds the power-of-two-choices placement (0: random).
	PlacementSeed uint64
	// Progress, if set, receives Open's progress.
	Progress *Progress
	// MaxOpenFiles is the capacity of the store's FileCache, through which
	// the log manager opens container files (0: 40% of RLIMIT_NOFILE, at
	// least 64; negative: no cache).
	MaxOpenFiles int
	// FileCacheExpiry is the sweep period of the store's FileCache
	// (default 60 s).
	FileCacheExpiry time.Duration
	// FileCache, if set, is used instead of a cache of the store's own
	// (shared by several stores; Close leaves it open).
	FileCache *FileCache
}

const (
	defaultMaxContainerSize = 10 << 30
	defaultPreallocateStep  = 32 << 20
	defaultWorkers          = 4
)

func (o Options) withDefaults() (Options, error) {
	if len(o.Dirs) == 0 {
		return o, fmt.Errorf("%w: no data directories", ErrInvalidArgument)
	}
	for _, d := range o.Dirs {
		if strings.TrimSpace(d) == "" {
			return o, fmt.Errorf("%w: empty data directory", ErrInvalidArgument)
		}
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Kind == "" {
		o.Kind = KindLog
	}
	if o.MaxContainerSize <= 0 {
		o.MaxContainerSize = defaultMaxContainerSize
	}
	if o.PreallocateStep == 0 {
		o.PreallocateStep = defaultPreallocateStep
	}
	if o.OpenWorkersPerDir <= 0 {
		o.OpenWorkersPerDir = defaultWorkers
	}
	if o.CompactLiveRatio == 0 {
		o.CompactLiveRatio = 0.5
	}
	if o.ExcessSpaceFraction == 0 {
		o.ExcessSpaceFraction = 0.1
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TargetDirsPerTablet <= 0 {
		o.TargetDirsPerTablet = 3
	}
	if o.FreeSpaceRefresh <= 0 {
		o.FreeSpaceRefresh = 10 * time.Second
	}
	if o.FreeSpace == nil {
		o.FreeSpace = statfsSpace
	}
	if o.MaxOpenFiles == 0 {
		o.MaxOpenFiles = defaultMaxOpenFiles()
	}
	if o.PreFlush < PreFlushFinalize || o.PreFlush > PreFlushNever {
		return o, fmt.Errorf("%w: pre-flush mode %d", ErrInvalidArgument, o.PreFlush)
	}
	return o, nil
}
