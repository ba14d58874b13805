package meta

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// A big CreateTable or DeleteTable is cut by the master into chunks, each
// one raft command and one bounded bbolt transaction, so that no single
// apply holds bbolt's writer (and the heartbeats' raft commands queued
// behind it) for long. Between the chunks the table is pending: its
// record is in the pending bucket, not in tables, so clients do not see
// it (Table is NotFound), and the leader neither assigns its UNASSIGNED
// tablets nor lets tservers keep its tablets. A pending table is finished
// by its last CreateTablets or by DeleteTablets until none is left; a new
// leader rolls back every creation it did not start itself (master's
// tick), so a crash between chunks leaves the whole table or none.

// PendingTable returns the record of a table being created or deleted in
// chunks; ok is false when there is none.
func (r *Reader) PendingTable(name string) (p *spb.MetaPendingTable, ok bool, err error) {
	b := r.tx.Bucket(bucketPending)
	if b == nil {
		return nil, false, nil
	}
	v := b.Get([]byte(name))
	if v == nil {
		return nil, false, nil
	}
	p = &spb.MetaPendingTable{}
	if err := r.decode(bucketPending, []byte(name), v, p); err != nil {
		return nil, false, err
	}
	return p, true, nil
}

// PendingTables returns the names of the tables being created or deleted,
// in name order.
func (r *Reader) PendingTables() []string {
	b := r.tx.Bucket(bucketPending)
	if b == nil {
		return nil
	}
	var out []string
	_ = b.ForEach(func(k, _ []byte) error { out = append(out, string(k)); return nil })
	return out
}

func (w *writer) putPending(name string, p *spb.MetaPendingTable) error {
	v, err := proto.Marshal(p)
	if err != nil {
		return err
	}
	return w.tx.Bucket(bucketPending).Put([]byte(name), v)
}

// addTablets creates the UNASSIGNED tablets [start, k1), …, [kn-1, kn)
// and, when toEnd, [kn, “”) (or [start, “”) without keys). keys are
// validated and sort after start.
func (w *writer) addTablets(table string, start []byte, keys [][]byte, toEnd bool) ([]*pb.TabletMeta, error) {
	n := len(keys)
	if toEnd {
		n++
	}
	ids, err := w.nextIDs(n)
	if err != nil {
		return nil, err
	}
	out := make([]*pb.TabletMeta, 0, n)
	for i, id := range ids {
		r := &pb.RowRange{StartRow: start}
		if i > 0 {
			r.StartRow = keys[i-1]
		}
		if i < len(keys) {
			r.EndRow = keys[i]
		}
		t := &pb.TabletMeta{TabletId: id, Table: table, Range: r, State: pb.TabletState_TABLET_STATE_UNASSIGNED}
		if err := w.putTablet(nil, t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// publishSchema gives a new table's schema its version and stores it in
// tables.
func (w *writer) publishSchema(s *pb.TableSchema) error {
	schema := proto.Clone(s).(*pb.TableSchema)
	var err error
	if schema.Version, err = w.nextSchemaVersion(); err != nil {
		return err
	}
	v, err := proto.Marshal(schema)
	if err != nil {
		return err
	}
	return w.tx.Bucket(bucketTables).Put([]byte(schema.Name), v)
}

func (w *writer) createTablets(c *spb.MetaCreateTablets) (*Result, error) {
	if err := ValidateSplitKeys(c.SplitKeys); err != nil {
		return nil, err
	}
	if len(c.SplitKeys) > 0 && bytes.Compare(c.SplitKeys[0], c.StartRow) <= 0 {
		return nil, apierr.InvalidArgument("create chunk of table %q: split key %q does not sort after the chunk's start %q", c.Table, c.SplitKeys[0], c.StartRow)
	}
	if !c.Last && len(c.SplitKeys) == 0 {
		return nil, apierr.InvalidArgument("create chunk of table %q: a chunk before the last needs split keys", c.Table)
	}
	p, pending, err := w.PendingTable(c.Table)
	if err != nil {
		return nil, err
	}
	if c.First {
		if err := ValidateSchema(c.Schema); err != nil {
			return nil, err
		}
		if c.Schema.Name != c.Table {
			return nil, apierr.InvalidArgument("create chunk names table %q, its schema %q", c.Table, c.Schema.Name)
		}
		if len(c.StartRow) != 0 {
			return nil, apierr.InvalidArgument("the first create chunk of table %q starts at %q, not at the empty row", c.Table, c.StartRow)
		}
		if w.tx.Bucket(bucketTables).Get([]byte(c.Table)) != nil {
			return nil, apierr.AlreadyExists("table %q already exists", c.Table)
		}
		if pending {
			return nil, apierr.Unavailable("table %q is being created or deleted; retry when that finished", c.Table)
		}
		p = &spb.MetaPendingTable{Schema: c.Schema}
	} else {
		switch {
		case !pending:
			return nil, apierr.Unavailable("table %q is not being created (its creation was rolled back); retry the CreateTable", c.Table)
		case p.Deleting:
			return nil, apierr.Unavailable("the creation of table %q is being rolled back; retry the CreateTable", c.Table)
		case !bytes.Equal(p.NextRow, c.StartRow):
			return nil, apierr.FailedPrecondition("create chunk of table %q starts at %q, the table's tablets end at %q", c.Table, c.StartRow, p.NextRow)
		}
	}
	tablets, err := w.addTablets(c.Table, c.StartRow, c.SplitKeys, c.Last)
	if err != nil {
		return nil, err
	}
	if c.Last {
		if err := w.publishSchema(p.Schema); err != nil {
			return nil, err
		}
		if err := w.tx.Bucket(bucketPending).Delete([]byte(c.Table)); err != nil {
			return nil, err
		}
	} else {
		p.NextRow = c.SplitKeys[len(c.SplitKeys)-1]
		if err := w.putPending(c.Table, p); err != nil {
			return nil, err
		}
	}
	return &Result{Tablets: tablets}, nil
}

func (w *writer) deleteTablets(c *spb.MetaDeleteTablets) (*Result, error) {
	if c.Max == 0 {
		return nil, apierr.InvalidArgument("delete chunk of table %q deletes no tablet (max 0)", c.Table)
	}
	p, pending, err := w.PendingTable(c.Table)
	if err != nil {
		return nil, err
	}
	if !pending {
		s, err := w.Table(c.Table)
		if err != nil {
			return nil, err
		}
		p = &spb.MetaPendingTable{Schema: s}
		if err := w.tx.Bucket(bucketTables).Delete([]byte(c.Table)); err != nil {
			return nil, err
		}
	}
	if !p.Deleting {
		p.Deleting = true
		if err := w.putPending(c.Table, p); err != nil {
			return nil, err
		}
	}
	tablets, err := w.TableTablets(c.Table, nil, int(c.Max)+1)
	if err != nil {
		return nil, err
	}
	done := len(tablets) <= int(c.Max)
	tablets = tablets[:min(len(tablets), int(c.Max))]
	for _, t := range tablets {
		if err := w.deleteTablet(t); err != nil {
			return nil, err
		}
		if err := w.dropRecoveryFiles(t); err != nil {
			return nil, err
		}
	}
	if done {
		if err := w.tx.Bucket(bucketPending).Delete([]byte(c.Table)); err != nil {
			return nil, err
		}
	}
	return &Result{Tablets: tablets, Done: done}, nil
}
