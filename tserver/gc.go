package tserver

import (
	"os"
	"runtime/debug"
)

// GC tuning. A tserver's heap is mostly long-lived data whose size its
// options bound: the write buffers (up to two per tablet, the active one
// and the standby being flushed, MemLimit together) and the block cache
// (CacheBytes). With Go's default GOGC of 100 the collector marks all of
// it again each time the server allocates as much as it holds, which under
// writes and reads is several times a second: 10 % of the tserver's CPU
// under Puts, and its Gets cost about a sixth more than with GOGC=400
// (`bighive bench`, means of three alternating runs on a loaded machine). So the tserver runs with
// a higher GOGC and a soft memory limit made from the same options: the
// heap may grow to GCPercent/100+1 times what is live, but the collector
// works harder as the process nears the limit, so memory stays bounded by
// the budget the operator already gave.

// DefaultGCPercent is the GOGC a tserver runs with unless told otherwise.
const DefaultGCPercent = 400

// gcHeadroom is the memory beyond the write buffers and the cache that the
// limit allows: requests in flight, TSFile builds, compactions, the runtime.
const gcHeadroom = 512 << 20

// MemoryLimit is the soft memory limit of a tserver with these options:
// two write buffers' worth (MemLimit for the active buffers and as much
// for the standbys being flushed), the block cache and gcHeadroom.
func MemoryLimit(memLimit, cacheBytes int64) int64 {
	return 2*memLimit + cacheBytes + gcHeadroom
}

// TuneGC sets the process's GOGC to gcPercent (0: DefaultGCPercent) and
// its soft memory limit to MemoryLimit, each unless the GOGC or GOMEMLIMIT
// environment variable sets it: an operator's explicit setting wins. A
// negative gcPercent leaves both as Go set them. It returns the GOGC and
// limit in force.
func TuneGC(gcPercent int, memLimit, cacheBytes int64) (int, int64) {
	if gcPercent == 0 {
		gcPercent = DefaultGCPercent
	}
	if gcPercent > 0 {
		if _, ok := os.LookupEnv("GOGC"); !ok {
			debug.SetGCPercent(gcPercent)
		}
		if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
			debug.SetMemoryLimit(MemoryLimit(memLimit, cacheBytes))
		}
	}
	cur := debug.SetGCPercent(-1)
	debug.SetGCPercent(cur)
	return cur, debug.SetMemoryLimit(-1)
}
