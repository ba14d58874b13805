package rawalloc

import (
	"strings"
	"unsafe"
)

// Bytes returns a slice of length and capacity n whose contents are
// unspecified (see the package invariants). It panics if n is negative.
//
// strings.Builder is the standard library's one allocation of bytes that
// are not cleared (its Grow takes memory it will overwrite before anyone
// reads it); Bytes takes a builder's buffer as a slice. The builder and
// its string are dropped at once, so the memory has no other owner.
func Bytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	var b strings.Builder
	b.Grow(n)
	// One byte written so that the string has a data pointer: the start
	// of an allocation of at least n bytes.
	b.WriteByte(0)
	s := b.String()
	return unsafe.Slice(unsafe.StringData(s), n)
}
