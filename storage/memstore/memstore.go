package memstore

import (
	"bytes"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

const maxHeight = 20

// EntryOverhead is the fixed per-entry cost MemoryUsage charges besides the
// key and value bytes and the tower: the skiplist node and its Entry.
const EntryOverhead = int64(unsafe.Sizeof(node{}) + unsafe.Sizeof(Entry{}))

const towerSlotSize = int64(unsafe.Sizeof(atomic.Pointer[node]{}))

// A node and its tower are one piece of a slab (slabs.node), and the entry
// is an allocation of its own: a search step reads only the node (its key
// and tower, 40 bytes for 3 nodes in 4), so the nodes a search visits are
// packed densely and the upper levels of the list stay in the CPU's
// caches (a node holding its entry was 3 times as large, and the search
// missed the cache at nearly every step: a fifth of the tserver's CPU
// under random Puts).
type node struct {
	key rowPrefix // of e.Row: decides most comparisons without loading the row
	seq uint64
	e   *Entry
	// The tower follows in memory: every node is the first field of a
	// node1, node2, node4, node8 or nodeMax, whose array t is the tower
	// (checked by TestTowerFollowsNode). tower(l) is its slot l, for l
	// below the node's height; no slice header per node, so a node of
	// height 1 takes 40 bytes and more of them share a cache line.
}

// tower returns slot l of n's tower; l must be below n's height.
func (n *node) tower(l int) *atomic.Pointer[node] {
	return (*atomic.Pointer[node])(unsafe.Add(unsafe.Pointer(n), nodeSize+uintptr(l)*uintptr(towerSlotSize)))
}

const nodeSize = unsafe.Sizeof(node{})

// Nodes with towers of 1, 2, 4, 8 and maxHeight slots: slabs.node takes
// the smallest that holds the height (3 of 4 nodes have height 1).
type (
	node1 struct {
		n node
		t [1]atomic.Pointer[node]
	}
	node2 struct {
		n node
		t [2]atomic.Pointer[node]
	}
	node4 struct {
		n node
		t [4]atomic.Pointer[node]
	}
	node8 struct {
		n node
		t [8]atomic.Pointer[node]
	}
	nodeMax struct {
		n node
		t [maxHeight]atomic.Pointer[node]
	}
)

// slabs hands out a Memstore's nodes from arrays of nodeSlab nodes of each
// tower size, so that the nodes of one buffer lie together in memory, apart
// from their entries and values and from the process's other small
// objects. A search visits about 30 nodes; packed, more of them share cache
// lines and pages with nodes a search visited before. Only the writer
// (under Memstore.mu) uses it. A slab stays allocated while any of its
// nodes is referenced: as long as the Memstore.
type slabs struct {
	s1 []node1
	s2 []node2
	s4 []node4
	s8 []node8
}

// nodeSlab is the number of nodes of one size allocated at once.
const nodeSlab = 256

// take returns the next free element of *slab, allocating a new slab when
// it is used up.
func take[T any](slab *[]T) *T {
	if len(*slab) == 0 {
		*slab = make([]T, nodeSlab)
	}
	x := &(*slab)[0]
	*slab = (*slab)[1:]
	return x
}

// node returns a node with a tower of at least h slots, and the number of
// slots (h rounded up to 1, 2, 4, 8 or maxHeight).
func (s *slabs) node(h int) (*node, int) {
	switch {
	case h <= 1:
		x := take(&s.s1)
		return &x.n, len(x.t)
	case h <= 2:
		x := take(&s.s2)
		return &x.n, len(x.t)
	case h <= 4:
		x := take(&s.s4)
		return &x.n, len(x.t)
	case h <= 8:
		x := take(&s.s8)
		return &x.n, len(x.t)
	default:
		x := &nodeMax{}
		return &x.n, len(x.t)
	}
}

// Memstore is a sorted write buffer. Apply may be called from one goroutine
// at a time per Memstore (it serialises callers); iterators and the
// accessors are safe for concurrent use with Apply.
type Memstore struct {
	mu     sync.Mutex // serialises writers
	slabs  slabs      // the writer's node allocator
	head   *node
	height atomic.Int32
	rnd    uint64

	published atomic.Uint64 // highest fully linked batch
	mem       atomic.Int64
	count     atomic.Int64
}

// New returns an empty Memstore.
func New() *Memstore {
	head := &(&nodeMax{}).n
	m := &Memstore{head: head, rnd: 0x9E3779B97F4A7C15}
	m.height.Store(1)
	return m
}

// MemoryUsage is the exact byte count described in the package doc.
func (m *Memstore) MemoryUsage() int64 { return m.mem.Load() }

// Len is the number of linked entries, overwritten ones included.
func (m *Memstore) Len() int64 { return m.count.Load() }

// Empty reports whether nothing was applied.
func (m *Memstore) Empty() bool { return m.count.Load() == 0 }

func (m *Memstore) randomHeight() int {
	h := 1
	for h < maxHeight {
		m.rnd ^= m.rnd << 13
		m.rnd ^= m.rnd >> 7
		m.rnd ^= m.rnd << 17
		if m.rnd&3 != 0 {
			break
		}
		h++
	}
	return h
}

// Apply copies the entries and links them as one batch: readers see all of
// them or none. It holds no reference to entries after it returns.
func (m *Memstore) Apply(entries []Entry) {
	if len(entries) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seq := m.published.Load() + 1
	var prev [maxHeight]*node
	for i := range entries {
		m.insert(&entries[i], seq, &prev)
	}
	m.published.Store(seq)
}

func (m *Memstore) insert(src *Entry, seq uint64, prev *[maxHeight]*node) {
	// One allocation for the byte fields, family included (the string
	// is made over bytes that are never written again).
	buf := make([]byte, len(src.Row)+len(src.Family)+len(src.Qualifier)+len(src.Value))
	n := copy(buf, src.Row)
	row := buf[:n:n]
	f := copy(buf[n:], src.Family)
	var family string
	if f > 0 {
		family = unsafe.String(&buf[n], f)
	}
	n += f
	q := copy(buf[n:], src.Qualifier)
	qual := buf[n : n+q : n+q]
	copy(buf[n+q:], src.Value)
	val := buf[n+q:]
	h := m.randomHeight()
	nd, slots := m.slabs.node(h)
	nd.key, nd.seq = prefixOf(row), seq
	nd.e = &Entry{Row: row, Family: family, Qualifier: qual, Timestamp: src.Timestamp, End: src.End, Seq: src.Seq, Kind: src.Kind, Value: val}
	if len(src.Qualifier) == 0 {
		nd.e.Qualifier = nil
	}
	if len(src.Value) == 0 {
		nd.e.Value = nil
	}
	m.findPrev(nd, prev)
	if cur := int(m.height.Load()); h > cur {
		for l := cur; l < h; l++ {
			prev[l] = m.head
		}
		m.height.Store(int32(h))
	}
	// Link bottom up: a reader that finds the node at level l can follow
	// its pointers at every level below.
	for l := 0; l < h; l++ {
		nd.tower(l).Store(prev[l].tower(l).Load())
		prev[l].tower(l).Store(nd)
	}
	m.mem.Add(EntryOverhead + int64(slots)*towerSlotSize + int64(len(buf)))
	m.count.Add(1)
}

// less orders nodes: entry order (key, then higher Seq first), then newer
// batch first (two ops of one mutation on one key: the later op wins).
func less(a *node, b *node) bool {
	c := compareNode(a, b.e, b.key)
	if c != 0 {
		return c < 0
	}
	return a.seq > b.seq
}

// compareNode is Compare(a.e, e), where key is e.Row's prefix.
func compareNode(a *node, e *Entry, key rowPrefix) int {
	if c := a.key.compare(key); c != 0 {
		return c
	}
	return Compare(a.e, e)
}

// compareNodeKey is CompareKey(a.e, e), where key is e.Row's prefix.
func compareNodeKey(a *node, e *Entry, key rowPrefix) int {
	if c := a.key.compare(key); c != 0 {
		return c
	}
	return CompareKey(a.e, e)
}

// findPrev fills prev[l] with the last node at level l that sorts before nd.
func (m *Memstore) findPrev(nd *node, prev *[maxHeight]*node) {
	x := m.head
	for l := int(m.height.Load()) - 1; l >= 0; l-- {
		for {
			nx := x.tower(l).Load()
			if nx == nil || !less(nx, nd) {
				break
			}
			x = nx
		}
		prev[l] = x
	}
}

// seekGE returns the first node whose key is >= key's (CompareKey: any
// Seq, any batch), so it never lands inside the versions of one key.
func (m *Memstore) seekGE(key *Entry) *node {
	x := m.head
	kp := prefixOf(key.Row)
	for l := int(m.height.Load()) - 1; l >= 0; l-- {
		for {
			nx := x.tower(l).Load()
			if nx == nil || compareNodeKey(nx, key, kp) >= 0 {
				break
			}
			x = nx
		}
	}
	return x.tower(0).Load()
}

// NewIterator returns a snapshot iterator: it sees the batches published
// before the call and none after. It is not positioned; call First or
// SeekGE. An iterator is for one goroutine.
func (m *Memstore) NewIterator() Iterator {
	return m.NewIteratorAt(math.MaxUint64)
}

// NewIteratorAt is NewIterator that also skips every entry whose Seq (the
// write sequence of its op) is above maxSeq: of a key whose newest
// write is above it, the iterator shows the newest write at or below it.
// The tablet reads through it so that a reader never sees a write before
// the writes of lower sequence still in flight.
func (m *Memstore) NewIteratorAt(maxSeq uint64) Iterator {
	return &iter{m: m, snap: m.published.Load(), maxSeq: maxSeq}
}

type iter struct {
	m      *Memstore
	snap   uint64
	maxSeq uint64
	cur    *node
}

// settle moves forward from n to the first visible node and returns it.
// Without a sequence bound (a flush's walk) it reads only the nodes, not
// their entries.
func (it *iter) settle(n *node) *node {
	if it.maxSeq == math.MaxUint64 {
		for n != nil && n.seq > it.snap {
			n = n.tower(0).Load()
		}
		return n
	}
	for n != nil && (n.seq > it.snap || n.e.Seq > it.maxSeq) {
		n = n.tower(0).Load()
	}
	return n
}

func (it *iter) SeekGE(key *Entry) { it.cur = it.settle(it.m.seekGE(key)) }
func (it *iter) First()            { it.cur = it.settle(it.m.head.tower(0).Load()) }
func (it *iter) Valid() bool       { return it.cur != nil }
func (it *iter) Entry() *Entry     { return it.cur.e }
func (it *iter) Err() error        { return nil }
func (it *iter) Close() error      { it.cur = nil; return nil }

// Next skips the other entries of the current key (overwritten writes:
// they have a lower Seq, or the same Seq and an older batch).
// A node of another row prefix is another key: that is decided on the
// nodes, without loading the entries.
func (it *iter) Next() {
	c := it.cur
	n := it.settle(c.tower(0).Load())
	for n != nil && n.key == c.key && CompareKey(n.e, c.e) == 0 {
		n = it.settle(n.tower(0).Load())
	}
	it.cur = n
}

// lastBefore returns the last node whose row is below bound (nil: the last
// node), or nil: a predecessor search from the head, top level down.
func (m *Memstore) lastBefore(bound []byte) *node {
	x := m.head
	var key *Entry
	var kp rowPrefix
	if bound != nil {
		key = RowStart(bound)
		kp = prefixOf(bound)
	}
	for l := int(m.height.Load()) - 1; l >= 0; l-- {
		for {
			nx := x.tower(l).Load()
			if nx == nil || key != nil && compareNodeKey(nx, key, kp) >= 0 {
				break
			}
			x = nx
		}
	}
	if x == m.head {
		return nil
	}
	return x
}

// LastRowBefore implements RowFinder in O(log n). Of the rows below bound
// it skips those with no entry the iterator sees.
func (it *iter) LastRowBefore(bound []byte) ([]byte, bool, error) {
	for {
		n := it.m.lastBefore(bound)
		if n == nil {
			return nil, false, nil
		}
		row := n.e.Row
		if n.seq <= it.snap && n.e.Seq <= it.maxSeq {
			return bytes.Clone(row), true, nil
		}
		// The row's first visible entry, if any: entries of one row are
		// contiguous, so settle from its start stays in it or passes it.
		if v := it.settle(it.m.seekGE(RowStart(row))); v != nil && bytes.Equal(v.e.Row, row) {
			return bytes.Clone(row), true, nil
		}
		bound = row
	}
}
