package master

import (
	"context"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	"bighive/meta"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// CreateTable creates a table and its initial tablets, in commands of at
// most Config.DDLChunk tablets (ddlchunk.go); it returns once the table is
// visible. The leader loop assigns the tablets.
func (m *Master) CreateTable(ctx context.Context, req *pb.CreateTableRequest) (*pb.CreateTableResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := meta.ValidateSchema(req.Schema); err != nil {
		return nil, err
	}
	if err := meta.ValidateSplitKeys(req.SplitKeys); err != nil {
		return nil, err
	}
	n, err := m.createChunked(ctx, ls, req.Schema, req.SplitKeys)
	if err != nil {
		return nil, err
	}
	ls.poke()
	m.log.Info("table created", "table", req.Schema.Name, "tablets", n)
	m.events.add("table", "table %s created with %d tablets", req.Schema.Name, n)
	return &pb.CreateTableResponse{Table: &pb.TableInfo{Schema: req.Schema, TabletCount: int32(n),
		CachePriority: pb.CachePriority_CACHE_PRIORITY_MEDIUM}}, nil
}

// DeleteTable removes the table and its tablets from the metadata, in
// commands of at most Config.DDLChunk tablets (the first one hides the
// table); their tservers unload them on their next heartbeat, and their
// blocks and logs are collected by reference later.
func (m *Master) DeleteTable(ctx context.Context, req *pb.DeleteTableRequest) (*pb.DeleteTableResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Name); err != nil {
		return nil, err
	}
	n, err := m.deleteChunked(ctx, ls, req.Name)
	if err != nil {
		return nil, err
	}
	m.log.Info("table deleted", "table", req.Name, "tablets", n)
	m.events.add("table", "table %s deleted (%d tablets)", req.Name, n)
	return &pb.DeleteTableResponse{}, nil
}

func (ls *leaderState) priority(table string) pb.CachePriority {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return effective(ls.prio[table])
}

func effective(p pb.CachePriority) pb.CachePriority {
	if p == pb.CachePriority_CACHE_PRIORITY_UNSPECIFIED {
		return pb.CachePriority_CACHE_PRIORITY_MEDIUM
	}
	return p
}

// ListTables lists every table (leader read).
func (m *Master) ListTables(ctx context.Context, req *pb.ListTablesRequest) (*pb.ListTablesResponse, error) {
	ls, err := m.readyRead()
	if err != nil {
		return nil, err
	}
	resp := &pb.ListTablesResponse{}
	err = m.view(func(r *meta.Reader) error {
		tables, err := r.Tables()
		if err != nil {
			return err
		}
		for _, s := range tables {
			resp.Tables = append(resp.Tables, &pb.TableInfo{Schema: s, TabletCount: int32(r.TabletCount(s.Name)),
				CachePriority: ls.priority(s.Name)})
		}
		return nil
	})
	return resp, err
}

// DescribeTable returns a table, its tablets and their reported sizes.
func (m *Master) DescribeTable(ctx context.Context, req *pb.DescribeTableRequest) (*pb.DescribeTableResponse, error) {
	ls, err := m.readyRead()
	if err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Name); err != nil {
		return nil, err
	}
	resp := &pb.DescribeTableResponse{TabletSizes: map[string]int64{}, TabletSpace: map[string]*pb.TabletSpace{}}
	err = m.view(func(r *meta.Reader) error {
		s, err := r.Table(req.Name)
		if err != nil {
			return err
		}
		if resp.Tablets, err = r.TableTablets(req.Name, nil, 0); err != nil {
			return err
		}
		resp.Table = &pb.TableInfo{Schema: s, TabletCount: int32(len(resp.Tablets)), CachePriority: ls.priority(s.Name)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	for _, t := range resp.Tablets {
		if sz, ok := ls.sizes[t.TabletId]; ok {
			resp.TabletSizes[t.TabletId] = sz
		}
		if sp := ls.space[t.TabletId]; sp != nil {
			resp.TabletSpace[t.TabletId] = sp
		}
	}
	ls.mu.Unlock()
	return resp, nil
}

// AddFamily adds a column family to a table's schema and pushes the new
// schema to the tservers serving the table (schema.go): writes to the
// family succeed as soon as it returns.
func (m *Master) AddFamily(ctx context.Context, req *pb.AddFamilyRequest) (*pb.AddFamilyResponse, error) {
	if _, err := m.ready(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if err := meta.ValidateFamily(req.Family); err != nil {
		return nil, err
	}
	// A deletion of the name that a failure interrupted is finished
	// first: the new family must not show the old one's cells.
	if err := m.purgeFamily(ctx, req.Table, req.Family.GetName()); err != nil {
		return nil, err
	}
	if err := m.changeSchema(ctx, req.Table, &spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{
		Table: req.Table, Family: req.Family}}}, codes.AlreadyExists); err != nil {
		return nil, err
	}
	return &pb.AddFamilyResponse{}, nil
}

// SetCachePriority records a table's cache priority in the leader's memory
// (not persisted: a priority is a hint, not table metadata) and pushes it to the tservers holding its
// tablets in their next heartbeat replies.
func (m *Master) SetCachePriority(ctx context.Context, req *pb.SetCachePriorityRequest) (*pb.SetCachePriorityResponse, error) {
	ls, err := m.ready()
	if err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	if _, ok := pb.CachePriority_name[int32(req.Priority)]; !ok {
		return nil, apierr.InvalidArgument("cache priority %d is not HIGH, MEDIUM or LOW", req.Priority)
	}
	if err := m.view(func(r *meta.Reader) error { _, err := r.Table(req.Table); return err }); err != nil {
		return nil, err
	}
	ls.mu.Lock()
	ls.prio[req.Table] = effective(req.Priority)
	ls.mu.Unlock()
	return &pb.SetCachePriorityResponse{}, nil
}

// GetTableLocations returns the tablets of a table from the one holding
// start_row on, with their owners (leader read, never stale).
func (m *Master) GetTableLocations(ctx context.Context, req *pb.GetTableLocationsRequest) (*pb.GetTableLocationsResponse, error) {
	if _, err := m.readyRead(); err != nil {
		return nil, err
	}
	if err := limits.ValidateTableName(req.Table); err != nil {
		return nil, err
	}
	resp := &pb.GetTableLocationsResponse{}
	err := m.view(func(r *meta.Reader) error {
		s, err := r.Table(req.Table)
		if err != nil {
			return err
		}
		resp.Schema = s
		tablets, err := r.TableTablets(req.Table, req.StartRow, int(req.Limit))
		if err != nil {
			return err
		}
		addr := map[string]string{}
		for _, t := range tablets {
			loc := &pb.TabletLocation{TabletId: t.TabletId, Range: t.Range, Epoch: t.Epoch, State: t.State}
			if t.State != pb.TabletState_TABLET_STATE_UNASSIGNED && t.TserverUuid != "" {
				a, ok := addr[t.TserverUuid]
				if !ok {
					if ts, err := r.TServer(t.TserverUuid); err == nil {
						a = ts.Address
					}
					addr[t.TserverUuid] = a
				}
				loc.TserverUuid, loc.TserverAddress = t.TserverUuid, a
			}
			resp.Locations = append(resp.Locations, loc)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
