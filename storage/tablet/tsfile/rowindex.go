package tsfile

import (
	"bytes"
	"encoding/binary"
	"sort"
	"unsafe"

	"bighive/storage/memstore"
	"bighive/storage/tablet/blockcache"
)

// A row index lists where each distinct row of a page starts, so that a
// seek into a page binary-searches it and decodes from the row's first
// entry, where without it a seek decodes every entry before its key (half
// a page on average: the largest part of a warm Get's CPU in the
// tserver's profile). The index is made from a cached page the second
// time a seek needs it (the first seek into a page read from the store
// decodes as before, so a page read once costs no more) and kept in the
// block cache with the page, charged to it (16 bytes per row).
//
// Its layout, in uint32 words: word 0 is the length of the prefix every
// row of the page shares, and the prefix's bytes follow, packed in as many
// words as they need; then four words per row: the byte offset of the
// row's first entry in the page body, that entry's number in the page, and
// the row's next 8 bytes after the shared prefix (zero-padded) as a
// big-endian uint64, high word first. The search compares the prefix and
// those words and loads a row's bytes from the page only when the words
// are equal: each load from the page is a cache miss of its own, and they
// were most of a search's cost.
const rowStride = 4

// indexPrefix returns a row index's shared prefix and its row words.
func indexPrefix(index []uint32) (prefix []byte, rows []uint32) {
	shared := int(index[0])
	words := (shared + 3) / 4
	if shared > 0 {
		prefix = unsafe.Slice((*byte)(unsafe.Pointer(&index[1])), shared)
	}
	return prefix, index[1+words:]
}

// rowIndex returns the row index of a page body of count entries, or nil
// if the body does not decode as count entries in row order: the caller
// then decodes it from the start, which reports the corruption with its
// offset.
func rowIndex(body []byte, count int, rowBlock bool) []uint32 {
	d := decoder{b: body}
	var e memstore.Entry
	var rows [][]byte
	var at []uint32 // offset and entry number of each row's first entry
	for n := 0; n < count; n++ {
		start := d.pos
		if !d.entry(&e, true, rowBlock) {
			return nil
		}
		if k := len(rows); k == 0 || !bytes.Equal(rows[k-1], e.Row) {
			if k > 0 && bytes.Compare(rows[k-1], e.Row) > 0 {
				return nil
			}
			rows = append(rows, e.Row)
			at = append(at, uint32(start), uint32(n))
		}
	}
	if !d.done() || len(rows) == 0 {
		return nil
	}
	first, last := rows[0], rows[len(rows)-1]
	shared := 0 // rows are sorted: what the first and last share, all do
	for shared < min(len(first), len(last)) && first[shared] == last[shared] {
		shared++
	}
	words := (shared + 3) / 4
	index := make([]uint32, 1+words, 1+words+rowStride*len(rows))
	index[0] = uint32(shared)
	prefix, _ := indexPrefix(index)
	copy(prefix, first[:shared])
	for i, row := range rows {
		w := rowWord(row[shared:])
		index = append(index, at[2*i], at[2*i+1], uint32(w>>32), uint32(w))
	}
	return index
}

// rowWord is b's first 8 bytes as a big-endian uint64, zero-padded. Of two
// rows with one prefix, the one whose word after it is greater is greater
// (at the first byte the words differ, the other row has a smaller byte or
// none); equal words decide nothing.
func rowWord(b []byte) uint64 {
	var w [8]byte
	copy(w[:], b)
	return binary.BigEndian.Uint64(w[:])
}

// searchRows returns the number of the first row of a row index at or
// after key (the number of rows if there is none).
func searchRows(body []byte, index []uint32, key []byte) int {
	prefix, rows := indexPrefix(index)
	n, shared := len(rows)/rowStride, len(prefix)
	switch bytes.Compare(key[:min(shared, len(key))], prefix) {
	case -1: // below the prefix, or a prefix of it: before every row
		return 0
	case 1:
		return n
	}
	kw := rowWord(key[shared:])
	return sort.Search(n, func(j int) bool {
		x := rows[rowStride*j:]
		if w := uint64(x[2])<<32 | uint64(x[3]); w != kw {
			return w > kw
		}
		return bytes.Compare(rowAt(body, x[0]), key) >= 0
	})
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
	j := searchRows(body, rows, key.Row)
	it.pageNo, it.rows = i, rows
	it.d = decoder{b: body, pos: len(body)}
	it.left = 0
	if _, words := indexPrefix(rows); rowStride*j < len(words) {
		x := words[rowStride*j:]
		it.d.pos = int(x[0])
		it.left = it.idx[i].count - int(x[1])
	}
	it.decode()
	return true
}
