// Package blockcache is the tserver's read cache of TSFile pages: memory
// bounded, sharded, with three priority classes (docs/design.md 'Read path
// and read cache').
//
// Every cached page belongs to an Owner — in practice one per table — whose
// Priority (High, Medium, Low; default Medium) may change at run time. When a
// shard is over its share of the capacity it evicts the pages of Low owners
// first, then Medium, then High, each class by CLOCK (the oldest page not
// hit since it was last passed over): a High page is evicted
// only when the shard holds no Low or Medium page. Changing an owner's
// priority refiles its pages at once, so eviction always follows the
// current priorities. The priority is a hint kept in memory only; it is not
// stored as metadata.
//
// Invariants:
//   - A page is keyed by its block's blockstore.BlockRef (store UUID and
//     block ID) and its offset: block IDs are unique only inside one store,
//     and a tserver reads TSFiles of several stores through one cache.
//   - Charge (bytes of every cached value plus EntryOverhead per entry) of a
//     shard never exceeds the shard's capacity after Insert returns, except
//     for a single value larger than the shard, which is not cached.
//   - Values are immutable once inserted: callers must not modify a slice
//     they inserted or got.
//   - Hits, misses and evictions are counted exactly (per shard, under the
//     shard's lock; Stats sums the shards).
package blockcache
