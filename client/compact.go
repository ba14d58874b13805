package client

import (
	"context"
	"time"

	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// Compact compacts every tablet of table, one after another in row order,
// and returns when the last one is done. A merging (minor) compaction
// merges a tablet's smallest run of adjacent TSFiles; a major one
// (major true) merges all of them and drops what reads no longer show:
// cells that deletes hide, cells beyond the family's max versions or past
// its max age, cells of deleted families and rows dropped by
// DropRowRange, and, as every file is merged, the tombstones themselves.
// Tservers also run both kinds by themselves (the --compaction-* flags).
//
// A compaction reads at the tserver's compaction rate, so a large table
// takes a while: each tablet's call has no attempt timeout, and ctx bounds
// the whole. A tablet that moves or splits meanwhile is looked up again
// and compacted where it is now; retries stop after the retry timeout
// without progress.
func (c *Client) Compact(ctx context.Context, table string, major bool) error {
	prefix := errorPrefix("compact table %q (major %v)", table, major)
	if err := limits.ValidateTableName(table); err != nil {
		return statusError(err, prefix)
	}
	lc := c.tableCache(table)
	bo := newBackoff(c.opts.minBackoff, c.opts.maxBackoff)
	attempts, since := 0, time.Now()
	for cur := ""; ; {
		attempts++
		loc, err := lc.lookup(ctx, cur)
		if err == nil {
			err = c.compactTablet(ctx, lc, loc, major)
		}
		if err == nil {
			if loc.end == "" {
				return nil
			}
			cur, attempts, since = loc.end, 0, time.Now()
			bo = newBackoff(c.opts.minBackoff, c.opts.maxBackoff)
			continue
		}
		if ctx.Err() != nil {
			return deadlineError(ctx, prefix, attempts, err, false)
		}
		if !classify(ctx, err, true).retry(true) || time.Since(since) >= c.opts.retryTimeout {
			return statusError(err, prefix)
		}
		c.opts.log.Debug("client: retrying", "op", prefix, "attempt", attempts, "err", err)
		if sleep(ctx, bo.next()) != nil {
			return deadlineError(ctx, prefix, attempts, err, false)
		}
	}
}

// compactTablet asks loc's tserver to compact its tablet; a failure that a
// retry may cure drops loc from the cache.
func (c *Client) compactTablet(ctx context.Context, lc *locCache, loc *location, major bool) error {
	ts, err := c.tserver(loc.addr)
	if err != nil {
		return err
	}
	if _, err := ts.Compact(ctx, &pb.CompactRequest{TabletId: loc.tabletID, Major: major}); err != nil {
		if retryable(err) {
			lc.invalidate(loc)
		}
		return err
	}
	return nil
}
