package blockstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// idAllocator hands out block IDs from an atomic counter. After a restart
// it resumes above both the largest ID replayed and the wall clock in
// microseconds, so IDs of blocks whose records were compacted away, or of
// dead containers removed whole, are not reused either (unless the clock
// steps back and more than one ID per µs was issued).
type idAllocator struct{ last atomic.Uint64 }

func (a *idAllocator) init(maxSeen uint64) {
	now := uint64(time.Now().UnixMicro())
	a.raise(max(maxSeen, now))
}

// raise makes every later ID greater than v.
func (a *idAllocator) raise(v uint64) {
	for {
		cur := a.last.Load()
		if cur >= v || a.last.CompareAndSwap(cur, v) {
			return
		}
	}
}

// next returns an ID that inUse does not claim.
func (a *idAllocator) next(inUse func(BlockID) bool) BlockID {
	for {
		id := BlockID(a.last.Add(1))
		if id != 0 && !inUse(id) {
			return id
		}
	}
}

const mapShards = 16

// shardedMap is the in-memory block index, sharded by the low bits of the ID.
type shardedMap[V any] struct {
	shards [mapShards]struct {
		mu sync.RWMutex
		m  map[BlockID]V
	}
}

func newShardedMap[V any]() *shardedMap[V] {
	s := &shardedMap[V]{}
	for i := range s.shards {
		s.shards[i].m = map[BlockID]V{}
	}
	return s
}

func (s *shardedMap[V]) shard(id BlockID) *struct {
	mu sync.RWMutex
	m  map[BlockID]V
} {
	return &s.shards[uint64(id)%mapShards]
}

// get calls f with the value under the shard's read lock.
func (s *shardedMap[V]) get(id BlockID, f func(V)) bool {
	sh := s.shard(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	v, ok := sh.m[id]
	if ok && f != nil {
		f(v)
	}
	return ok
}

func (s *shardedMap[V]) has(id BlockID) bool { return s.get(id, nil) }

// insert adds id unless present; it reports whether it did.
func (s *shardedMap[V]) insert(id BlockID, v V) bool {
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[id]; ok {
		return false
	}
	sh.m[id] = v
	return true
}

func (s *shardedMap[V]) remove(id BlockID) (V, bool) {
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v, ok := sh.m[id]
	if ok {
		delete(sh.m, id)
	}
	return v, ok
}

func (s *shardedMap[V]) keys() []BlockID {
	var out []BlockID
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for id := range sh.m {
			out = append(out, id)
		}
		sh.mu.RUnlock()
	}
	return out
}

// pendingSet holds the IDs of blocks being written, for the in-use check.
type pendingSet struct {
	mu sync.Mutex
	m  map[BlockID]struct{}
}

func (p *pendingSet) add(id BlockID) {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[BlockID]struct{}{}
	}
	p.m[id] = struct{}{}
	p.mu.Unlock()
}

func (p *pendingSet) del(id BlockID) {
	p.mu.Lock()
	delete(p.m, id)
	p.mu.Unlock()
}

func (p *pendingSet) has(id BlockID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.m[id]
	return ok
}
