package blockcache

import (
	"sync"
	"sync/atomic"
	"testing"

	"bighive/storage/blockstore"
)

const page = 1000

// ref names block id of the one store these tests use.
func ref(id uint64) blockstore.BlockRef {
	return blockstore.BlockRef{Store: "s", ID: blockstore.BlockID(id)}
}

func fill(c *Cache, o *Owner, block uint64, n int) {
	for i := 0; i < n; i++ {
		c.Insert(o, Key{Block: ref(block), Offset: int64(i) * page}, make([]byte, page))
	}
}

func resident(c *Cache, block uint64, n int) int {
	k := 0
	for i := 0; i < n; i++ {
		if c.Contains(Key{Block: ref(block), Offset: int64(i) * page}) {
			k++
		}
	}
	return k
}

func TestEvictionFollowsPriority(t *testing.T) {
	const per = 100 // pages per table
	for _, shards := range []int{1, 8} {
		capacity := int64(3 * per * (page + EntryOverhead))
		if shards > 1 {
			capacity = capacity * 13 / 10 // slack for uneven hashing over shards
		}
		c := New(Options{Capacity: capacity, Shards: shards})
		low := c.NewOwner("low", Low)
		med := c.NewOwner("med", Medium)
		high := c.NewOwner("high", High)
		// Fill with High first, so plain LRU would evict High first.
		fill(c, high, 3, per)
		fill(c, med, 2, per)
		fill(c, low, 1, per)
		if st := c.Stats(); shards == 1 && st.Evictions != 0 {
			t.Fatalf("shards=%d: evictions while filling: %+v", shards, st)
		}
		// Another Medium table pushes out Low pages, never High.
		extra := per / 2
		if shards > 1 {
			extra = per
		}
		fill(c, med, 4, extra)
		if got := resident(c, 3, per); got != per {
			t.Fatalf("shards=%d: %d High pages left, want all %d", shards, got, per)
		}
		if shards == 1 {
			if got := resident(c, 1, per); got != per/2 {
				t.Fatalf("Low pages left = %d, want %d", got, per/2)
			}
			if got := resident(c, 2, per); got != per {
				t.Fatalf("Medium pages left = %d, want %d", got, per)
			}
			if st := c.Stats(); st.EvictionsByPriority != [3]int64{int64(per / 2), 0, 0} {
				t.Fatalf("evictions by priority (Low, Medium, High) = %v, want [%d 0 0]", st.EvictionsByPriority, per/2)
			}
		} else if resident(c, 1, per) == per {
			t.Fatalf("shards=%d: too many Low pages left: %d", shards, resident(c, 1, per))
		}
		// Enough High pages to push out all Low and then Medium pages.
		fill(c, high, 5, 2*per)
		if got := resident(c, 1, per); got != 0 {
			t.Fatalf("shards=%d: %d Low pages survive a High flood", shards, got)
		}
		if got := resident(c, 3, per); got != per {
			t.Fatalf("shards=%d: High pages evicted while Medium remain: %d left", shards, got)
		}
		st := c.Stats()
		if st.Charge > st.Capacity {
			t.Fatalf("shards=%d: charge %d over capacity %d", shards, st.Charge, st.Capacity)
		}
		if sum := st.EvictionsByPriority[0] + st.EvictionsByPriority[1] + st.EvictionsByPriority[2]; sum != st.Evictions || st.EvictionsByPriority[2] != 0 {
			t.Fatalf("shards=%d: evictions by priority %v do not add up to %d or include High", shards, st.EvictionsByPriority, st.Evictions)
		}
		if st.Evictions == 0 || st.Evictions != st.Inserts-st.Entries {
			t.Fatalf("shards=%d: counters inconsistent: %+v", shards, st)
		}
	}
}

func TestSetPriorityAtRunTime(t *testing.T) {
	const per = 50
	c := New(Options{Capacity: 2 * per * (page + EntryOverhead), Shards: 1})
	a := c.NewOwner("a", High)
	b := c.NewOwner("b", Low)
	fill(c, a, 1, per)
	fill(c, b, 2, per)
	// Demote a below b: a's pages go first now.
	a.SetPriority(Low)
	b.SetPriority(High)
	if a.Priority() != Low {
		t.Fatal("priority not changed")
	}
	st := c.Stats()
	if st.ByPriority[0] != per*(page+EntryOverhead) || st.ByPriority[2] != per*(page+EntryOverhead) {
		t.Fatalf("refile did not move charges: %+v", st.ByPriority)
	}
	fill(c, b, 3, per/2)
	if got := resident(c, 2, per); got != per {
		t.Fatalf("promoted owner lost pages: %d left", got)
	}
	if got := resident(c, 1, per); got != per/2 {
		t.Fatalf("demoted owner has %d pages, want %d", got, per/2)
	}
}

func TestCounters(t *testing.T) {
	c := New(Options{Capacity: 1 << 20})
	o := c.NewOwner("t", Medium)
	if _, ok := c.Get(Key{ref(1), 0}); ok {
		t.Fatal("hit in empty cache")
	}
	c.Insert(o, Key{ref(1), 0}, []byte("x"))
	if v, ok := c.Get(Key{ref(1), 0}); !ok || string(v) != "x" {
		t.Fatal("miss after insert")
	}
	c.Insert(o, Key{ref(1), 0}, []byte("y")) // replace
	c.Erase(Key{ref(1), 0})
	c.Insert(o, Key{ref(2), 0}, make([]byte, 2<<20)) // larger than a shard: not cached
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 1 || st.Entries != 0 || st.Charge != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConcurrent(t *testing.T) {
	c := New(Options{Capacity: 200 * (page + EntryOverhead), Shards: 4})
	owners := []*Owner{c.NewOwner("a", Low), c.NewOwner("b", Medium), c.NewOwner("c", High)}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				o := owners[(g+i)%3]
				k := Key{Block: ref(uint64(g)), Offset: int64(i % 300)}
				if _, ok := c.Get(k); !ok {
					c.Insert(o, k, make([]byte, page))
				}
				if i%500 == 0 {
					o.SetPriority(Priority(i%3 - 1))
				}
			}
		}()
	}
	wg.Wait()
	if st := c.Stats(); st.Charge > st.Capacity {
		t.Fatalf("over capacity: %+v", st)
	}
}

// TestKeysOfStoresDiffer: the same block ID in two block stores names two
// different blocks, so their pages must not share a cache entry.
func TestKeysOfStoresDiffer(t *testing.T) {
	c := New(Options{Capacity: 1 << 20})
	o := c.NewOwner("t", Medium)
	a := Key{Block: blockstore.BlockRef{Store: "store-a", ID: 7}, Offset: 0}
	b := Key{Block: blockstore.BlockRef{Store: "store-b", ID: 7}, Offset: 0}
	c.Insert(o, a, []byte("a"))
	if _, ok := c.Get(b); ok {
		t.Fatal("block 7 of store-b hit the page of block 7 of store-a")
	}
	c.Insert(o, b, []byte("b"))
	if v, _ := c.Get(a); string(v) != "a" {
		t.Fatalf("store-a page = %q, want a", v)
	}
	if v, _ := c.Get(b); string(v) != "b" {
		t.Fatalf("store-b page = %q, want b", v)
	}
}

// TestSetIndex checks that an index attaches only to the value it was made
// from, is returned with it, and is charged.
func TestSetIndex(t *testing.T) {
	c := New(Options{Capacity: 1 << 20, Shards: 1})
	o := c.NewOwner("t", Medium)
	k := Key{Offset: 7}
	v := []byte("page")
	c.Insert(o, k, v)
	before := c.Stats().Charge
	c.SetIndex(k, []byte("page"), []uint32{1, 2}) // other bytes, equal content
	if _, idx, _ := c.GetIndexed(k); idx != nil {
		t.Fatalf("index %v attached to a value not cached", idx)
	}
	c.SetIndex(k, v, []uint32{1, 2})
	got, idx, ok := c.GetIndexed(k)
	if !ok || string(got) != "page" || len(idx) != 2 || idx[1] != 2 {
		t.Fatalf("GetIndexed = %q, %v, %v", got, idx, ok)
	}
	if d := c.Stats().Charge - before; d != 8 {
		t.Fatalf("index charged %d bytes, want 8", d)
	}
	c.Insert(o, k, []byte("new page"))
	if _, idx, _ := c.GetIndexed(k); idx != nil {
		t.Fatalf("a replaced value kept the old index %v", idx)
	}
}

// TestHitGetsSecondChance: the oldest page, hit since it was inserted,
// outlives the pages inserted after it that were not hit; it goes once
// nothing else in its class was hit either.
func TestHitGetsSecondChance(t *testing.T) {
	const per = 10
	c := New(Options{Capacity: per * (page + EntryOverhead), Shards: 1})
	o := c.NewOwner("t", Medium)
	fill(c, o, 1, per) // full: pages 0..9, 0 the oldest
	hot := Key{Block: ref(1), Offset: 0}
	if _, ok := c.Get(hot); !ok {
		t.Fatal("page 0 not cached")
	}
	// One more page evicts one: page 1, the oldest not hit, not page 0.
	c.Insert(o, Key{Block: ref(2), Offset: 0}, make([]byte, page))
	if !c.Contains(hot) {
		t.Fatal("the hit page was evicted before older pages that were not hit")
	}
	if c.Contains(Key{Block: ref(1), Offset: page}) {
		t.Fatal("page 1, the oldest not hit, is still cached")
	}
	// Its mark is spent: inserting a full class's worth of new pages
	// without another hit evicts it with the rest.
	fill(c, o, 3, per)
	if c.Contains(hot) {
		t.Fatal("a page hit once survived a whole class of newer pages")
	}
	if got := resident(c, 3, per); got != per {
		t.Fatalf("%d of the newest %d pages cached", got, per)
	}
}

// pages is the number of pages hitCache holds.
const pages = 1 << 16

// hitCache returns a cache holding pages pages of 64 bytes, page i under
// block i % 97 at offset i.
func hitCache() *Cache {
	c := New(Options{Capacity: 2 * pages * (64 + EntryOverhead)}) // room for uneven shards
	o := c.NewOwner("t", Medium)
	for i := range pages {
		c.Insert(o, Key{Block: ref(uint64(i % 97)), Offset: int64(i)}, make([]byte, 64))
	}
	return c
}

// BenchmarkGetHit: hits spread over a cache of many pages, as warm Gets
// make them (each hit's entry is cold in the CPU's caches).
func BenchmarkGetHit(b *testing.B) {
	c := hitCache()
	x := uint64(1)
	b.ResetTimer()
	for range b.N {
		getRandom(b, c, &x)
	}
}

// getRandom gets the page a xorshift step of *x names, which must hit.
func getRandom(b *testing.B, c *Cache, x *uint64) {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	i := *x % pages
	if _, ok := c.Get(Key{Block: ref(i % 97), Offset: int64(i)}); !ok {
		b.Fatal("miss")
	}
}

// BenchmarkGetHitParallel is BenchmarkGetHit on every core at once, as
// the tserver's read workers make them: what one core writes on a hit
// (the counters, the entry's mark) is what the others must fetch back.
func BenchmarkGetHitParallel(b *testing.B) {
	c := hitCache()
	var seed atomic.Uint64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		x := seed.Add(0x9E3779B97F4A7C15) | 1
		for pb.Next() {
			getRandom(b, c, &x)
		}
	})
}
