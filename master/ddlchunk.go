package master

import (
	"context"

	"bighive/internal/apierr"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// DefaultDDLChunk is the default Config.DDLChunk: the most tablets one
// raft command of a CreateTable, DeleteTable or assignment writes. One
// command of 100 000 new tablets held bbolt's writer, and every raft
// command queued behind it (the tservers' load reports), for seconds on
// every master at once (docs/scale.md, "Big DDL in chunks").
const DefaultDDLChunk = 2000

// maxRollbackChunksPerTick bounds the deletion chunks one tick applies to
// finish pending tables, so a big rollback does not hold up the tick's
// other work (dead tservers, assignment).
const maxRollbackChunksPerTick = 4

// startDDL marks table as being created or deleted by a call on this
// leader, so the tick does not roll it back; false if one already is.
func (ls *leaderState) startDDL(table string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ddl[table] {
		return false
	}
	ls.ddl[table] = true
	return true
}

func (ls *leaderState) endDDL(table string) {
	ls.mu.Lock()
	delete(ls.ddl, table)
	ls.mu.Unlock()
}

// busyTable refuses a second DDL call on a table: Unavailable, so that
// clients retry (and a retried CreateTable then finds the table and takes
// it for its own, as after a lost reply).
func busyTable(table string) error {
	return apierr.Unavailable("table %q is being created or deleted by another call; retry when that finished", table)
}

// createChunked creates a table in commands of at most DDLChunk tablets
// (meta.MetaCreateTablets); the table is visible only once the last one
// committed. A failure after the first leaves a pending table that the
// tick rolls back.
func (m *Master) createChunked(ctx context.Context, ls *leaderState, s *pb.TableSchema, keys [][]byte) (int, error) {
	if !ls.startDDL(s.Name) {
		return 0, busyTable(s.Name)
	}
	defer ls.endDDL(s.Name)
	chunk := m.cfg.DDLChunk
	var start []byte
	tablets, commands := 0, 0
	for first := true; ; first = false {
		// The last chunk also creates the tablet up to the end of the row
		// space: keys of one chunk make as many tablets, the last one's one more.
		last := len(keys) < chunk
		n := len(keys)
		if !last {
			n = chunk
		}
		c := &spb.MetaCreateTablets{Table: s.Name, StartRow: start, SplitKeys: keys[:n], First: first, Last: last}
		if first {
			c.Schema = s
		}
		res, err := m.applyChunk(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_CreateTablets{CreateTablets: c}}, first)
		if err != nil {
			if !first {
				m.log.Warn("table creation failed between chunks; the leader rolls it back", "table", s.Name, "tablets", tablets, "err", err)
				ls.poke()
			}
			return 0, err
		}
		tablets += len(res.Tablets)
		commands++
		m.chunkDone(ctx, s.Name, commands)
		if last {
			break
		}
		start, keys = keys[n-1], keys[n:]
	}
	if commands > 1 {
		m.log.Info("table created in chunks", "table", s.Name, "tablets", tablets, "commands", commands)
	}
	return tablets, nil
}

// deleteChunked deletes a visible table in commands of at most DDLChunk
// tablets (meta.MetaDeleteTablets): the first one hides it; a failure
// after it leaves a pending table that the tick finishes deleting.
func (m *Master) deleteChunked(ctx context.Context, ls *leaderState, table string) (int, error) {
	if !ls.startDDL(table) {
		return 0, busyTable(table)
	}
	defer ls.endDDL(table)
	if err := m.view(func(r *meta.Reader) error { _, err := r.Table(table); return err }); err != nil {
		return 0, err
	}
	deleted := 0
	for chunk := 1; ; chunk++ {
		done, n, err := ls.deleteChunk(ctx, table, chunk == 1)
		if err != nil {
			if chunk > 1 {
				m.log.Warn("table deletion failed between chunks; the leader finishes it", "table", table, "tablets", deleted, "err", err)
				ls.poke()
			}
			return 0, err
		}
		deleted += n
		if done {
			return deleted, nil
		}
		m.chunkDone(ctx, table, chunk)
	}
}

// applyChunk applies one chunk of a DDL call. A later chunk is not even
// proposed once the call's context ended: the leader finishes or rolls
// back the table instead.
func (m *Master) applyChunk(ctx context.Context, cmd *spb.MetaCommand, first bool) (*meta.Result, error) {
	if err := ctx.Err(); err != nil && !first {
		return nil, apierr.Wrap(apierr.CodeOf(err), err, "table DDL interrupted between chunks")
	}
	return m.apply(ctx, cmd)
}

func (m *Master) chunkDone(ctx context.Context, table string, chunk int) {
	if m.cfg.ddlChunkHook != nil {
		m.cfg.ddlChunkHook(ctx, table, chunk)
	}
}

// deleteChunk applies one MetaDeleteTablets and forgets what the leader
// kept about the deleted tablets.
func (ls *leaderState) deleteChunk(ctx context.Context, table string, first bool) (done bool, n int, err error) {
	res, err := ls.m.applyChunk(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteTablets{DeleteTablets: &spb.MetaDeleteTablets{
		Table: table, Max: uint32(ls.m.cfg.DDLChunk)}}}, first)
	if err != nil {
		return false, 0, err
	}
	ls.mu.Lock()
	for _, t := range res.Tablets {
		delete(ls.moves, t.TabletId)
		delete(ls.sizes, t.TabletId)
		delete(ls.space, t.TabletId)
	}
	if res.Done {
		delete(ls.prio, table)
	}
	ls.mu.Unlock()
	return res.Done, len(res.Tablets), nil
}

// finishPending rolls back creations and finishes deletions that no call
// on this leader is driving (a crash or failover between chunks, or a
// call that failed between them), at most maxRollbackChunksPerTick chunks
// per tick.
func (ls *leaderState) finishPending(ctx context.Context) {
	var names []string
	_ = ls.m.view(func(r *meta.Reader) error { names = r.PendingTables(); return nil })
	budget := maxRollbackChunksPerTick
	for _, name := range names {
		ls.mu.Lock()
		driven := ls.ddl[name]
		ls.mu.Unlock()
		for !driven && budget > 0 {
			budget--
			done, n, err := ls.deleteChunk(ctx, name, true)
			if err != nil {
				ls.m.log.Warn("finishing a pending table failed", "table", name, "err", err)
				return
			}
			if done {
				ls.m.log.Info("pending table removed (creation rolled back or deletion finished)", "table", name)
				ls.m.events.add("table", "pending table %s removed (creation rolled back or deletion finished)", name)
				break
			}
			ls.m.log.Info("pending table: tablets removed", "table", name, "tablets", n)
		}
	}
	if budget == 0 {
		ls.poke()
	}
}

// pendingSet is the set of tables being created or deleted: their
// tablets are neither assigned nor left with tservers.
func pendingSet(r *meta.Reader) map[string]bool {
	names := r.PendingTables()
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// unassignedTablets returns the UNASSIGNED tablets but those of tables
// being created or deleted, which are not assigned; their tablets are
// skipped by their brief, not decoded whole, since a big table being
// created holds up to the whole table's tablets UNASSIGNED tick after tick.
func unassignedTablets(r *meta.Reader) ([]*pb.TabletMeta, error) {
	pending := pendingSet(r)
	if pending == nil {
		return r.TabletsOf("")
	}
	var out []*pb.TabletMeta
	for _, id := range r.TabletIDsOf("") {
		b, ok, err := r.TabletBrief(id)
		if err != nil {
			return nil, err
		}
		if !ok || pending[b.Table] {
			continue
		}
		t, err := r.Tablet(id)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
