package tsfile

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"bighive/internal/rawalloc"
	"bighive/storage/blockstore"
	"bighive/storage/memstore"
	"bighive/storage/tablet/blockcache"
)

// ReaderOptions configures Open.
type ReaderOptions struct {
	// Cache holds data pages; nil means no caching.
	Cache *blockcache.Cache
	// Owner is the cache owner (the table) pages are charged to. Required
	// when Cache is set.
	Owner *blockcache.Owner
	// ReadAhead is how many bytes of pages a scan iterator reads in one
	// I/O when it misses the cache (default DefaultReadAhead; a value no
	// bigger than a page disables read-ahead).
	ReadAhead int
}

// Stats count a reader's I/O.
type Stats struct {
	PagesRead      int64 // pages read from the block store
	ReadAheadPages int64 // of those, pages read ahead of a scan
	BloomChecks    int64
	BloomNegatives int64 // point reads the bloom filter answered "absent"
	// SeeksInPage counts seeks that went on forward within the page the
	// iterator was on instead of looking the page up again.
	SeeksInPage int64
}

// Reader reads one TSFile. It opens lazily: Open reads only the footer; an
// index block is read on the first access to its family, the bloom filter
// on the first point read. It is safe for concurrent use.
type Reader struct {
	mgr    blockstore.Manager
	id     blockstore.BlockID
	store  string // the UUID naming mgr, for cache keys and Info
	opts   ReaderOptions
	footer footer
	info   Info

	mu      sync.Mutex
	closed  bool
	blocks  map[blockstore.BlockID]blockstore.ReadableBlock
	indexes map[string][]indexEntry
	bloom   *bloom

	pagesRead, readAhead, bloomChecks, bloomNeg, seeksInPage atomic.Int64
}

// Open opens the TSFile whose footer block is footer, from mgr: the open
// block store footer.Store names.
func Open(mgr blockstore.Manager, footer blockstore.BlockRef, opts ReaderOptions) (*Reader, error) {
	if opts.ReadAhead <= 0 {
		opts.ReadAhead = DefaultReadAhead
	}
	if opts.Cache != nil && opts.Owner == nil {
		opts.Owner = opts.Cache.NewOwner("", blockcache.Medium)
	}
	footerID := footer.ID
	r := &Reader{mgr: mgr, id: footerID, store: footer.Store, opts: opts, blocks: map[blockstore.BlockID]blockstore.ReadableBlock{}, indexes: map[string][]indexEntry{}}
	b, err := r.readBlock(footerID, -1)
	if err != nil {
		r.Close()
		return nil, err
	}
	if r.footer, err = decodeFooter(footerID, b); err != nil {
		r.Close()
		return nil, err
	}
	f := &r.footer
	r.info = f.info(footer.Store, footerID, int64(len(b)))
	return r, nil
}

// Info describes the file, as Write returned it.
func (r *Reader) Info() Info { return r.info }

// Stats returns the reader's I/O counters.
func (r *Reader) Stats() Stats {
	return Stats{PagesRead: r.pagesRead.Load(), ReadAheadPages: r.readAhead.Load(), BloomChecks: r.bloomChecks.Load(), BloomNegatives: r.bloomNeg.Load(), SeeksInPage: r.seeksInPage.Load()}
}

// Families lists the column families with data in the file ("" holds row
// tombstones).
func (r *Reader) Families() []string {
	var out []string
	for _, d := range r.footer.data {
		out = append(out, d.family)
	}
	return out
}

// Close releases the open blocks. Iterators must be closed first.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var first error
	for id, b := range r.blocks {
		if err := b.Close(); err != nil && first == nil {
			first = fmt.Errorf("tsfile: close block %s: %w", id, err)
		}
	}
	r.blocks = nil
	return first
}

func (r *Reader) block(id blockstore.BlockID) (blockstore.ReadableBlock, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if b := r.blocks[id]; b != nil {
		return b, nil
	}
	b, err := r.mgr.OpenBlock(id)
	if err != nil {
		return nil, fmt.Errorf("tsfile: open block %s of TSFile %s: %w", id, r.ref(r.id), err)
	}
	r.blocks[id] = b
	return b, nil
}

// readBlock reads a whole block; want is its expected size (-1: any).
func (r *Reader) readBlock(id blockstore.BlockID, want int64) ([]byte, error) {
	b, err := r.block(id)
	if err != nil {
		return nil, err
	}
	size, err := b.Size()
	if err != nil {
		return nil, fmt.Errorf("tsfile: size of block %s: %w", id, err)
	}
	if want >= 0 && size != want {
		return nil, corrupt(id, size, "block is %d bytes, footer says %d", size, want)
	}
	if size > 1<<31 {
		return nil, corrupt(id, 0, "block of %d bytes is too large", size)
	}
	buf := make([]byte, size)
	if _, err := b.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("tsfile: read block %s: %w", id, err)
	}
	return buf, nil
}

func (r *Reader) meta(family string) *dataMeta {
	i := sort.Search(len(r.footer.data), func(i int) bool { return r.footer.data[i].family >= family })
	if i < len(r.footer.data) && r.footer.data[i].family == family {
		return &r.footer.data[i]
	}
	// Footers are written sorted; a crafted one may not be.
	for i := range r.footer.data {
		if r.footer.data[i].family == family {
			return &r.footer.data[i]
		}
	}
	return nil
}

func (r *Reader) index(m *dataMeta) ([]indexEntry, error) {
	r.mu.Lock()
	idx, ok := r.indexes[m.family]
	r.mu.Unlock()
	if ok {
		return idx, nil
	}
	b, err := r.readBlock(m.index, m.indexSize)
	if err != nil {
		return nil, err
	}
	idx, err = decodeIndex(r.footer.version, m.index, b, m.family, m.dataSize)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.indexes[m.family] = idx
	r.mu.Unlock()
	return idx, nil
}

// MayContainRow consults the bloom filter: false means row has no entry
// in the file.
func (r *Reader) MayContainRow(row []byte) (bool, error) {
	f, err := r.loadBloom()
	if err != nil {
		return false, err
	}
	r.bloomChecks.Add(1)
	if !f.mayContain(row) {
		r.bloomNeg.Add(1)
		return false, nil
	}
	return true, nil
}

// RowHash is the hash of a row key the bloom filters probe; a multi-get
// computes it once per row for every file (MayContainHashes).
func RowHash(row []byte) uint64 { return hashRow(row) }

// MayContainHashes is MayContainRow for many rows at once, given their
// RowHash: may[i] is set to whether row i may have an entry in the file.
func (r *Reader) MayContainHashes(hashes []uint64, may []bool) error {
	f, err := r.loadBloom()
	if err != nil {
		return err
	}
	neg := 0
	for i, h := range hashes {
		may[i] = f.mayContainHash(h)
		if !may[i] {
			neg++
		}
	}
	r.bloomChecks.Add(int64(len(hashes)))
	r.bloomNeg.Add(int64(neg))
	return nil
}

// loadBloom returns the bloom filter, reading it on first use.
func (r *Reader) loadBloom() (*bloom, error) {
	r.mu.Lock()
	f := r.bloom
	r.mu.Unlock()
	if f == nil {
		b, err := r.readBlock(r.footer.bloom, r.footer.bloomSize)
		if err != nil {
			return nil, err
		}
		bf, err := decodeBloom(r.footer.bloom, b)
		if err != nil {
			return nil, err
		}
		f = &bf
		r.mu.Lock()
		r.bloom = f
		r.mu.Unlock()
	}
	return f, nil
}

// entryCorrupt is the error for bad entry bytes at position pos of page
// p's entry bytes. In a version-2 file they lie at p.off+pos of the data
// block; a page of version 3 or later may be compressed, so the error
// names the page's offset and the position in its uncompressed bytes. (The page's checksum
// passed, so only a writer's fault gets here.)
func (r *Reader) entryCorrupt(m *dataMeta, p *indexEntry, pos int, format string, args ...any) error {
	if r.footer.version == 2 {
		return corrupt(m.data, p.off+int64(pos), format, args...)
	}
	return corrupt(m.data, p.off, "%s (at byte %d of the uncompressed page)", fmt.Sprintf(format, args...), pos)
}

// DataBytes returns the bytes of the data blocks of the named families
// (all when none is named; "" holds row tombstones) as stored and as
// their pages' entries uncompressed (raw is 0 for a version-2 file, whose
// footer does not record it): their ratio is the compression ratio.
func (r *Reader) DataBytes(families ...string) (stored, raw int64) {
	for _, d := range r.footer.data {
		if len(families) == 0 || slices.Contains(families, d.family) {
			stored += d.dataSize
			raw += d.rawSize
		}
	}
	return stored, raw
}

// Version returns the file's format version.
func (r *Reader) Version() int { return int(r.footer.version) }

// ref names block id of this file across stores.
func (r *Reader) ref(id blockstore.BlockID) blockstore.BlockRef {
	return blockstore.BlockRef{Store: r.store, ID: id}
}

// page returns the verified, uncompressed entry bytes of page i of a data
// block, from the cache or the store. ahead > 0 reads up to that many bytes of
// following uncached pages in the same I/O and caches them. The cache
// holds entry bytes uncompressed, so a page is decompressed once per miss.
// From the cache it also returns the page's row index if one was attached
// (seekIndexed), and hit is true.
func (r *Reader) page(m *dataMeta, idx []indexEntry, i, ahead int) (body []byte, rows []uint32, hit bool, err error) {
	p := &idx[i]
	key := blockcache.Key{Block: r.ref(m.data), Offset: p.off}
	if c := r.opts.Cache; c != nil {
		if v, rows, ok := c.GetIndexed(key); ok {
			return v, rows, true, nil
		}
	}
	n := 1
	if r.opts.Cache != nil {
		for total := p.length; total < int64(ahead) && i+n < len(idx) && !r.opts.Cache.Contains(blockcache.Key{Block: r.ref(m.data), Offset: idx[i+n].off}); n++ {
			total += idx[i+n].length
		}
	}
	last := &idx[i+n-1]
	buf := getReadBuf(int(last.off + last.length - p.off))
	bodies, aliased, err := r.readPages(m, idx, i, n, buf, func(total int) []byte { return make([]byte, total) })
	if !aliased {
		defer putReadBuf(buf)
	}
	if err != nil {
		return nil, nil, false, err
	}
	if r.opts.Cache != nil {
		for j, body := range bodies {
			r.opts.Cache.Insert(r.opts.Owner, blockcache.Key{Block: r.ref(m.data), Offset: idx[i+j].off}, body)
		}
	}
	return bodies[0], nil, false, nil
}

// readPages reads pages i to i+n-1 of a data block into buf (exactly their
// span) in one I/O, and returns their verified, uncompressed entry bytes:
// bodies[j] is page i+j's, up to the first page that fails (a failing
// read-ahead page is reported when it is needed; an error only when page
// i fails). A raw page's body aliases buf (aliased is then true); the
// others are decompressed into slab(total), which must return total bytes
// that nothing else refers to.
func (r *Reader) readPages(m *dataMeta, idx []indexEntry, i, n int, buf []byte, slab func(total int) []byte) (bodies [][]byte, aliased bool, err error) {
	p := &idx[i]
	b, err := r.block(m.data)
	if err != nil {
		return nil, false, err
	}
	got, err := b.ReadAt(buf, p.off)
	if err != nil && err != io.EOF {
		return nil, false, fmt.Errorf("tsfile: read block %s at %d: %w", m.data, p.off, err)
	}
	// A short read (a truncated block) leaves zeros, never a reused
	// buffer's older bytes: the checksum then fails.
	clear(buf[got:])
	r.pagesRead.Add(int64(n))
	r.readAhead.Add(int64(n - 1))
	stored := func(q *indexEntry) []byte {
		return buf[q.off-p.off : q.off-p.off+q.length : q.off-p.off+q.length]
	}
	bodies = make([][]byte, 0, n)
	var firstErr error
	if r.footer.version == 2 {
		for j := 0; j < n; j++ {
			q := &idx[i+j]
			body, err := checkPage(2, m.data, q.off, stored(q), q.count)
			if err != nil {
				firstErr = err
				break
			}
			bodies, aliased = append(bodies, body), true
		}
	} else {
		// Verify every page's checksum and header, then decompress them all
		// into one slab: a page's body is read and decoded once, and buf,
		// holding only compressed bytes, can be reused.
		var ps []storedPage
		total := 0
		for j := 0; j < n; j++ {
			q := &idx[i+j]
			sp, err := verifyPage(m.data, q.off, stored(q))
			if err != nil {
				firstErr = err
				break
			}
			ps = append(ps, sp)
			if sp.codec != codecRaw {
				total += sp.raw
			}
		}
		var dsts []byte
		if total > 0 {
			dsts = slab(total)
		}
		for j := range ps {
			q, sp := &idx[i+j], &ps[j]
			var dst []byte
			if sp.codec == codecRaw {
				aliased = true
			} else {
				dst, dsts = dsts[:0:sp.raw], dsts[sp.raw:]
			}
			body, err := sp.inflate(dst)
			if err == nil {
				body, err = pageEntries(3, m.data, q.off, body, q.count)
			}
			if err != nil {
				firstErr = err
				break
			}
			bodies = append(bodies, body)
		}
	}
	if len(bodies) == 0 {
		if ce, ok := firstErr.(*CorruptionError); ok {
			ce.File = r.ref(r.id)
		}
		return nil, aliased, firstErr
	}
	return bodies, aliased, nil
}

// readBufs holds read buffers of compressed pages for reuse: once a
// batch of pages is decompressed, nothing refers to their stored bytes.
// (Allocating and faulting in a fresh buffer per read costs more than the
// decompression itself.) A small free list shared by every Reader, not a
// sync.Pool, which garbage collections empty: a scan allocates enough to
// run them often.
var readBufs = make(chan []byte, 8)

func getReadBuf(n int) []byte {
	select {
	case b := <-readBufs:
		if cap(b) >= n {
			return b[:n]
		}
	default:
	}
	// Not cleared: the read fills it, and page clears what a short read
	// leaves.
	return rawalloc.Bytes(n)
}

func putReadBuf(b []byte) {
	if cap(b) > 1<<20 {
		return
	}
	select {
	case readBufs <- b:
	default:
	}
}

// NewIterator returns an iterator over the given families (nil: all) and
// the row tombstones. scan enables read-ahead. The iterator must be closed
// before the Reader.
func (r *Reader) NewIterator(families []string, scan bool) memstore.Iterator {
	ahead := 0
	if scan {
		ahead = r.opts.ReadAhead
	}
	return r.newIterator(families, ahead, false)
}

// ScanFillBytes is how many bytes of each data block's pages (counted
// uncompressed, as the cache counts them) a lent iterator
// (NewLentIterator) reads through the block cache before it reads ahead
// into buffers of its own: a short scan's pages are cached as any read's,
// a long scan's beyond that are not.
const ScanFillBytes = 512 << 10

// NewLentIterator is NewIterator for a forward scan whose caller keeps no
// entry's bytes once the iterator moves (Next, SeekGE, First): the first
// ScanFillBytes of each data block's pages it reads go through the block
// cache as any scan's; the rest it reads ahead into buffers of its own,
// reused from read to read, and does not cache (pages already cached are
// taken from the cache). A long scan then neither evicts the cache's
// pages for pages it will not read again nor allocates a buffer per read.
func (r *Reader) NewLentIterator(families []string) memstore.Iterator {
	return r.newIterator(families, r.opts.ReadAhead, true)
}

func (r *Reader) newIterator(families []string, ahead int, lent bool) memstore.Iterator {
	var its []memstore.Iterator
	add := func(m *dataMeta) {
		it := &famIter{r: r, m: m, ahead: ahead, lent: lent}
		if lent {
			it.fill = ScanFillBytes
		}
		its = append(its, it)
	}
	if families == nil {
		for i := range r.footer.data {
			add(&r.footer.data[i])
		}
	} else {
		if m := r.meta(""); m != nil {
			add(m)
		}
		for _, f := range families {
			if m := r.meta(f); m != nil && f != "" {
				add(m)
			}
		}
	}
	if len(its) == 1 {
		return its[0]
	}
	return memstore.Merge(its...)
}

// famIter walks one data block.
type famIter struct {
	r     *Reader
	m     *dataMeta
	idx   []indexEntry
	ahead int

	pageNo int
	d      decoder
	left   int // entries left in the page after cur
	// rows is the row index of page pageNo (rowIndex), nil if it has none.
	rows  []uint32
	cur   memstore.Entry
	valid bool
	err   error

	// rev is the page LastRowBefore decoded last, kept for a reverse walk:
	// the next LastRowBefore searches its rows, and SeekGE into it starts
	// at the row's first entry instead of decoding from the page start.
	rev revPage

	// lent (NewLentIterator): fill is what is left of its ScanFillBytes;
	// past it, pages not in the cache are read ahead into own (raw pages
	// stay there) and slab (decompressed ones), both reused read after
	// read, and batch holds the pages of the last read, from page batchAt.
	lent    bool
	fill    int64
	own     []byte
	slab    []byte
	batchAt int
	batch   [][]byte
}

// revPage is one decoded page: its distinct rows, where each row's first
// entry starts (byte offset, entry number), and the page bytes.
type revPage struct {
	page  int
	body  []byte // nil: none
	rows  [][]byte
	off   []int
	entry []int
}

func (it *famIter) fail(err error) {
	it.err, it.valid = err, false
}

func (it *famIter) loadIndex() bool {
	if it.idx != nil {
		return true
	}
	idx, err := it.r.index(it.m)
	if err != nil {
		it.fail(err)
		return false
	}
	it.idx = idx
	return true
}

// loadPage positions at the first entry of page i.
func (it *famIter) loadPage(i int) {
	if i >= len(it.idx) {
		it.valid = false
		return
	}
	var (
		body []byte
		rows []uint32
		err  error
	)
	if it.lent && it.fill <= 0 {
		body, rows, err = it.lentPage(i)
	} else {
		body, rows, _, err = it.r.page(it.m, it.idx, i, it.ahead)
		it.fill -= int64(len(body)) // as the cache counts it
	}
	if err != nil {
		it.fail(err)
		return
	}
	it.startPage(i, body, rows)
}

// lentPage returns page i of a lent iterator past its fill: from its last
// read, from the cache, or read ahead anew into its own buffers (which
// overwrites the last read: the caller keeps nothing of it).
func (it *famIter) lentPage(i int) ([]byte, []uint32, error) {
	if j := i - it.batchAt; it.batch != nil && j >= 0 && j < len(it.batch) {
		return it.batch[j], nil, nil
	}
	r := it.r
	if c := r.opts.Cache; c != nil {
		if v, rows, ok := c.GetIndexed(blockcache.Key{Block: r.ref(it.m.data), Offset: it.idx[i].off}); ok {
			return v, rows, nil
		}
	}
	n, total := 1, it.idx[i].length
	for ; total < int64(it.ahead) && i+n < len(it.idx); n++ {
		total += it.idx[i+n].length
	}
	last := &it.idx[i+n-1]
	span := int(last.off + last.length - it.idx[i].off)
	if cap(it.own) < span {
		it.own = rawalloc.Bytes(span)
	}
	it.batch = nil
	bodies, _, err := r.readPages(it.m, it.idx, i, n, it.own[:span], func(total int) []byte {
		if cap(it.slab) < total {
			it.slab = rawalloc.Bytes(total)
		}
		return it.slab[:total]
	})
	if err != nil {
		return nil, nil, err
	}
	it.batchAt, it.batch = i, bodies
	return bodies[0], nil, nil
}

// startPage positions at the first entry of page i, whose body and row
// index (nil if none) are given.
func (it *famIter) startPage(i int, body []byte, rows []uint32) {
	it.pageNo, it.rows = i, rows
	it.d = decoder{b: body}
	it.left = it.idx[i].count
	it.decode()
}

// decode reads the next entry of the current page, moving to the next page
// when this one is done.
func (it *famIter) decode() {
	if it.left == 0 {
		if !it.d.done() {
			it.fail(it.r.entryCorrupt(it.m, &it.idx[it.pageNo], it.d.pos, "trailing bytes in page %d", it.pageNo))
			return
		}
		it.loadPage(it.pageNo + 1)
		return
	}
	start := it.d.pos
	if !it.d.entry(&it.cur, true, it.m.family == "") {
		it.fail(it.r.entryCorrupt(it.m, &it.idx[it.pageNo], start, "malformed entry in page %d", it.pageNo))
		return
	}
	it.cur.Family = it.m.family
	it.left--
	it.valid = true
}

func (it *famIter) First() {
	it.err, it.valid = nil, false
	if !it.loadIndex() {
		return
	}
	it.loadPage(0)
}

func (it *famIter) SeekGE(key *memstore.Entry) {
	wasValid := it.valid
	it.err, it.valid = nil, false
	if !it.loadIndex() {
		return
	}
	// The last page whose first key is <= key holds key or its successor.
	// Keys are unique in a file, so CompareKey orders it.
	i := sort.Search(len(it.idx), func(i int) bool { return memstore.CompareKey(&it.idx[i].first, key) > 0 })
	if i > 0 {
		i--
	}
	if wasValid && it.pageNo == i && it.rows == nil && it.rev.body == nil && memstore.CompareKey(&it.cur, key) < 0 {
		// Forward within the page the iterator is on (a multi-get seeks
		// its sorted rows in turn): every entry before cur is below key,
		// so decoding on from cur finds key's successor without looking
		// the page up or decoding it from its start again.
		it.r.seeksInPage.Add(1)
		it.valid = true
	} else if it.seekIndexed(i, key) {
		// Positioned through the page's row index: at the first entry
		// of the first row at or after key's row.
	} else if rp := &it.rev; rp.body != nil && rp.page == i {
		// A reverse walk seeks into the page it decoded: start at the
		// first entry of the first row at or after key's row (the last row
		// if none; decode then moves on to the next page).
		j := sort.Search(len(rp.rows), func(j int) bool { return bytes.Compare(rp.rows[j], key.Row) >= 0 })
		j = min(j, len(rp.rows)-1)
		it.pageNo, it.rows = i, nil
		it.d = decoder{b: rp.body, pos: rp.off[j]}
		it.left = it.idx[i].count - rp.entry[j]
		it.decode()
	} else {
		it.loadPage(i)
	}
	for it.valid && memstore.CompareKey(&it.cur, key) < 0 {
		it.decode()
	}
}

func (it *famIter) Valid() bool            { return it.valid }
func (it *famIter) Entry() *memstore.Entry { return &it.cur }
func (it *famIter) Next()                  { it.decode() }
func (it *famIter) Err() error             { return it.err }
func (it *famIter) Close() error           { it.valid = false; return nil }

// Page is one data page of a TSFile, from its family's index.
type Page struct {
	Family   string
	FirstRow []byte // the row of the page's first entry
	Bytes    int64  // the page's length in its data block
	// RawBytes estimates the page's length uncompressed: Bytes scaled by
	// its family's ratio of raw to stored bytes (Bytes in a version-2
	// file).
	RawBytes int64
}

// Pages lists the data pages of every family, each family's in row order
// (reading the index blocks not read yet). SampleRowKeys estimates the
// size of row ranges from them without reading data.
func (r *Reader) Pages() ([]Page, error) {
	var out []Page
	for i := range r.footer.data {
		m := &r.footer.data[i]
		idx, err := r.index(m)
		if err != nil {
			return nil, err
		}
		ratio := 1.0
		if m.rawSize > 0 && m.dataSize > 0 {
			ratio = float64(m.rawSize) / float64(m.dataSize)
		}
		for j := range idx {
			out = append(out, Page{Family: m.family, FirstRow: idx[j].first.Row, Bytes: idx[j].length,
				RawBytes: int64(float64(idx[j].length) * ratio)})
		}
	}
	return out, nil
}

// LastRowBefore implements memstore.RowFinder: the index names the last
// page that starts below bound; that page holds the greatest row below
// bound. The page's distinct rows are decoded once and kept, so a reverse
// walk through a page costs one decode and a binary search per row. It
// does not move the iterator.
func (it *famIter) LastRowBefore(bound []byte) ([]byte, bool, error) {
	if it.idx == nil {
		idx, err := it.r.index(it.m)
		if err != nil {
			return nil, false, err
		}
		it.idx = idx
	}
	i := len(it.idx) - 1
	if bound != nil {
		i = sort.Search(len(it.idx), func(i int) bool { return bytes.Compare(it.idx[i].first.Row, bound) >= 0 }) - 1
	}
	if i < 0 {
		return nil, false, nil
	}
	if it.rev.body == nil || it.rev.page != i {
		if err := it.decodeRev(i); err != nil {
			return nil, false, err
		}
	}
	rows := it.rev.rows
	j := len(rows)
	if bound != nil {
		j = sort.Search(len(rows), func(j int) bool { return bytes.Compare(rows[j], bound) >= 0 })
	}
	if j == 0 {
		// The index said the page starts below bound.
		return nil, false, corrupt(it.m.data, it.idx[i].off, "page %d starts at or after its index key", i)
	}
	return bytes.Clone(rows[j-1]), true, nil
}

// decodeRev decodes page i into it.rev.
func (it *famIter) decodeRev(i int) error {
	body, _, _, err := it.r.page(it.m, it.idx, i, 1)
	if err != nil {
		return err
	}
	rp := revPage{page: i}
	d := decoder{b: body}
	var e memstore.Entry
	for n := 0; n < it.idx[i].count; n++ {
		start := d.pos
		if !d.entry(&e, true, it.m.family == "") {
			return it.r.entryCorrupt(it.m, &it.idx[i], start, "malformed entry in page %d", i)
		}
		if k := len(rp.rows); k == 0 || !bytes.Equal(rp.rows[k-1], e.Row) {
			if k > 0 && bytes.Compare(rp.rows[k-1], e.Row) > 0 {
				return it.r.entryCorrupt(it.m, &it.idx[i], start, "rows out of order in page %d", i)
			}
			rp.rows = append(rp.rows, bytes.Clone(e.Row))
			rp.off = append(rp.off, start)
			rp.entry = append(rp.entry, n)
		}
	}
	if len(rp.rows) == 0 {
		return corrupt(it.m.data, it.idx[i].off, "page %d has no entries", i)
	}
	rp.body = body
	it.rev = rp
	return nil
}

// SampleRows returns up to n rows spread evenly over the pages of the
// file's cell families (the first row of every page, thinned): a sample
// of the file's rows weighted by the bytes they hold, read from the index
// blocks only.
func (r *Reader) SampleRows(n int) ([][]byte, error) {
	var firsts [][]byte
	for i := range r.footer.data {
		m := &r.footer.data[i]
		if m.family == "" {
			continue
		}
		idx, err := r.index(m)
		if err != nil {
			return nil, err
		}
		for j := range idx {
			firsts = append(firsts, idx[j].first.Row)
		}
	}
	if n <= 0 || len(firsts) <= n {
		return firsts, nil
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = firsts[i*len(firsts)/n]
	}
	return out, nil
}
