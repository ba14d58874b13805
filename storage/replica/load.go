package replica

import (
	"fmt"

	"bighive/storage/checkpoint"
	"bighive/storage/split"
	"bighive/storage/wal"
)

// The states of a load (doc.go, "One object, one serving state"). A
// replica moves only forward: loading → serving → stopped, or loading →
// stopped; stopped is final.
const (
	loading int32 = iota // opened, replaying its logs: no reads, no writes
	serving              // takes reads and writes
	stopped              // unloaded, or its load failed: never serves again
)

// The replica is the tablet as the checkpoint coordinator, recovery and
// splits see it: one value per load.
var (
	_ checkpoint.Tablet           = (*Replica)(nil)
	_ checkpoint.Compactor        = (*Replica)(nil)
	_ checkpoint.GarbageEstimator = (*Replica)(nil)
	_ checkpoint.Load             = (*Replica)(nil)
	_ checkpoint.Replayer         = (*Replica)(nil)
	_ split.Tablet                = (*Replica)(nil)
)

// Serve makes a loaded replica serve (its logs replayed, its log position
// in the tablet's metadata). It reports false, and the replica never
// serves, when it stopped first (unloaded while it loaded).
func (r *Replica) Serve() bool { return r.state.CompareAndSwap(loading, serving) }

// Serving reports whether the replica takes reads and writes. It is the
// only serving flag of the tablet: the checkpoint takes part only with a
// serving replica, and compactions only compact serving ones.
func (r *Replica) Serving() bool { return r.state.Load() == serving }

// Stop stops serving, for good, and waits for the writes in flight: when it
// returns, every write admitted before has returned from its apply, and
// every later one fails with ErrNotServing. It does not wait for the
// background commits holding the load (Close does). It reports whether
// this call stopped the replica (false: an earlier one did).
func (r *Replica) Stop() (first bool) {
	first = r.state.Swap(stopped) != stopped
	// A write holds ops shared from before its state check to after its
	// apply, so this waits for every write that saw the replica serving.
	r.ops.Lock()
	r.ops.Unlock()
	return first
}

// FenceWrites refuses every later write with ErrNotServing and waits for
// the writes in flight, as Stop does, but the replica goes on serving
// reads and stays a checkpoint's participant: a tablet handed to another
// tserver is flushed once more after it, so that its next owner replays
// nothing (tserver's release). Only Stop follows it.
func (r *Replica) FenceWrites() {
	r.fenced.Store(true)
	r.ops.Lock()
	r.ops.Unlock()
	r.fenceDone.Store(true)
}

// WritesFenced reports whether FenceWrites returned: every later write is
// refused and every earlier one has finished (checkpoint.Fenced).
func (r *Replica) WritesFenced() bool { return r.fenceDone.Load() }

// admissible is a write's state check (step 3); the caller holds ops
// shared.
func (r *Replica) admissible() error {
	if r.state.Load() != serving {
		return fmt.Errorf("%w: tablet %s is not served by %s", ErrNotServing, r.o.ID, r.o.Server)
	}
	if r.fenced.Load() {
		return fmt.Errorf("%w: tablet %s is being handed from %s to another tserver", ErrNotServing, r.o.ID, r.o.Server)
	}
	return nil
}

// readable is a read's state check.
func (r *Replica) readable() error {
	if r.state.Load() != serving {
		return fmt.Errorf("%w: tablet %s", ErrNotServing, r.o.ID)
	}
	return nil
}

// Hold keeps the load from ending (Close waits) until release is called.
// ok is false, and release nil, unless the replica serves: a commit
// computed for a load that is not serving any more is refused
// (checkpoint.ErrLoadEnded).
func (r *Replica) Hold() (release func(), ok bool) {
	r.loadMu.RLock()
	if r.closed || r.state.Load() != serving {
		r.loadMu.RUnlock()
		return nil, false
	}
	return r.loadMu.RUnlock, true
}

// Close ends the load: it stops serving (Stop), waits for the background
// commits that hold the load (Hold) and makes every later Hold fail, then
// closes the engine. Nothing computed for the load commits, installs or
// deletes after Close returned. Calls after the first return nil.
func (r *Replica) Close() error {
	r.Stop()
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return r.o.Tablet.Close()
}

// Replay applies one logged record of the tablet (from its log, a recovery
// file or a child log) while the replica loads (tablet.Tablet.Replay:
// idempotent, and a record the TSFiles hold is skipped). Once the replica
// serves or stopped, Replay refuses: a served tablet changes only through
// the write path.
func (r *Replica) Replay(rec *wal.Record) error {
	switch r.state.Load() {
	case loading:
		return r.o.Tablet.Replay(&rec.Mutation, rec.Timestamp)
	case stopped:
		return fmt.Errorf("%w: tablet %s stopped while it loaded", ErrNotServing, r.o.ID)
	}
	return fmt.Errorf("replica: tablet %s serves already; a replayed record would bypass the write path", r.o.ID)
}
