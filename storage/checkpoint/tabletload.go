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

// Replay applies a logged record to the tablet (tablet.Tablet.Replay).
func (e *TabletLoad) Replay(rec *wal.Record) error {
	return e.Tablet.Replay(&rec.Mutation, rec.Timestamp)
}
