package master

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// Live schema changes. Every change commits one meta command that also
// bumps TableSchema.version, then pushes the new schema to every tserver
// that holds a tablet of the table (assigned or serving) with
// TServer.UpdateSchema, and returns once each acknowledged. A tserver keeps
// the highest version it has seen and applies it to every tablet of the
// table, also to one whose assignment carried an older schema: an
// assignment is committed (naming its tserver) before its reply is sent,
// so every tserver that may load a tablet with the old schema is among
// those pushed to. Heartbeat replies carry changed schemas too, for a push
// that failed.

// pushTimeout bounds the push of a schema change when the call has no
// deadline.
const pushTimeout = 20 * time.Second

// pushSchema sends the table's committed schema to every tserver holding
// one of its tablets and waits for each to acknowledge.
func (m *Master) pushSchema(ctx context.Context, table string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pushTimeout)
		defer cancel()
	}
	var schema *pb.TableSchema
	addrs := map[string]string{} // uuid → address
	err := m.view(func(r *meta.Reader) error {
		var err error
		if schema, err = r.Table(table); err != nil {
			return err
		}
		tablets, err := r.TableTablets(table, nil, 0)
		if err != nil {
			return err
		}
		for _, t := range tablets {
			if t.State == pb.TabletState_TABLET_STATE_UNASSIGNED || t.TserverUuid == "" {
				continue
			}
			if _, ok := addrs[t.TserverUuid]; ok {
				continue
			}
			if ts, err := r.TServer(t.TserverUuid); err == nil {
				addrs[t.TserverUuid] = ts.Address
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.mu.Lock()
	ls := m.leader
	m.mu.Unlock()
	if ls != nil {
		ls.mu.Lock()
		for uuid := range addrs {
			// Declared dead: its tablets go to other tservers, with the
			// committed schema in their assignments.
			if l := ls.leases[uuid]; l != nil && l.dead {
				delete(addrs, uuid)
			}
		}
		ls.mu.Unlock()
	}
	for uuid, addr := range addrs {
		if err := m.callTServer(ctx, addr, func(ctx context.Context, c pb.TServerClient) error {
			_, err := c.UpdateSchema(ctx, &pb.UpdateSchemaRequest{Schema: schema})
			return err
		}); err != nil {
			// Aborted, not Unavailable: the change is committed, and a
			// blind retry of it would fail (AlreadyExists, NotFound).
			return apierr.Wrap(codes.Aborted, err,
				"master: the schema of table %q (version %d) is committed, but tserver %s (%s) did not acknowledge it; it learns it with its next heartbeat",
				table, schema.Version, uuid, addr)
		}
	}
	m.log.Info("schema pushed", "table", table, "version", schema.Version, "tservers", len(addrs))
	return nil
}

// callTServer calls fn on the tserver at addr, retrying transient errors
// until ctx ends.
func (m *Master) callTServer(ctx context.Context, addr string, fn func(context.Context, pb.TServerClient) error) error {
	conn, err := m.dialTServer(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	c := pb.NewTServerClient(conn)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := fn(ctx, c)
		if err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("master: tserver %s: %w (last error: %w)", addr, ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// changeSchema commits a schema command and pushes the table's new schema
// to the tservers serving it. done is the code the command fails with when
// an earlier attempt of the same call already committed it and only its
// reply was lost, perhaps before its push finished: the schema is pushed
// again before that error is answered (codes.OK: no such code).
func (m *Master) changeSchema(ctx context.Context, table string, cmd *spb.MetaCommand, done codes.Code) error {
	if _, err := m.apply(ctx, cmd); err != nil {
		if done != codes.OK && apierr.CodeOf(err) == done {
			_ = m.pushSchema(ctx, table)
		}
		return err
	}
	return m.pushSchema(ctx, table)
}

// callTServerOnce calls fn once on the tserver at addr.
func (m *Master) callTServerOnce(ctx context.Context, addr string, fn func(context.Context, pb.TServerClient) error) error {
	conn, err := m.dialTServer(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(ctx, pb.NewTServerClient(conn))
}

// dialTServer makes a connection to the tserver at addr; the caller
// closes it.
func (m *Master) dialTServer(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, limits.GRPCDialOptions(tlsconf.Credentials(m.cfg.TLS))...)
	if err != nil {
		return nil, fmt.Errorf("master: dial tserver %s: %w", addr, err)
	}
	return conn, nil
}

func retryable(err error) bool {
	switch apierr.CodeOf(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return false
}

// DeleteFamily removes a column family from a table's schema and masks
// its cells. First the schema change commits (it also lists the family in
// the schema's purging_families) and is pushed: from then on reads never
// show the family's cells and writes to it are InvalidArgument on every
// tserver. Then the owner of each tablet writes a delete-family tombstone
// on every row holding an entry of the family (TServer.PurgeFamily,
// through the write path like DropRows), and a last command removes the
// name from purging_families; only then does DeleteFamily return. The
// tombstones make a family created again under the name start empty, on
// every tablet and after restarts, failovers and splits, and let major
// compactions drop the old cells.
//
// A master that fails in the middle leaves the name in purging_families:
// AddFamily refuses it until the purge is finished, which a new call of
// DeleteFamily (the family is gone: it only finishes the purge) or an
// AddFamily of the name (it finishes the purge first) does. Purging twice
// is harmless.
func (m *Master) DeleteFamily(ctx context.Context, req *pb.DeleteFamilyRequest) (*pb.DeleteFamilyResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if err := limits.ValidateFamilyName(req.Family); err != nil {
		return nil, err
	}
	if err := m.changeSchema(ctx, req.Table, &spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteFamily{DeleteFamily: &spb.MetaDeleteFamily{
		Table: req.Table, Family: req.Family}}}, codes.NotFound); err != nil {
		purging, perr := m.purging(req.Table, req.Family)
		if apierr.CodeOf(err) != codes.NotFound || perr != nil || !purging {
			return nil, err
		}
		// An earlier call deleted it and did not finish the purge.
	}
	if err := m.purgeFamily(ctx, req.Table, req.Family); err != nil {
		return nil, err
	}
	m.log.Info("column family deleted", "table", req.Table, "family", req.Family)
	return &pb.DeleteFamilyResponse{}, nil
}

// purging reports whether family is in the table's purging_families.
func (m *Master) purging(table, family string) (bool, error) {
	var out bool
	err := m.view(func(r *meta.Reader) error {
		s, err := r.Table(table)
		if err != nil {
			return err
		}
		out = slices.Contains(s.PurgingFamilies, family)
		return nil
	})
	return out, err
}

// purgeFamily masks the cells of a deleted family on every tablet of the
// table (TServer.PurgeFamily) and then removes it from purging_families.
// It does nothing if the family is not listed there.
func (m *Master) purgeFamily(ctx context.Context, table, family string) error {
	var schema *pb.TableSchema
	if err := m.view(func(r *meta.Reader) error {
		var err error
		schema, err = r.Table(table)
		return err
	}); err != nil {
		return err
	}
	if !slices.Contains(schema.PurgingFamilies, family) {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*pushTimeout)
		defer cancel()
	}
	var rows int64
	err := m.eachTablet(ctx, table, nil, nil, "delete column family "+family, func(ctx context.Context, c pb.TServerClient, t *pb.TabletMeta, _ []byte) error {
		resp, err := c.PurgeFamily(ctx, &pb.PurgeFamilyRequest{TabletId: t.TabletId, Epoch: t.Epoch, Schema: schema, Family: family})
		rows += resp.GetRowsPurged()
		return err
	})
	if err != nil {
		return err
	}
	if _, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_FamilyPurged{FamilyPurged: &spb.MetaFamilyPurged{
		Table: table, Family: family}}}); err != nil {
		return err
	}
	m.log.Info("column family purged", "table", table, "family", family, "rows", rows)
	return nil
}

// SetGCRule replaces a family's GC rule (its max_versions and
// max_age_micros are cleared: the rule alone decides).
func (m *Master) SetGCRule(ctx context.Context, req *pb.SetGCRuleRequest) (*pb.SetGCRuleResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if err := limits.ValidateFamilyName(req.Family); err != nil {
		return nil, err
	}
	if err := meta.ValidateGCRule(req.Family, req.GcRule); err != nil {
		return nil, err
	}
	// Setting a rule again is harmless: no code marks an earlier attempt.
	if err := m.changeSchema(ctx, req.Table, &spb.MetaCommand{Cmd: &spb.MetaCommand_SetGcRule{SetGcRule: &spb.MetaSetGCRule{
		Table: req.Table, Family: req.Family, GcRule: req.GcRule}}}, codes.OK); err != nil {
		return nil, err
	}
	return &pb.SetGCRuleResponse{}, nil
}

// DropRowRange deletes every row of a table with a key prefix, or every
// row. For each tablet overlapping the range, the tablet's owner writes a
// delete-row tombstone for each row present through its write path
// (TServer.DropRows): the tombstones are logged and carry the tablet's
// write sequence, so they survive a restart (log replay) and a failover
// (log splitting) like any write, and a row written after DropRowRange
// returns gets a higher sequence and is kept. A tablet that splits or
// moves meanwhile is looked up again and its part retried; DropRows is
// idempotent. The cost is one tombstone per existing row.
func (m *Master) DropRowRange(ctx context.Context, req *pb.DropRowRangeRequest) (*pb.DropRowRangeResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	var start, end []byte
	switch t := req.Target.(type) {
	case *pb.DropRowRangeRequest_RowKeyPrefix:
		if len(t.RowKeyPrefix) == 0 {
			return nil, apierr.InvalidArgument("drop row range of table %q: the row key prefix is empty; use delete_all_data_from_table to drop every row", req.Table)
		}
		if err := limits.ValidateRowKey(t.RowKeyPrefix); err != nil {
			return nil, err
		}
		start, end = t.RowKeyPrefix, prefixEnd(t.RowKeyPrefix)
	case *pb.DropRowRangeRequest_DeleteAllDataFromTable:
		if !t.DeleteAllDataFromTable {
			return nil, apierr.InvalidArgument("drop row range of table %q: delete_all_data_from_table is false; give a prefix or set it", req.Table)
		}
	default:
		return nil, apierr.InvalidArgument("drop row range of table %q: give a row key prefix or delete_all_data_from_table", req.Table)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*pushTimeout)
		defer cancel()
	}
	var deleted int64
	err := m.eachTablet(ctx, req.Table, start, end, "drop row range", func(ctx context.Context, c pb.TServerClient, t *pb.TabletMeta, from []byte) error {
		resp, err := c.DropRows(ctx, &pb.DropRowsRequest{TabletId: t.TabletId, Epoch: t.Epoch,
			Range: &pb.RowRange{StartRow: from, EndRow: end}})
		deleted += resp.GetRowsDeleted()
		return err
	})
	if err != nil {
		return nil, err
	}
	m.log.Info("row range dropped", "table", req.Table, "prefix", start, "rows", deleted)
	return &pb.DropRowRangeResponse{}, nil
}

// eachTablet calls call on the owner of each tablet of table overlapping
// [start, end) (end nil: unbounded), in row order, from is where the
// tablet's part of the range starts. A tablet that is not serving, moved
// or split (a routing error, or a retryable one) is looked up again and
// its part retried until ctx ends: call must be idempotent. what names the
// operation in errors.
func (m *Master) eachTablet(ctx context.Context, table string, start, end []byte, what string,
	call func(ctx context.Context, c pb.TServerClient, t *pb.TabletMeta, from []byte) error) error {
	cur := start
	for wait := 20 * time.Millisecond; ; {
		t, addr, err := m.tabletAt(table, cur)
		if err != nil {
			return err
		}
		if addr != "" {
			err = m.callTServer(ctx, addr, func(ctx context.Context, c pb.TServerClient) error {
				return call(ctx, c, t, cur)
			})
		}
		if addr == "" || err != nil {
			if _, routing := apierr.TabletReason(err); err != nil && !routing && !retryable(err) {
				return err
			}
			select { // not serving yet, moved or split: look it up again
			case <-ctx.Done():
				return apierr.Wrap(codes.Unavailable, ctx.Err(), "%s of table %q: tablet %s (from row %q) is not serving (last error: %v); retry, doing it again is harmless",
					what, table, t.TabletId, cur, err)
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
			continue
		}
		tend := t.Range.GetEndRow()
		if len(tend) == 0 || (end != nil && bytes.Compare(tend, end) >= 0) {
			return nil
		}
		cur = tend
	}
}

// tabletAt returns the tablet of table holding row and its owner's address
// when it is serving ("" otherwise).
func (m *Master) tabletAt(table string, row []byte) (*pb.TabletMeta, string, error) {
	var t *pb.TabletMeta
	var addr string
	err := m.view(func(r *meta.Reader) error {
		ts, err := r.TableTablets(table, row, 1)
		if err != nil {
			return err
		}
		if len(ts) == 0 {
			return apierr.NotFound("table %q has no tablets", table)
		}
		t = ts[0]
		if t.State == pb.TabletState_TABLET_STATE_SERVING && t.TserverUuid != "" {
			if s, err := r.TServer(t.TserverUuid); err == nil {
				addr = s.Address
			}
		}
		return nil
	})
	return t, addr, err
}

// prefixEnd is the first key after every key with the prefix (nil if none:
// the prefix is all 0xff bytes).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// SetFamilyCompression sets a family's compression; the tservers write
// the family's TSFiles with it from when it returns.
func (m *Master) SetFamilyCompression(ctx context.Context, req *pb.SetFamilyCompressionRequest) (*pb.SetFamilyCompressionResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if err := limits.ValidateFamilyName(req.Family); err != nil {
		return nil, err
	}
	if err := meta.ValidateCompression(req.Family, req.Compression); err != nil {
		return nil, err
	}
	// Setting it again is harmless: no code marks an earlier attempt.
	if err := m.changeSchema(ctx, req.Table, &spb.MetaCommand{Cmd: &spb.MetaCommand_SetCompression{SetCompression: &spb.MetaSetCompression{
		Table: req.Table, Family: req.Family, Compression: req.Compression}}}, codes.OK); err != nil {
		return nil, err
	}
	return &pb.SetFamilyCompressionResponse{}, nil
}
