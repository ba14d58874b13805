package tsfile

import (
	"encoding/binary"
	"errors"
	"math"
)

// Bloom filter over row keys. Sized at BloomBitsPerKey bits per distinct row
// with BloomProbes probes (double hashing of one 64-bit hash), the expected
// false-positive rate is about 0.8 %.
const (
	BloomBitsPerKey = 10
	BloomProbes     = 7
)

func hashRow(row []byte) uint64 {
	// FNV-1a 64 with a murmur3 finaliser, so both halves are well mixed.
	h := uint64(14695981039346656037)
	for _, c := range row {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// bloom is an immutable filter: k (u32) then the bit array.
type bloom struct {
	k    uint32
	bits []byte
}

func buildBloom(hashes []uint64) []byte {
	nbits := len(hashes) * BloomBitsPerKey
	if nbits < 64 {
		nbits = 64
	}
	nbytes := (nbits + 7) / 8
	nbits = nbytes * 8
	out := make([]byte, 4+nbytes)
	binary.LittleEndian.PutUint32(out, BloomProbes)
	bits := out[4:]
	for _, h := range hashes {
		h1, h2 := uint32(h), uint32(h>>32)|1
		for i := uint32(0); i < BloomProbes; i++ {
			b := (h1 + i*h2) % uint32(nbits)
			bits[b/8] |= 1 << (b % 8)
		}
	}
	return out
}

var errBadBloom = errors.New("bad bloom filter")

func parseBloom(b []byte) (bloom, error) {
	if len(b) < 5 {
		return bloom{}, errBadBloom
	}
	k := binary.LittleEndian.Uint32(b)
	if k == 0 || k > 30 || len(b)-4 > math.MaxInt32/8 {
		return bloom{}, errBadBloom
	}
	return bloom{k: k, bits: b[4:]}, nil
}

func (f bloom) mayContain(row []byte) bool { return f.mayContainHash(hashRow(row)) }

func (f bloom) mayContainHash(h uint64) bool {
	nbits := uint32(len(f.bits) * 8)
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := uint32(0); i < f.k; i++ {
		b := (h1 + i*h2) % nbits
		if f.bits[b/8]&(1<<(b%8)) == 0 {
			return false
		}
	}
	return true
}
