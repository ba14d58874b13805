package blockcache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"bighive/storage/blockstore"
)

// Priority is a table's cache class.
type Priority int32

// Priority classes, evicted Low first. The zero value is Medium.
const (
	Medium Priority = 0
	Low    Priority = -1
	High   Priority = 1
)

func (p Priority) String() string {
	switch p {
	case Low:
		return "Low"
	case Medium:
		return "Medium"
	case High:
		return "High"
	}
	return fmt.Sprintf("Priority(%d)", int32(p))
}

// ParsePriority parses "High", "Medium" or "Low" (case-sensitive).
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "High":
		return High, nil
	case "Medium", "":
		return Medium, nil
	case "Low":
		return Low, nil
	}
	return Medium, fmt.Errorf("blockcache: unknown priority %q", s)
}

// class maps a priority to its list index: 0 Low, 1 Medium, 2 High.
func class(p Priority) int {
	switch {
	case p < 0:
		return 0
	case p > 0:
		return 2
	}
	return 1
}

// Key names a cached page: a block, named by its store and ID (IDs of
// different stores collide), and an offset inside it.
type Key struct {
	Block  blockstore.BlockRef
	Offset int64
}

// EntryOverhead is the per-entry charge besides the value bytes.
const EntryOverhead = 96

// Options configures a Cache.
type Options struct {
	// Capacity is the memory bound in bytes (default 64 MiB).
	Capacity int64
	// Shards is the number of independently locked shards (default 16).
	Shards int
}

// Cache is a sharded, priority-aware cache evicting by CLOCK (an
// approximation of least recently used: a hit marks its page, and an
// eviction passes over marked pages once). It is safe for concurrent use.
type Cache struct {
	shards []shard
}

// Stats are the counters of a cache.
type Stats struct {
	Hits, Misses, Evictions, Inserts int64
	// Charge is the bytes currently charged; ByPriority splits it Low,
	// Medium, High.
	Charge     int64
	ByPriority [3]int64
	// EvictionsByPriority splits Evictions by the evicted page's class,
	// Low, Medium, High.
	EvictionsByPriority [3]int64
	Entries             int64
	Capacity            int64
}

// New returns an empty cache.
func New(opts Options) *Cache {
	if opts.Capacity <= 0 {
		opts.Capacity = 64 << 20
	}
	if opts.Shards <= 0 {
		opts.Shards = 16
	}
	c := &Cache{shards: make([]shard, opts.Shards)}
	per := opts.Capacity / int64(opts.Shards)
	for i := range c.shards {
		s := &c.shards[i]
		s.capacity = per
		s.m = make(map[Key]*entry)
		for j := range s.lists {
			s.lists[j].init()
		}
	}
	return c
}

// Owner is a set of pages sharing one priority, e.g. one table's.
type Owner struct {
	c    *Cache
	prio atomic.Int32
	name string
}

// NewOwner registers an owner with priority p.
func (c *Cache) NewOwner(name string, p Priority) *Owner {
	o := &Owner{c: c, name: name}
	o.prio.Store(int32(p))
	return o
}

// Priority is the owner's current priority.
func (o *Owner) Priority() Priority { return Priority(o.prio.Load()) }

// Name is the name given to NewOwner.
func (o *Owner) Name() string { return o.name }

// SetPriority changes the owner's priority and refiles its cached pages, so
// the next eviction already follows the new priority.
func (o *Owner) SetPriority(p Priority) {
	o.prio.Store(int32(p))
	for i := range o.c.shards {
		o.c.shards[i].refile(o)
	}
}

func (c *Cache) shard(k Key) *shard {
	h := uint64(k.Block.ID)*0x9E3779B97F4A7C15 ^ uint64(k.Offset)*0xC2B2AE3D27D4EB4F ^ fnv1a(k.Block.Store)
	h ^= h >> 29
	return &c.shards[h%uint64(len(c.shards))]
}

// fnv1a is FNV-1a-64 of s (shard choice only).
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Get returns the value cached under k and counts a hit or a miss.
func (c *Cache) Get(k Key) ([]byte, bool) {
	v, _, ok := c.GetIndexed(k)
	return v, ok
}

// GetIndexed is Get that also returns the index attached to the value
// (SetIndex), nil if none.
func (c *Cache) GetIndexed(k Key) ([]byte, []uint32, bool) {
	s := c.shard(k)
	s.mu.Lock()
	e, ok := s.m[k]
	if !ok {
		s.misses++
		s.mu.Unlock()
		return nil, nil, false
	}
	s.hits++
	// Marked, not moved: moving the entry to the front touched both
	// its neighbours, two cache misses on every hit (a tenth of a
	// tserver's CPU under warm Gets). The eviction gives it its
	// second chance (shard.victim). A page hit again is not written
	// again.
	if !e.ref {
		e.ref = true
	}
	value, index := e.value, e.index
	s.mu.Unlock()
	return value, index, true
}

// SetIndex attaches index to the value cached under k, if that is still
// value (the same bytes, not a value inserted since), and charges its
// bytes. An index is what its user derives from the value to search it
// (the TSFile reader: where each row of a page starts), made once per
// cached page rather than once per search.
func (c *Cache) SetIndex(k Key, value []byte, index []uint32) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok || e.index != nil || len(e.value) != len(value) || unsafe.SliceData(e.value) != unsafe.SliceData(value) {
		return
	}
	add := int64(4 * len(index))
	e.index, e.charge = index, e.charge+add
	s.charge += add
	s.byClass[e.list] += add
	s.evict()
}

// Contains reports whether k is cached, without counting or touching it.
func (c *Cache) Contains(k Key) bool {
	s := c.shard(k)
	s.mu.Lock()
	_, ok := s.m[k]
	s.mu.Unlock()
	return ok
}

// Insert caches value under k for owner o, replacing any value there, and
// evicts pages by priority and recency until the shard fits.
func (c *Cache) Insert(o *Owner, k Key, value []byte) {
	s := c.shard(k)
	charge := int64(len(value)) + EntryOverhead
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[k]; ok {
		s.unlink(old)
	}
	if charge > s.capacity {
		return
	}
	s.inserts++
	e := &entry{key: k, value: value, owner: o, charge: charge, list: class(o.Priority())}
	s.m[k] = e
	s.lists[e.list].pushFront(e)
	s.charge += charge
	s.byClass[e.list] += charge
	s.evict()
}

// evict drops pages by priority and recency until the shard fits.
func (s *shard) evict() {
	for s.charge > s.capacity {
		victim := s.victim()
		if victim == nil {
			break
		}
		s.unlink(victim)
		s.evictedBy[victim.list]++
	}
}

// Erase drops k if cached.
func (c *Cache) Erase(k Key) {
	s := c.shard(k)
	s.mu.Lock()
	if e, ok := s.m[k]; ok {
		s.unlink(e)
	}
	s.mu.Unlock()
}

// Stats returns the counters and the current charge.
func (c *Cache) Stats() Stats {
	var st Stats
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Hits += s.hits
		st.Misses += s.misses
		st.Inserts += s.inserts
		st.Charge += s.charge
		for j := range s.byClass {
			st.ByPriority[j] += s.byClass[j]
			st.EvictionsByPriority[j] += s.evictedBy[j]
			st.Evictions += s.evictedBy[j]
		}
		st.Entries += int64(len(s.m))
		st.Capacity += s.capacity
		s.mu.Unlock()
	}
	return st
}

type entry struct {
	key        Key
	value      []byte
	index      []uint32 // SetIndex; charged
	owner      *Owner
	charge     int64
	list       int
	ref        bool // hit since it was last at the front of its list
	prev, next *entry
}

// list is a circular doubly linked list with a sentinel; front = most recent.
type list struct{ root entry }

func (l *list) init() { l.root.prev, l.root.next = &l.root, &l.root }

func (l *list) pushFront(e *entry) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
}

func (l *list) remove(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (l *list) back() *entry {
	if l.root.prev == &l.root {
		return nil
	}
	return l.root.prev
}

// shard is one independently locked part of the cache. Its counters are
// kept under its lock, which every counted call takes anyway: counters of
// the whole cache were atomics that every Get on every core wrote, one
// cache line passed between the cores on each page lookup.
type shard struct {
	mu       sync.Mutex
	m        map[Key]*entry
	lists    [3]list // Low, Medium, High
	charge   int64
	byClass  [3]int64
	capacity int64

	hits, misses, inserts int64
	evictedBy             [3]int64 // by class: Low, Medium, High
}

// victim is the page to evict: the oldest of the lowest class, where an
// entry hit since it was last at the front goes back to the front, its
// mark cleared, instead (CLOCK's second chance). Each entry is moved at
// most once per call, so the walk ends within the list's length.
func (s *shard) victim() *entry {
	for i := range s.lists {
		l := &s.lists[i]
		for e := l.back(); e != nil; e = l.back() {
			if !e.ref {
				return e
			}
			e.ref = false
			l.remove(e)
			l.pushFront(e)
		}
	}
	return nil
}

func (s *shard) unlink(e *entry) {
	s.lists[e.list].remove(e)
	delete(s.m, e.key)
	s.charge -= e.charge
	s.byClass[e.list] -= e.charge
}

// refile moves o's entries to the list of o's current priority, keeping
// their relative recency.
func (s *shard) refile(o *Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	to := class(o.Priority())
	for i := range s.lists {
		if i == to {
			continue
		}
		l := &s.lists[i]
		// Walk from the oldest so pushFront keeps the order among them.
		for e := l.back(); e != nil; {
			prev := e.prev
			if prev == &l.root {
				prev = nil
			}
			if e.owner == o {
				l.remove(e)
				s.byClass[i] -= e.charge
				e.list = to
				s.lists[to].pushFront(e)
				s.byClass[to] += e.charge
			}
			e = prev
		}
	}
}
