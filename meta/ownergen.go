package meta

import (
	"sync"

	pb "bighive/proto/bighivepb"
)

// ownerGens counts, per tserver, the changes to the set of tablets the
// owners index names for it (a tablet added or removed, or its epoch or
// table changed). The leader's heartbeat compares a tserver's generation
// with the one of its last reconciliation and skips reading the tserver's
// tablets when nothing changed (master/tservers.go).
//
// It lives in memory only: every value is drawn from one counter that
// never repeats within the process, and Restore (or the FSM's opening)
// lifts every tserver to a new floor, so a generation read before and one
// read after any change differ.
type ownerGens struct {
	mu    sync.Mutex
	seq   uint64
	floor uint64
	gen   map[string]uint64
}

// bump gives each owner a new generation. It runs after the transaction
// that changed them committed (or rolled back: a spurious bump only costs
// a reconciliation), so a reader that reads the generation before it opens
// its read transaction sees the data of at least that generation.
func (g *ownerGens) bump(owners map[string]struct{}) {
	if len(owners) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen == nil {
		g.gen = map[string]uint64{}
	}
	for o := range owners {
		g.seq++
		g.gen[o] = g.seq
	}
}

// reset gives every tserver a new generation (the whole state changed).
func (g *ownerGens) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	g.floor = g.seq
	g.gen = map[string]uint64{}
}

func (g *ownerGens) get(uuid string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(g.gen[uuid], g.floor)
}

// OwnerGeneration is the generation of the tablets the owners index names
// for tserver uuid: it changes whenever a tablet is given to or taken from
// it or changes epoch or table there, and at a snapshot restore. Read it
// before the View whose owners it is compared with.
func (f *FSM) OwnerGeneration(uuid string) uint64 { return f.gens.get(uuid) }

// touch records that the owners index entries of owner change in this
// transaction.
func (w *writer) touch(owner string) {
	if w.touched == nil {
		w.touched = map[string]struct{}{}
	}
	w.touched[owner] = struct{}{}
}

// touchTablet records the owners whose owned set putTablet(old, t) changes
// as the heartbeat sees it (ownership, epoch, table).
func (w *writer) touchTablet(old, t *pb.TabletMeta) {
	if old != nil && ownerOf(old) == ownerOf(t) && old.Epoch == t.Epoch && old.Table == t.Table {
		return
	}
	if old != nil {
		w.touch(ownerOf(old))
	}
	w.touch(ownerOf(t))
}
