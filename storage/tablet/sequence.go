package tablet

import (
	"context"
	"slices"

	"bighive/storage/mutation"
)

// Reads see a prefix of write-sequence order.
//
// A write's sequence is assigned before its WAL append and the write is
// applied after it, so concurrent writes of a tablet reach the buffer in
// any order. Without care a reader could see a write of sequence 6 before
// the delete of sequence 5 that was assigned first: a state that no order
// of the two writes produces. So the tablet keeps the sequences that
// BeginWrite assigned and whose writes have not finished (Apply or
// Abandon) in flight, and publishes a visible bound: every sequence at or
// below it has finished. A read takes the bound before it takes buffer
// snapshots and sees no buffer entry above it; Apply of a write in flight
// returns only once the bound has reached its sequence, so a write is
// visible when Write acknowledges it. TSFiles need no bound: the write path
// assigns sequences only under the checkpoint's shared state lock, so no
// write is in flight when a checkpoint swaps the buffers it will flush.

// seqState is guarded by Tablet.clockMu.
type seqState struct {
	inflight []uint64            // assigned by BeginWrite, not finished; ascending
	finished map[uint64]struct{} // members of inflight that finished out of order
}

// publishLocked recomputes the visible bound and wakes the writers waiting
// for it. The caller holds clockMu.
func (t *Tablet) publishLocked() {
	s := &t.seq
	for len(s.inflight) > 0 {
		if _, ok := s.finished[s.inflight[0]]; !ok {
			break
		}
		delete(s.finished, s.inflight[0])
		s.inflight = s.inflight[1:]
	}
	v := t.lastSeq
	if len(s.inflight) > 0 {
		v = s.inflight[0] - 1
	}
	if v != t.visible.Load() {
		t.visible.Store(v)
		t.seqCond.Broadcast()
	}
}

// BeginWrite is AssignTimestamps for the write path: it also keeps m.Seq in
// flight until Apply or Abandon finishes it, so that no read sees a write
// of higher sequence before this one (see the comment above). Every
// successful BeginWrite must be followed by exactly one Apply or Abandon.
func (t *Tablet) BeginWrite(m *mutation.RowMutation) error {
	return t.assign(m, true, false)
}

// BeginInternalWrite is BeginWrite for a write of the server itself that
// may name families absent from the schema: the delete-family tombstones
// that mask a deleted family's cells.
func (t *Tablet) BeginInternalWrite(m *mutation.RowMutation) error {
	return t.assign(m, true, true)
}

// WaitWrites waits until every write that had its sequence assigned when
// it was called has finished (applied or abandoned). After SetSchema, it
// is a barrier: no write validated against the old schema is still on its
// way to the buffer when it returns.
func (t *Tablet) WaitWrites(ctx context.Context) error {
	t.clockMu.Lock()
	seq := t.lastSeq
	t.clockMu.Unlock()
	if t.visible.Load() >= seq {
		return nil
	}
	done := make(chan struct{})
	go func() {
		t.waitVisible(seq)
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abandon finishes a write begun by BeginWrite that will not be applied
// (its WAL append failed): later sequences become visible without it.
func (t *Tablet) Abandon(m *mutation.RowMutation) { t.finish(m) }

// finish ends the write of m and reports whether it was in flight. A
// write that was not (replay, or AssignTimestamps) has its sequences
// observed instead.
func (t *Tablet) finish(m *mutation.RowMutation) bool {
	t.clockMu.Lock()
	defer t.clockMu.Unlock()
	s := &t.seq
	seq := m.Seq
	if _, ok := slices.BinarySearch(s.inflight, seq); !ok {
		t.lastSeq = max(t.lastSeq, m.LastSeq())

		t.publishLocked()
		return false
	}
	if s.finished == nil {
		s.finished = map[uint64]struct{}{}
	}
	s.finished[seq] = struct{}{}
	t.publishLocked()
	return true
}

// waitVisible waits until every write up to sequence seq has finished.
func (t *Tablet) waitVisible(seq uint64) {
	if t.visible.Load() >= seq {
		return
	}
	t.clockMu.Lock()
	for t.visible.Load() < seq {
		t.seqCond.Wait()
	}
	t.clockMu.Unlock()
}
