// Package clienttest is an in-memory Bighive for tests of the client and
// the CLI: masters and tservers that speak the real gRPC API on loopback
// and keep rows in memory, with faults injected per call (the client's
// fault-injection seam). It models what the client relies on — tablets
// with ranges, owners and epochs, routing errors with TabletError details,
// NotLeader hints, server timestamps, read filters — not durability.
package clienttest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// Options configures Start.
type Options struct {
	Masters  int // default 1; the first is the leader
	TServers int // default 1
}

// Cluster is the fake cluster. All methods are safe for concurrent use.
type Cluster struct {
	mu       sync.Mutex
	tables   map[string]*table
	masters  []*server
	tservers []*server
	leader   int
	nextID   int
	lastTS   int64
	nextTS   int // round-robin tserver for new tablets
	faults   []*Fault
	calls    map[string]int
}

type table struct {
	schema   *pb.TableSchema
	priority pb.CachePriority
	tablets  []*tablet // sorted by start
	rows     map[string][]*pb.Cell
}

type tablet struct {
	id         string
	start, end string
	owner      int // tserver index; -1 none
	epoch      int64
	recovering bool
}

func (t *tablet) contains(row string) bool {
	return t.start <= row && (t.end == "" || row < t.end)
}

type server struct {
	addr string
	lis  net.Listener
	srv  *grpc.Server
}

// Start starts the fake cluster; t.Cleanup stops it.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Masters <= 0 {
		opts.Masters = 1
	}
	if opts.TServers <= 0 {
		opts.TServers = 1
	}
	c := &Cluster{tables: map[string]*table{}, calls: map[string]int{}}
	for i := 0; i < opts.Masters; i++ {
		s, err := c.serve("127.0.0.1:0", func(g *grpc.Server, addr string) { pb.RegisterMasterServer(g, &master{c: c, idx: i, addr: addr}) })
		if err != nil {
			t.Fatal(err)
		}
		c.masters = append(c.masters, s)
	}
	for i := 0; i < opts.TServers; i++ {
		s, err := c.serve("127.0.0.1:0", func(g *grpc.Server, addr string) { pb.RegisterTServerServer(g, &tserver{c: c, idx: i, addr: addr}) })
		if err != nil {
			t.Fatal(err)
		}
		c.tservers = append(c.tservers, s)
	}
	t.Cleanup(c.Close)
	return c
}

func (c *Cluster) serve(addr string, register func(g *grpc.Server, addr string)) (*server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	addr = lis.Addr().String()
	opts := append(limits.GRPCServerOptions(),
		grpc.ChainUnaryInterceptor(c.unaryFaults, apierr.UnaryServerInterceptor(nil)),
		grpc.ChainStreamInterceptor(c.streamFaults, apierr.StreamServerInterceptor(nil)))
	g := grpc.NewServer(opts...)
	register(g, addr)
	go g.Serve(lis)
	return &server{addr: addr, lis: lis, srv: g}, nil
}

// Close stops every server.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range append(append([]*server{}, c.masters...), c.tservers...) {
		if s != nil && s.srv != nil {
			s.srv.Stop()
			s.srv = nil
		}
	}
}

// MasterAddrs returns the masters' addresses.
func (c *Cluster) MasterAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.masters {
		out = append(out, m.addr)
	}
	return out
}

// TServerAddr returns tserver i's address.
func (c *Cluster) TServerAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tservers[i].addr
}

// SetLeader makes master i the leader; the others answer NotLeader with
// its address as the hint.
func (c *Cluster) SetLeader(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
}

// StopTServer stops tserver i (its port refuses connections).
func (c *Cluster) StopTServer(i int) {
	c.mu.Lock()
	s := c.tservers[i]
	g := s.srv
	s.srv = nil
	c.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// RestartTServer serves tserver i again on its old address.
func (c *Cluster) RestartTServer(i int) error {
	c.mu.Lock()
	addr := c.tservers[i].addr
	c.mu.Unlock()
	s, err := c.serve(addr, func(g *grpc.Server, addr string) { pb.RegisterTServerServer(g, &tserver{c: c, idx: i, addr: addr}) })
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.tservers[i] = s
	c.mu.Unlock()
	return nil
}

// Fault makes calls fail. A fault matches a call by method and server;
// it fires Times times (0 means once), then is spent.
type Fault struct {
	// Method is the gRPC method's name ("MutateRow", "GetTableLocations", …).
	Method string
	// Server is the address the call must go to; "" matches any.
	Server string
	Times  int
	// Err is the error returned (an apierr error or a status).
	Err error
	// Applied runs the handler first and then fails: a reply lost after the
	// tserver logged the write.
	Applied bool
	// AfterRows, for ScanRows, sends that many rows before failing.
	AfterRows int
	// Delay holds the call this long (or until its context ends) first.
	Delay time.Duration
	// Row, for MutateRows, fails only that row, with Err as its per-row
	// status; the other rows of the request are applied. Without Applied
	// the failed row is not applied. A request without the row does not
	// match the fault.
	Row string
}

// Inject adds a fault.
func (c *Cluster) Inject(f Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.Times <= 0 {
		f.Times = 1
	}
	c.faults = append(c.faults, &f)
}

// ClearFaults drops the injected faults that have not fired yet.
func (c *Cluster) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = nil
}

// Calls returns how many calls of method (all servers) were received.
func (c *Cluster) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// take returns the fault the call matches, consuming one firing, and
// counts the call.
func (c *Cluster) take(fullMethod, server string, req any) *Fault {
	method := fullMethod[strings.LastIndex(fullMethod, "/")+1:]
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	for i, f := range c.faults {
		if f.Method == method && (f.Server == "" || f.Server == server) && (f.Row == "" || hasRow(req, f.Row)) {
			f.Times--
			if f.Times == 0 {
				c.faults = append(c.faults[:i:i], c.faults[i+1:]...)
			}
			cp := *f
			return &cp
		}
	}
	return nil
}

func (c *Cluster) unaryFaults(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	f := c.take(info.FullMethod, serverAddr(info.Server), req)
	if f == nil {
		return h(ctx, req)
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.Row != "" {
		return rowFault(ctx, req, h, f)
	}
	if f.Applied {
		if _, err := h(ctx, req); err != nil {
			return nil, err
		}
	}
	if f.Err == nil {
		return h(ctx, req)
	}
	return nil, f.Err
}

// hasRow reports whether req is a MutateRows request holding row.
func hasRow(req any, row string) bool {
	r, ok := req.(*pb.MutateRowsRequest)
	return ok && slices.ContainsFunc(r.Rows, func(rm *pb.RowMutation) bool { return string(rm.RowKey) == row })
}

// rowFault runs a MutateRows whose row f.Row fails with f.Err.
func rowFault(ctx context.Context, req any, h grpc.UnaryHandler, f *Fault) (any, error) {
	r := req.(*pb.MutateRowsRequest)
	j := slices.IndexFunc(r.Rows, func(rm *pb.RowMutation) bool { return string(rm.RowKey) == f.Row })
	sent := r
	if !f.Applied {
		sent = &pb.MutateRowsRequest{TabletId: r.TabletId, Epoch: r.Epoch, Rows: slices.Delete(slices.Clone(r.Rows), j, j+1)}
	}
	out, err := h(ctx, sent)
	if err != nil {
		return nil, err
	}
	resp := out.(*pb.MutateRowsResponse)
	st := apierr.RowStatus(f.Err)
	st.Message = f.Err.Error()
	if f.Applied {
		resp.Statuses[j] = st
	} else {
		resp.Statuses = slices.Insert(resp.Statuses, j, st)
	}
	return resp, nil
}

func (c *Cluster) streamFaults(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	f := c.take(info.FullMethod, serverAddr(srv), nil)
	if f == nil {
		return h(srv, ss)
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-ss.Context().Done():
			return ss.Context().Err()
		}
	}
	if f.Err == nil {
		return h(srv, ss)
	}
	if f.AfterRows > 0 {
		return h(srv, &cutStream{ServerStream: ss, left: f.AfterRows, err: f.Err})
	}
	return f.Err
}

// cutStream sends left rows, then fails the stream with err.
type cutStream struct {
	grpc.ServerStream
	left int
	err  error
}

func (s *cutStream) SendMsg(m any) error {
	resp, ok := m.(*pb.ScanRowsResponse)
	if !ok {
		return s.ServerStream.SendMsg(m)
	}
	if s.left <= 0 {
		return s.err
	}
	if len(resp.Rows) > s.left {
		resp = &pb.ScanRowsResponse{Rows: resp.Rows[:s.left]}
	}
	s.left -= len(resp.Rows)
	if err := s.ServerStream.SendMsg(resp); err != nil {
		return err
	}
	if s.left <= 0 {
		return s.err
	}
	return nil
}

type addressed interface{ address() string }

func serverAddr(srv any) string {
	if a, ok := srv.(addressed); ok {
		return a.address()
	}
	return ""
}

// CreateTable creates a table directly (no client), with one tablet per
// range between the split keys, spread round-robin over the tservers.
func (c *Cluster) CreateTable(schema *pb.TableSchema, splits ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.createLocked(schema, splits)
}

func (c *Cluster) createLocked(schema *pb.TableSchema, splits []string) error {
	if _, ok := c.tables[schema.Name]; ok {
		return apierr.AlreadyExists("table %q already exists", schema.Name)
	}
	sort.Strings(splits)
	t := &table{schema: schema, rows: map[string][]*pb.Cell{}}
	bounds := append([]string{""}, splits...)
	for i, start := range bounds {
		end := ""
		if i+1 < len(bounds) {
			end = bounds[i+1]
		}
		t.tablets = append(t.tablets, c.newTabletLocked(start, end))
	}
	c.tables[schema.Name] = t
	return nil
}

func (c *Cluster) newTabletLocked(start, end string) *tablet {
	c.nextID++
	tb := &tablet{id: fmt.Sprintf("t%016x", c.nextID), start: start, end: end, owner: c.nextTS % len(c.tservers), epoch: 1}
	c.nextTS++
	return tb
}

func (c *Cluster) tabletLocked(table, row string) (*table, *tablet, error) {
	t, ok := c.tables[table]
	if !ok {
		return nil, nil, apierr.NotFound("table %q does not exist", table)
	}
	for _, tb := range t.tablets {
		if tb.contains(row) {
			return t, tb, nil
		}
	}
	return nil, nil, apierr.NotFound("no tablet of %q holds %q", table, row)
}

// MoveTablet moves the tablet of table holding row to tserver to (-1: no
// tserver) at a new epoch. It returns the tablet id.
func (c *Cluster) MoveTablet(table, row string, to int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, tb, err := c.tabletLocked(table, row)
	if err != nil {
		panic(err)
	}
	tb.owner = to
	tb.epoch++
	return tb.id
}

// SetRecovering makes the tablet holding row answer RECOVERING (or serve
// again).
func (c *Cluster) SetRecovering(table, row string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, tb, err := c.tabletLocked(table, row)
	if err != nil {
		panic(err)
	}
	tb.recovering = on
}

// Split replaces the tablet of table holding row by two tablets split at
// row, both on the parent's tserver; the parent's id is gone.
func (c *Cluster) Split(table, row string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, tb, err := c.tabletLocked(table, row)
	if err != nil {
		panic(err)
	}
	if tb.start == row {
		return
	}
	a, b := c.newTabletLocked(tb.start, row), c.newTabletLocked(row, tb.end)
	a.owner, b.owner = tb.owner, tb.owner
	var out []*tablet
	for _, x := range t.tablets {
		if x == tb {
			out = append(out, a, b)
		} else {
			out = append(out, x)
		}
	}
	t.tablets = out
}

// Tablets returns the number of tablets of table.
func (c *Cluster) Tablets(table string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tables[table].tablets)
}
