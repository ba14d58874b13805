package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"bighive/storage/blockstore"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// Named errors; check them with errors.Is.
var (
	// ErrStaleEpoch is returned by a Metadata whose stored epoch of a tablet
	// differs from the epoch an Update carries: another assignment won.
	ErrStaleEpoch = errors.New("checkpoint: stale tablet epoch")
	// ErrUnknownTablet is returned by a Metadata for a tablet it has no record of.
	ErrUnknownTablet = errors.New("checkpoint: unknown tablet")
	// ErrFlush wraps the failures of step 6 (a standby buffer that could
	// not be written as a TSFile; it is flushed by the next checkpoint).
	ErrFlush = errors.New("checkpoint: flush failed")
	// ErrCommit wraps a failure of step 7; the next checkpoint retries it.
	ErrCommit = errors.New("checkpoint: metadata commit failed")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("checkpoint: coordinator closed")
	// ErrFilesChanged is returned by a Metadata for an update whose file
	// list leaves out a recorded TSFile that is not in its Replaced run:
	// the update was computed from a list that is not the tablet's (an
	// ended load's, a closed engine's).
	ErrFilesChanged = errors.New("checkpoint: update drops TSFiles it did not replace")
	// ErrLoadEnded refuses a commit whose load of the tablet is no longer
	// the serving one (unloaded, loaded again, merged or split away).
	ErrLoadEnded = errors.New("checkpoint: the load of the tablet ended")
	// ErrNoLease: the tserver's lease is not valid, so no checkpoint,
	// compaction, commit or deletion runs (docs/design.md 'Fencing').
	ErrNoLease = errors.New("checkpoint: no valid lease")
)

// Tablet is one tablet's engine as the checkpoint, the compactor and the
// collectors see it. A tserver's *replica.Replica implements it (and
// Compactor, GarbageEstimator, Load and Replayer): the tablet's engine
// with the load's epoch and its one serving state. One value is one load
// of the tablet: the coordinator tells loads apart by comparing values (a
// pointer), so a tablet loaded again must be a new value, and
// Options.Tablets must return the same value for one load every time.
type Tablet interface {
	// ID is the tablet id, the one WAL records carry.
	ID() string
	// Epoch is the assignment epoch every metadata update carries.
	Epoch() int64
	// Serving reports whether the tablet is fully loaded (its TSFiles open
	// and its logs replayed) and not unloaded. Only serving tablets take
	// part in a checkpoint: a tablet still replaying must not be swapped,
	// or part of its replayed data would be covered by a position that no
	// longer lists the old logs. It is the write path's own serving state,
	// not a copy of it (package replica).
	Serving() bool
	// MemoryUsage is the bytes held by both write buffers.
	MemoryUsage() int64
	// SwapBuffers makes the active buffer the standby one and starts an
	// empty active buffer, when the active buffer holds data and the
	// standby is empty; it reports whether it swapped. It only touches
	// memory: the coordinator calls it under the exclusive state lock.
	SwapBuffers() bool
	// HasStandby reports whether a swapped buffer awaits InstallFlushed.
	HasStandby() bool
	// FlushStandby writes the standby buffer as one TSFile (all its blocks
	// in one creation transaction). When it returns the file is durable;
	// the read set is unchanged. Writes go on meanwhile.
	FlushStandby(ctx context.Context) (tsfile.Info, error)
	// InstallFlushed puts the flushed file in the read set and drops the
	// standby buffer; called after the metadata names the file.
	InstallFlushed(info tsfile.Info) error
	// Files is the tablet's read set of TSFiles, newest first.
	Files() []tsfile.Info
}

// Fenced is implemented by tablets whose writes can be fenced for good
// (*replica.Replica does, for a handoff). A checkpoint that finds a
// tablet fenced when it swaps its buffers, with no standby left over,
// flushes every write the tablet will ever have had here: its update
// says so (Update.LogClean), and the next owner replays no log for it.
type Fenced interface {
	// WritesFenced reports whether every later write is refused and
	// every write admitted before the fence has finished (it is in the
	// active buffer).
	WritesFenced() bool
}

// Load is implemented by tablets whose load can end while a background
// commit computed for it is in flight (*replica.Replica does). The
// coordinator holds the load from before a commit of it until after the
// install and the deletions that follow; ending the load (Replica.Close)
// waits for those and makes every later Hold fail, so nothing computed
// for an ended load is committed, installed or deleted after it ended.
type Load interface {
	// Hold keeps the load from ending until release is called; ok is
	// false (and release nil) when it ended already.
	Hold() (release func(), ok bool)
}

// Compactor is implemented by tablets that can compact their TSFiles
// (*tablet.Tablet does).
type Compactor interface {
	// CompactFiles merges the named files (their footers, adjacent in
	// Files) into one new TSFile in the tablet's own store and returns it
	// (Footer 0: nothing was left); the read set is unchanged. A major
	// compaction drops what tombstones, the GC rule and deleted families
	// hide, and the tombstones too when the run holds the oldest file.
	CompactFiles(ctx context.Context, footers []blockstore.BlockRef, major bool) (tsfile.Info, error)
	// InstallCompacted replaces the named files by info in the read set;
	// called after the metadata names info.
	InstallCompacted(replaced []blockstore.BlockRef, info tsfile.Info) error
}

// GarbageEstimator is implemented by tablets that estimate what a major
// compaction would drop (*tablet.Tablet does): the share of their files'
// entries, between 0 and 1.
type GarbageEstimator interface {
	GarbageShare() (float64, error)
}

// Roller is the WAL as step 4 needs it (*wal.Log implements it).
type Roller interface {
	// Roll switches the log to a new file and returns its position: every
	// record appended after Roll returns lies in that file or a later one.
	// It must do no I/O (it runs under the exclusive state lock).
	Roll() (wal.Position, error)
	// Position is the file records appended from now on go to.
	Position() wal.Position
}

// LogDeleter deletes log files (*wal.Log implements it).
type LogDeleter interface {
	// DeleteBefore deletes the files of pos.Prefix wholly before pos.
	DeleteBefore(pos wal.Position) ([]wal.Position, error)
}

// Update is what step 7 (or a compaction) records for one tablet.
type Update struct {
	TabletID string
	// Epoch fences the update: a Metadata refuses it with ErrStaleEpoch
	// when the tablet's epoch differs.
	Epoch int64
	// LogPositions, when non-nil, replaces the tablet's list of log
	// positions. nil leaves the list unchanged (a compaction).
	LogPositions []wal.Position
	// LogClean says that TSFiles hold every write the tablet took and
	// that it takes no more (its writes were fenced before the buffers
	// were swapped, see Fenced): the list of log positions becomes empty,
	// and LogPositions is ignored.
	LogClean bool
	// TSFiles is the tablet's full TSFile list, newest first (the order of
	// tablet.Options.Files); it replaces the recorded one.
	TSFiles []tsfile.Info
	// Replaced are the recorded files TSFiles may leave out (a
	// compaction's run). The list swap is a compare-and-swap: an update
	// that leaves out any other recorded file is refused with
	// ErrFilesChanged.
	Replaced []blockstore.BlockRef
	// Load is the load of the tablet the update was computed for (a
	// Metadata in a tserver refuses it with ErrLoadEnded when another
	// load serves the tablet); nil outside the coordinator.
	Load Tablet
}

// Drops returns the first file of recorded that u leaves out without
// naming it in Replaced, and whether there is one: the compare-and-swap
// every Metadata applies.
func (u *Update) Drops(recorded []blockstore.BlockRef) (blockstore.BlockRef, bool) {
	keep := make(map[blockstore.BlockRef]bool, len(u.TSFiles)+len(u.Replaced))
	for _, f := range u.TSFiles {
		keep[f.FooterRef()] = true
	}
	for _, r := range u.Replaced {
		keep[r] = true
	}
	for _, r := range recorded {
		if !keep[r] {
			return r, true
		}
	}
	return blockstore.BlockRef{}, false
}

// Metadata is the tablet metadata seam: the local bbolt implementation
// (package localmeta) for single-node use and tests, the master-backed one
// in tserver/.
type Metadata interface {
	// Commit records every update, atomically per tablet. It is called
	// only after the TSFiles' creation transactions committed (invariant 3
	// in docs/design.md, 'metadata names only committed TSFiles'). When it
	// returns nil the updates are durable. An update with a stale epoch
	// (ErrStaleEpoch), of an unknown tablet (ErrUnknownTablet), of an
	// ended load (ErrLoadEnded) or whose list drops a recorded file it
	// does not replace (ErrFilesChanged, see Update.Drops) is refused and
	// changes nothing for that tablet: the error is a *RefusedError naming
	// it, and implementations may refuse the whole batch. Any other error
	// leaves the outcome unknown.
	Commit(ctx context.Context, updates []Update) error
}

// References answers which log positions and blocks any tablet still
// needs. In the cluster the master answers, because tablets that moved to
// another tserver may still need this tserver's logs and blocks
// (docs/design.md 'Ownership crosses servers'); localmeta answers for single-node use.
type References interface {
	// LogPositions returns every position of prefix that any tablet's
	// metadata lists.
	LogPositions(ctx context.Context, prefix string) ([]wal.Position, error)
	// ReferencedBlocks returns the blocks any tablet's metadata names. It
	// must hold every such block of this tserver's store (Options.Store);
	// blocks of other stores may be left out.
	ReferencedBlocks(ctx context.Context) (map[blockstore.BlockRef]struct{}, error)
}

// SharedFiles is implemented by References whose files may be named by
// more than one holder: in the cluster a backup, and the tables restored
// from it, name the same TSFiles (docs/design.md 'Backups'). Before it
// deletes a compaction's replaced files itself, the coordinator asks which
// of them are shared and leaves those to the orphan pass, which deletes a
// block only once nothing names it. Asked after the compaction's commit, so
// the answer cannot grow: a backup records only files a tablet names.
type SharedFiles interface {
	// SharedFiles returns those of footers (footer blocks of this
	// tserver's store) that other metadata may still name.
	SharedFiles(ctx context.Context, footers []blockstore.BlockID) (map[blockstore.BlockID]bool, error)
}

// RefusedError is returned by a Metadata that refused a batch because of
// some of its tablets (stale epoch, unknown tablet) and committed nothing.
// The coordinator then commits the batch again without them.
type RefusedError struct {
	// Tablets maps each refused tablet id to its reason (wrapping
	// ErrStaleEpoch or ErrUnknownTablet).
	Tablets map[string]error
}

func (e *RefusedError) Error() string {
	var errs []error
	for _, err := range e.Tablets {
		errs = append(errs, err)
	}
	return fmt.Sprintf("checkpoint: metadata refused %d tablets: %v", len(e.Tablets), errors.Join(errs...))
}

// Unwrap returns the reasons.
func (e *RefusedError) Unwrap() []error {
	var errs []error
	for _, err := range e.Tablets {
		errs = append(errs, err)
	}
	return errs
}
