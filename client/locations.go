package client

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// location is one cached tablet location: the tablet serving [start, end)
// (end "" is unbounded) at addr, at epoch.
type location struct {
	tabletID   string
	start, end string
	addr, uuid string
	epoch      int64
	asked      time.Time // when the lookup that returned it was sent
}

// sameOwner reports whether l and o are the same tablet, served by the
// same tserver at the same epoch.
func (l *location) sameOwner(o *location) bool {
	return l.tabletID == o.tabletID && l.addr == o.addr && l.epoch == o.epoch
}

func (l *location) contains(row string) bool {
	return l.start <= row && (l.end == "" || row < l.end)
}

// locCache caches a table's tablet locations: sorted by start row,
// non-overlapping, possibly with gaps (ranges never looked up, or dropped
// after a failure). Only locations with a tserver are cached. One master
// lookup runs at a time per table; concurrent misses wait for it and
// re-check the cache, so a moved tablet costs one lookup, not one per
// waiting request.
type locCache struct {
	c     *Client
	table string

	// millis is whether the table has millisecond granularity, as the
	// last lookup's schema said (granularity never changes; Open looks
	// up): Put truncates its client clock then.
	millis atomic.Bool

	// locs is the cached locations, sorted by start row: a slice never
	// changed once stored, so that a lookup reads it without a lock
	// (every call of every caller looks up, and a mutex there was passed
	// between the cores on each: 1.4 % of a writing client's CPU).
	// Writers hold mu and store a new slice.
	locs atomic.Pointer[[]*location]

	mu       sync.Mutex    // guards fetching and serializes writers of locs
	fetching chan struct{} // closed when the lookup in flight ends; nil if none
}

func newLocCache(c *Client, table string) *locCache {
	return &locCache{c: c, table: table}
}

func (lc *locCache) lock()   { lc.mu.Lock() }
func (lc *locCache) unlock() { lc.mu.Unlock() }

// tableCache returns the client's shared location cache of table.
func (c *Client) tableCache(table string) *locCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	lc, ok := c.tables[table]
	if !ok {
		lc = newLocCache(c, table)
		c.tables[table] = lc
	}
	return lc
}

// find returns the cached location holding row, or nil. It takes no lock.
func (lc *locCache) find(row string) *location {
	locs := lc.cached()
	i := sort.Search(len(locs), func(i int) bool { return locs[i].start > row }) - 1
	if i >= 0 && locs[i].contains(row) {
		return locs[i]
	}
	return nil
}

// cached returns the cached locations; the caller must not change them.
func (lc *locCache) cached() []*location {
	if p := lc.locs.Load(); p != nil {
		return *p
	}
	return nil
}

// lookup returns the location of the tablet that holds row, asking the
// master on a cache miss. A tablet without a tserver is Unavailable (the
// caller retries); an unknown table is NotFound.
func (lc *locCache) lookup(ctx context.Context, row string) (*location, error) {
	l, err := lc.cachedOrFetch(ctx, row, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// moved reports whether the master no longer places loc's tablet at
// loc's tserver and epoch: it moved, split, or has no tserver now. A
// location cached from a lookup sent at or after since answers; else the
// master is asked, bypassing the cache, one lookup at a time per table as
// lookup's (calls waiting on one stalled tserver share a lookup). When
// the master cannot answer before ctx ends, moved is false: the caller
// goes on waiting.
func (lc *locCache) moved(ctx context.Context, loc *location, since time.Time) bool {
	l, err := lc.cachedOrFetch(ctx, loc.start, func(l *location) bool { return !l.asked.Before(since) })
	switch {
	case l != nil && l.addr == "":
		return true // no tserver now: not loc's
	case err != nil:
		return false
	}
	return !l.sameOwner(loc)
}

// cachedOrFetch returns the cached location holding row if there is one
// and fresh accepts it (nil accepts any), else fetch's answer. One fetch
// runs at a time per table: a caller that finds one in flight waits for
// it, then looks at the cache again (its answer may have left no location
// for row, or one fresh does not accept) and fetches if need be.
func (lc *locCache) cachedOrFetch(ctx context.Context, row string, fresh func(*location) bool) (*location, error) {
	if l := lc.find(row); l != nil && (fresh == nil || fresh(l)) {
		return l, nil
	}
	for {
		lc.lock()
		if l := lc.find(row); l != nil && (fresh == nil || fresh(l)) {
			lc.unlock()
			return l, nil
		}
		if wait := lc.fetching; wait != nil {
			lc.unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		lc.fetching = done
		lc.unlock()

		l, err := lc.fetch(ctx, row)

		lc.lock()
		lc.fetching = nil
		close(done)
		lc.unlock()
		return l, err
	}
}

// fetch asks the master for the locations from row's tablet on and caches
// those that have a tserver. A tablet without a tserver is an error, with
// its location (addr "").
func (lc *locCache) fetch(ctx context.Context, row string) (*location, error) {
	asked := time.Now()
	var resp *pb.GetTableLocationsResponse
	err := lc.c.callMaster(ctx, errorPrefix("look up row %q of table %q", row, lc.table), func(ctx context.Context, m pb.MasterClient) error {
		var err error
		resp, err = m.GetTableLocations(ctx, &pb.GetTableLocationsRequest{
			Table: lc.table, StartRow: []byte(row), Limit: lc.c.opts.prefetch,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	lc.millis.Store(granularityFromProto(resp.GetSchema().GetGranularity()) == GranularityMillis)
	if len(resp.Locations) == 0 {
		return nil, errNoTablet(lc.table, row)
	}
	fresh := make([]*location, 0, len(resp.Locations))
	for _, pl := range resp.Locations {
		fresh = append(fresh, &location{
			tabletID: pl.TabletId,
			start:    string(pl.GetRange().GetStartRow()),
			end:      string(pl.GetRange().GetEndRow()),
			addr:     pl.TserverAddress,
			uuid:     pl.TserverUuid,
			epoch:    pl.Epoch,
			asked:    asked,
		})
	}
	first := fresh[0]
	if !first.contains(row) {
		return nil, apierr.Unavailable("master returned tablet %s [%q, %q) of table %q for row %q, which it does not hold",
			first.tabletID, first.start, first.end, lc.table, row)
	}
	lc.lock()
	lc.insert(fresh)
	lc.unlock()
	if first.addr == "" {
		return first, apierr.Unavailable("tablet %s of table %q (rows [%q, %q)) has no tserver yet (state %s)",
			first.tabletID, lc.table, first.start, first.end, resp.Locations[0].State)
	}
	return first, nil
}

// insert replaces the cached locations overlapping the span of fresh
// (sorted, contiguous) by those of fresh that have a tserver. Caller holds mu.
func (lc *locCache) insert(fresh []*location) {
	lo, hi := fresh[0].start, fresh[len(fresh)-1].end
	old := lc.cached()
	kept := make([]*location, 0, len(old)+len(fresh))
	for _, l := range old {
		// l overlaps [lo, hi) unless it ends at or before lo, or starts at or after hi.
		before := l.end != "" && l.end <= lo
		after := hi != "" && l.start >= hi
		if before || after {
			kept = append(kept, l)
		}
	}
	for _, l := range fresh {
		if l.addr != "" {
			kept = append(kept, l)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].start < kept[j].start })
	lc.locs.Store(&kept)
}

// invalidate drops l from the cache, if it is still there: the next lookup
// of its rows asks the master.
func (lc *locCache) invalidate(l *location) {
	lc.lock()
	defer lc.unlock()
	old := lc.cached()
	for i, x := range old {
		if x == l {
			kept := append(old[:i:i], old[i+1:]...)
			lc.locs.Store(&kept)
			return
		}
	}
}

// size is the number of cached locations (tests).
func (lc *locCache) size() int {
	return len(lc.cached())
}

// lookupBelow returns the location of the tablet that holds the rows just
// below end ("": the last tablet), for a reverse read of rows in
// [lo, end), lo < end: the tablet holding end if it starts below end,
// else (end is a tablet boundary, or unbounded) the one found by walking
// forward, through the cache, from lo or from a cached tablet between lo
// and end.
func (lc *locCache) lookupBelow(ctx context.Context, lo, end string) (*location, error) {
	if end != "" {
		// Most often the tablet holding end holds the rows below it too.
		if l, err := lc.lookup(ctx, end); err == nil && l.start < end {
			return l, nil
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	row := lo
	for _, l := range lc.cached() {
		if l.start > row && (end == "" || l.start < end) {
			row = l.start
		}
	}
	for {
		l, err := lc.lookup(ctx, row)
		if err != nil {
			return nil, err
		}
		if l.end == "" || end != "" && l.end >= end {
			return l, nil
		}
		row = l.end
	}
}
