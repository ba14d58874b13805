package replica

import (
	"hash/maphash"
	"sync"
)

// rowStripes is the number of row locks of a replica. Rows hash onto
// them, so two rows share a lock with probability 1/rowStripes: a
// read-modify-write then waits for writes of a row it does not touch,
// never for the whole tablet.
const rowStripes = 256

// rowLocks are a replica's striped row locks. A plain write holds its
// row's stripe shared from before it enters the write path until its
// apply returned (so plain writes of one row still run in parallel and
// share group commits); a read-modify-write holds it exclusively from
// before its read until its own apply returned.
type rowLocks struct {
	seed    maphash.Seed
	stripes *[rowStripes]sync.RWMutex
}

func newRowLocks() rowLocks {
	return rowLocks{seed: maphash.MakeSeed(), stripes: new([rowStripes]sync.RWMutex)}
}

// of returns the lock of row.
func (l *rowLocks) of(row []byte) *sync.RWMutex {
	return &l.stripes[l.index(row)]
}

// index is the stripe number of row.
func (l *rowLocks) index(row []byte) int {
	return int(maphash.Bytes(l.seed, row) % rowStripes)
}
