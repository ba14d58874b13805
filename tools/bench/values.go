package bench

import (
	"encoding/binary"
	"math/rand/v2"
)

// valuePool is the size of the random pool the rows' values are cut
// from: large beside a TSFile page, so the values a page holds do not
// repeat each other and the page does not compress.
const valuePool = 4 << 20

// values are the rows' values: row i's is a size-byte slice of a random
// pool generated once from the seed, starting at an offset given by a
// hash of i. Neighbouring rows' values are unrelated, so a table of them
// is as large compressed as not, yet a write costs no allocation and no
// random generation. A value of another row equals row i's only if the
// two offsets are equal (about one chance in 4 million).
type values struct {
	pool []byte
	size int
}

func newValues(seed uint64, size int) values {
	pool := make([]byte, valuePool+size)
	rng := rand.New(rand.NewPCG(seed, 0))
	var w [8]byte
	for i := 0; i < len(pool); i += len(w) {
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(pool[i:], w[:])
	}
	return values{pool: pool, size: size}
}

// of is row i's value. It is shared: callers must not modify it.
func (v values) of(i int) []byte {
	off := fnv64(uint64(i)) % (valuePool + 1)
	return v.pool[off : off+uint64(v.size) : off+uint64(v.size)]
}
