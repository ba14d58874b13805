package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bighive/storage/blockstore"
)

// CollectLogs deletes this tserver's log files that lie wholly before
// every position any tablet lists for its prefix (asked of Refs), and
// never the current file. It does nothing without Refs and LogGC.
func (c *Coordinator) CollectLogs(ctx context.Context) error {
	if c.opts.Refs == nil || c.opts.LogGC == nil {
		return nil
	}
	cur := c.opts.Log.Position()
	refs, err := c.opts.Refs.LogPositions(ctx, cur.Prefix)
	if err != nil {
		return fmt.Errorf("checkpoint: log references: %w", err)
	}
	oldest := cur
	for _, p := range refs {
		if p.Prefix == cur.Prefix && p.FileTS < oldest.FileTS {
			oldest = p
		}
	}
	deleted, err := c.opts.LogGC.DeleteBefore(oldest)
	c.count(func(s *Stats) { s.DeletedLogFiles += int64(len(deleted)) })
	if err != nil {
		return fmt.Errorf("checkpoint: log gc: %w", err)
	}
	if len(deleted) > 0 {
		c.log.Debug("log gc", "deleted", len(deleted), "before", oldest.String())
	}
	return nil
}

// CollectOrphans deletes the blocks of the block store (Options.Blocks,
// named Options.Store) that no tablet's metadata names (asked of Refs: in
// the cluster, any tablet anywhere) and no tablet served here uses, once
// this collector has seen them so for at least grace. Such blocks are
// TSFiles of a flush or compaction whose metadata commit never happened (a
// crash between the creation transaction and step 7), and TSFiles of this
// store that another tserver's compaction replaced (a compaction never
// deletes blocks of a store not its own). With grace 0 they are deleted at once: right
// only at start-up, before anything writes. It excludes checkpoints,
// compactions and splits while it runs, and returns the number of blocks
// deleted. Without a valid lease it deletes nothing (ErrNoLease).
func (c *Coordinator) CollectOrphans(ctx context.Context, grace time.Duration) (int, error) {
	if c.opts.Refs == nil || c.opts.Blocks == nil {
		return 0, nil
	}
	if !c.leaseValid() {
		return 0, ErrNoLease
	}
	if err := c.acquire(ctx); err != nil {
		return 0, err
	}
	defer c.release()
	if err := c.beginCheckpoint(ctx); err != nil {
		return 0, err
	}
	defer c.endCheckpoint()
	c.compactMu.Lock()
	defer c.compactMu.Unlock()

	ids, err := c.opts.Blocks.AllBlockIDs()
	if err != nil {
		return 0, fmt.Errorf("checkpoint: list blocks: %w", err)
	}
	refs, err := c.opts.Refs.ReferencedBlocks(ctx)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: block references: %w", err)
	}
	// Blocks are compared by (store, id): an ID of another store that a
	// tablet here reads says nothing about the block with that ID here.
	inUse := map[blockstore.BlockRef]struct{}{}
	for _, t := range c.opts.Tablets() {
		for _, f := range t.Files() {
			for _, ref := range f.BlockRefs() {
				inUse[ref] = struct{}{}
			}
		}
	}
	c.metaMu.Lock()
	for _, ts := range c.tabs {
		if ts.flushed != nil {
			for _, ref := range ts.flushed.BlockRefs() {
				inUse[ref] = struct{}{}
			}
		}
		if ts.compacted != nil { // a later update names it
			for _, ref := range ts.compacted.info.BlockRefs() {
				inUse[ref] = struct{}{}
			}
		}
	}
	c.metaMu.Unlock()

	now := time.Now()
	seen := map[blockstore.BlockID]time.Time{}
	var doomed []blockstore.BlockID
	for _, id := range ids {
		ref := blockstore.BlockRef{Store: c.opts.Store, ID: id}
		if _, ok := refs[ref]; ok {
			continue
		}
		if _, ok := inUse[ref]; ok {
			continue
		}
		first, ok := c.orphanSeen[id]
		if !ok {
			first = now
		}
		if now.Sub(first) >= grace {
			doomed = append(doomed, id)
			continue
		}
		seen[id] = first
	}
	c.orphanSeen = seen
	if len(doomed) == 0 {
		return 0, nil
	}
	if !c.leaseValid() {
		return 0, ErrNoLease
	}
	tx := c.opts.Blocks.NewDeletionTransaction()
	for _, id := range doomed {
		tx.AddDeletedBlock(id)
	}
	deleted, err := tx.CommitDeletedBlocks()
	c.count(func(s *Stats) { s.DeletedOrphans += int64(len(deleted)) })
	c.log.Info("orphan blocks deleted", "count", len(deleted))
	if err != nil && !errors.Is(err, blockstore.ErrNotFound) {
		return len(deleted), fmt.Errorf("checkpoint: delete orphans: %w", err)
	}
	return len(deleted), nil
}
