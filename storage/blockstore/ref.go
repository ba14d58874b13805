package blockstore

// BlockRef names a block across block stores: the UUID of the store that
// holds it and its ID there. A BlockID alone is unique only inside its own
// store (every store counts IDs from its own clock), so wherever a block
// may belong to another store — a tablet's metadata, a cache key, a
// compaction's delete list, garbage collection — it is named by a BlockRef,
// and a deletion goes only to the store Store names.
type BlockRef struct {
	// Store is the UUID naming the block store in tablet metadata.
	Store string
	// ID is the block's ID inside Store.
	ID BlockID
}

// String returns "<store>/<16 hex id>".
func (r BlockRef) String() string { return r.Store + "/" + r.ID.String() }

// Refs returns the BlockRefs of ids, all in store.
func Refs(store string, ids []BlockID) []BlockRef {
	out := make([]BlockRef, len(ids))
	for i, id := range ids {
		out[i] = BlockRef{Store: store, ID: id}
	}
	return out
}
