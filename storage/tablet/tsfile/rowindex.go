package tsfile

import (
	"bytes"
	"sort"

	"bighive/storage/memstore"
	"bighive/storage/tablet/blockcache"
)

// A row index lists where each distinct row of a page starts: pairs of
// (byte offset of the row's first entry in the page body, that entry's
// number in the page). A seek into a page binary-searches it and decodes
// from the row's first entry, where without it a seek decodes every entry
// before its key (half a page on average: the largest part of a warm Get's
// CPU in the tserver's profile). The index is made from a cached page the
// second time a seek needs it (the first seek into a page read from the
// store decodes as before, so a page read once costs no more) and kept in
// the block cache with the page, charged to it (8 bytes per row).

// rowIndex returns the row index of a page body of count entries, or nil
// if the body does not decode as count entries in row order: the caller
// then decodes it from the start, which reports the corruption with its
// offset.
func rowIndex(body []byte, count int, rowBlock bool) []uint32 {
	d := decoder{b: body}
	var e memstore.Entry
	var prev []byte
	var rows []uint32
	for n := 0; n < count; n++ {
		start := d.pos
		if !d.entry(&e, true, rowBlock) {
			return nil
		}
		if n == 0 || !bytes.Equal(prev, e.Row) {
			if n > 0 && bytes.Compare(prev, e.Row) > 0 {
				return nil
			}
			rows = append(rows, uint32(start), uint32(n))
			prev = e.Row
		}
	}
	if !d.done() || len(rows) == 0 {
		return nil
	}
	return rows
}

// rowAt returns the row of the entry at off of body (a row index offset).
func rowAt(body []byte, off uint32) []byte {
	d := decoder{b: body, pos: int(off) + 1} // past the kind byte
	return d.bytes()
}

// seekIndexed positions it on page i at the first entry of the first row
// at or after key's row (past the page's end if there is none, so that the
// next decode moves on), through the page's row index, making the index
// if the page is cached without one. A page just read from the store, or
// one that does not decode whole, is decoded from its start instead. It
// returns false, having done nothing, when the reader has no cache.
func (it *famIter) seekIndexed(i int, key *memstore.Entry) bool {
	cache := it.r.opts.Cache
	if cache == nil {
		return false
	}
	body, rows := it.d.b, it.rows
	if it.pageNo != i || rows == nil || body == nil {
		var hit bool
		var err error
		body, rows, hit, err = it.r.page(it.m, it.idx, i, it.ahead)
		if err != nil {
			it.fail(err)
			return true
		}
		if !hit {
			// Read from the store: decode it from its start.
			it.startPage(i, body, nil)
			return true
		}
		if rows == nil {
			if rows = rowIndex(body, it.idx[i].count, it.m.family == ""); rows == nil {
				it.startPage(i, body, nil)
				return true
			}
			cache.SetIndex(blockcache.Key{Block: it.r.ref(it.m.data), Offset: it.idx[i].off}, body, rows)
		}
	}
	n := len(rows) / 2
	j := sort.Search(n, func(j int) bool { return bytes.Compare(rowAt(body, rows[2*j]), key.Row) >= 0 })
	it.pageNo, it.rows = i, rows
	it.d = decoder{b: body, pos: len(body)}
	it.left = 0
	if j < n {
		it.d.pos = int(rows[2*j])
		it.left = it.idx[i].count - int(rows[2*j+1])
	}
	it.decode()
	return true
}
