package clienttest

import (
	"context"
	"sort"

	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

type master struct {
	pb.UnimplementedMasterServer
	c    *Cluster
	idx  int
	addr string
}

func (m *master) address() string { return m.addr }

// lead locks the cluster if this master leads, else returns NotLeader.
func (m *master) lead() error {
	m.c.mu.Lock()
	if m.c.leader != m.idx {
		hint := m.c.masters[m.c.leader].addr
		m.c.mu.Unlock()
		return apierr.NotLeader(hint)
	}
	return nil
}

func (m *master) CreateTable(ctx context.Context, req *pb.CreateTableRequest) (*pb.CreateTableResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	var splits []string
	for _, k := range req.SplitKeys {
		splits = append(splits, string(k))
	}
	if err := m.c.createLocked(proto.Clone(req.Schema).(*pb.TableSchema), splits); err != nil {
		return nil, err
	}
	return &pb.CreateTableResponse{Table: m.c.infoLocked(req.Schema.Name)}, nil
}

func (c *Cluster) infoLocked(name string) *pb.TableInfo {
	t := c.tables[name]
	return &pb.TableInfo{Schema: t.schema, TabletCount: int32(len(t.tablets)), CachePriority: t.priority}
}

func (m *master) DeleteTable(ctx context.Context, req *pb.DeleteTableRequest) (*pb.DeleteTableResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	if _, ok := m.c.tables[req.Name]; !ok {
		return nil, apierr.NotFound("table %q does not exist", req.Name)
	}
	delete(m.c.tables, req.Name)
	return &pb.DeleteTableResponse{}, nil
}

func (m *master) ListTables(ctx context.Context, req *pb.ListTablesRequest) (*pb.ListTablesResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	resp := &pb.ListTablesResponse{}
	for name := range m.c.tables {
		resp.Tables = append(resp.Tables, m.c.infoLocked(name))
	}
	return resp, nil
}

func (m *master) SetCachePriority(ctx context.Context, req *pb.SetCachePriorityRequest) (*pb.SetCachePriorityResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	t, ok := m.c.tables[req.Table]
	if !ok {
		return nil, apierr.NotFound("table %q does not exist", req.Table)
	}
	t.priority = req.Priority
	return &pb.SetCachePriorityResponse{}, nil
}

func (m *master) location(tb *tablet) *pb.TabletLocation {
	l := &pb.TabletLocation{
		TabletId: tb.id,
		Range:    &pb.RowRange{StartRow: []byte(tb.start), EndRow: []byte(tb.end)},
		Epoch:    tb.epoch,
		State:    pb.TabletState_TABLET_STATE_UNASSIGNED,
	}
	if tb.owner >= 0 {
		l.TserverAddress = m.c.tservers[tb.owner].addr
		l.TserverUuid = l.TserverAddress
		l.State = pb.TabletState_TABLET_STATE_SERVING
	}
	return l
}

func (m *master) GetTableLocations(ctx context.Context, req *pb.GetTableLocationsRequest) (*pb.GetTableLocationsResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	t, ok := m.c.tables[req.Table]
	if !ok {
		return nil, apierr.NotFound("table %q does not exist", req.Table)
	}
	resp := &pb.GetTableLocationsResponse{Schema: t.schema}
	row := string(req.StartRow)
	for _, tb := range t.tablets {
		if tb.end != "" && tb.end <= row {
			continue
		}
		resp.Locations = append(resp.Locations, m.location(tb))
		if req.Limit > 0 && len(resp.Locations) == int(req.Limit) {
			break
		}
	}
	return resp, nil
}

func (m *master) DescribeTable(ctx context.Context, req *pb.DescribeTableRequest) (*pb.DescribeTableResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	t, ok := m.c.tables[req.Name]
	if !ok {
		return nil, apierr.NotFound("table %q does not exist", req.Name)
	}
	resp := &pb.DescribeTableResponse{Table: m.c.infoLocked(req.Name), TabletSizes: map[string]int64{}}
	for _, tb := range t.tablets {
		var size int64
		for row, cells := range t.rows {
			if tb.contains(row) {
				for _, c := range cells {
					size += int64(len(row) + len(c.Family) + len(c.Qualifier) + len(c.Value) + 8)
				}
			}
		}
		resp.TabletSizes[tb.id] = size
		resp.Tablets = append(resp.Tablets, &pb.TabletMeta{TabletId: tb.id, Table: req.Name, Epoch: tb.epoch})
	}
	return resp, nil
}

func (m *master) ListTServers(ctx context.Context, req *pb.ListTServersRequest) (*pb.ListTServersResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	defer m.c.mu.Unlock()
	resp := &pb.ListTServersResponse{}
	for i, s := range m.c.tservers {
		n := 0
		for _, t := range m.c.tables {
			for _, tb := range t.tablets {
				if tb.owner == i {
					n++
				}
			}
		}
		resp.Tservers = append(resp.Tservers, &pb.TServerInfo{Uuid: s.addr, Address: s.addr, Live: s.srv != nil, TabletCount: int32(n)})
	}
	sort.Slice(resp.Tservers, func(i, j int) bool { return resp.Tservers[i].Address < resp.Tservers[j].Address })
	return resp, nil
}

func (m *master) SplitTablet(ctx context.Context, req *pb.SplitTabletRequest) (*pb.SplitTabletResponse, error) {
	if err := m.lead(); err != nil {
		return nil, err
	}
	_, tb, err := m.c.tabletLocked(req.Table, string(req.SplitRow))
	m.c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if tb.start == string(req.SplitRow) {
		return nil, apierr.FailedPrecondition("row %q already starts tablet %s", req.SplitRow, tb.id)
	}
	m.c.Split(req.Table, string(req.SplitRow))
	return &pb.SplitTabletResponse{}, nil
}
