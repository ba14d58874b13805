package checkpoint

import (
	"sync"
	"sync/atomic"

	"bighive/storage/tablet"
	"bighive/storage/wal"
)

// TabletLoad adapts a *tablet.Tablet to Tablet, Compactor and Replayer: it
// adds the assignment epoch and the serving flag the tablet does not keep.
//
// One TabletLoad is one load of the tablet (Load): Close ends it, after the
// background commits that hold it finished, and no later commit, install
// or deletion computed for it runs.
type TabletLoad struct {
	*tablet.Tablet
	epoch   int64
	serving atomic.Bool

	loadMu sync.RWMutex // held shared by Hold, exclusively by Close
	ended  bool         // guarded by loadMu
}

var (
	_ Tablet           = (*TabletLoad)(nil)
	_ Compactor        = (*TabletLoad)(nil)
	_ GarbageEstimator = (*TabletLoad)(nil)
	_ Replayer         = (*TabletLoad)(nil)
	_ Load             = (*TabletLoad)(nil)
)

// NewTabletLoad wraps t at epoch. It is not serving until SetServing(true).
func NewTabletLoad(t *tablet.Tablet, epoch int64) *TabletLoad {
	return &TabletLoad{Tablet: t, epoch: epoch}
}

// Epoch is the assignment epoch given to NewTabletLoad.
func (e *TabletLoad) Epoch() int64 { return e.epoch }

// Serving reports the flag SetServing set.
func (e *TabletLoad) Serving() bool { return e.serving.Load() }

// SetServing marks the tablet loaded (logs replayed) or not.
func (e *TabletLoad) SetServing(v bool) { e.serving.Store(v) }

// Hold keeps the load from ending (Close waits) until release is called;
// ok is false once Close began.
func (e *TabletLoad) Hold() (release func(), ok bool) {
	e.loadMu.RLock()
	if e.ended {
		e.loadMu.RUnlock()
		return nil, false
	}
	return e.loadMu.RUnlock, true
}

// Close ends the load: it waits for the commits holding it (Hold), makes
// every later Hold fail and stops serving, then closes the engine.
func (e *TabletLoad) Close() error {
	e.loadMu.Lock()
	e.ended = true
	e.serving.Store(false)
	e.loadMu.Unlock()
	return e.Tablet.Close()
}

// Replay applies a logged mutation to the active buffer with its logged
// write sequence and timestamps (so replaying twice is replaying once), and
// moves the tablet clock and write sequence past the record's: past its
// sequence, its op timestamps and the time of the append, so sequences and
// timestamps assigned later are greater than the replayed ones. A record
// whose last sequence is at or below the tablet's FlushedSeq is already in
// its TSFiles and is not applied again: a major compaction may have purged
// the tombstone that hides its cells (tablet package doc, "Compactions").
func (e *TabletLoad) Replay(rec *wal.Record) error {
	e.ObserveTimestamp(rec.Timestamp + int64(len(rec.Mutation.Ops)))
	e.ObserveMutation(&rec.Mutation)
	if rec.Mutation.LastSeq() <= e.FlushedSeq() {
		return nil
	}
	return e.Apply(&rec.Mutation)
}
