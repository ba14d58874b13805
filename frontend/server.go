package frontend

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/client"
)

// DefaultAddr is where `bighive dev` serves the API: the emulator's port,
// so BIGTABLE_EMULATOR_HOST=127.0.0.1:8086 works unchanged.
const DefaultAddr = "127.0.0.1:8086"

// Server is the Bigtable API over one Bighive client.
type Server struct {
	c   *client.Client
	log *slog.Logger

	// wholeRowBytes: ReadRows sends a row of at most this many bytes of
	// cell data whole in one response, and cuts a larger one.
	wholeRowBytes int

	mu     sync.Mutex
	tables map[string]*client.Table // by Bighive table name

	ops    operations    // CreateBackup's, RestoreTable's and CopyBackup's (operations.go)
	opWait time.Duration // how long a request waits for its operation
}

// New returns a server that reaches the cluster through c (which it does
// not close).
func New(c *client.Client, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{c: c, log: log, wholeRowBytes: DefaultWholeRowBytes, tables: map[string]*client.Table{}, opWait: defaultOpWait}
}

// SetWholeRowBytes sets the bound of the rows ReadRows sends whole in one
// response (DefaultWholeRowBytes; n <= 0 keeps it); a larger row is cut
// across responses of about 1 MiB. A bound at or above the largest row
// keeps every row whole, for Go clients that raised their receive limit
// (their reader refuses a row cut across responses), and makes responses
// as large as the rows. Call it before Register.
func (s *Server) SetWholeRowBytes(n int) *Server {
	if n > 0 {
		s.wholeRowBytes = n
	}
	return s
}

// Register adds the data and table admin services, and the long-running
// operations of the admin service, to g.
func (s *Server) Register(g *grpc.Server) {
	btpb.RegisterBigtableServer(g, &dataServer{s: s})
	adminpb.RegisterBigtableTableAdminServer(g, &adminServer{s: s})
	longrunningpb.RegisterOperationsServer(g, &operationsServer{s: s})
}

// dataServer is google.bigtable.v2.Bigtable.
type dataServer struct {
	btpb.UnimplementedBigtableServer
	s *Server
}

// adminServer is google.bigtable.admin.v2.BigtableTableAdmin.
type adminServer struct {
	adminpb.UnimplementedBigtableTableAdminServer
	s *Server
}

// tableName is a parsed projects/{p}/instances/{i}/tables/{t}.
type tableName struct {
	project, instance, table string
}

// parent is projects/{p}/instances/{i}.
func (n tableName) parent() string { return "projects/" + n.project + "/instances/" + n.instance }

func (n tableName) String() string { return n.parent() + "/tables/" + n.table }

// parseInstance parses projects/{p}/instances/{i}.
func parseInstance(name string) (tableName, error) {
	p := strings.Split(name, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "instances" || p[1] == "" || p[3] == "" {
		return tableName{}, reqErr(codes.InvalidArgument, "malformed instance name %q: want projects/{project}/instances/{instance}", name)
	}
	return tableName{project: p[1], instance: p[3]}, nil
}

// parseTable parses projects/{p}/instances/{i}/tables/{t}.
func parseTable(name string) (tableName, error) {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[2] != "instances" || p[4] != "tables" || p[1] == "" || p[3] == "" || p[5] == "" {
		return tableName{}, reqErr(codes.InvalidArgument, "malformed table name %q: want projects/{project}/instances/{instance}/tables/{table}", name)
	}
	return tableName{project: p[1], instance: p[3], table: p[5]}, nil
}

// table returns the client table of a table resource name, opening it
// (which checks that it exists) the first time.
func (s *Server) table(ctx context.Context, name string) (*client.Table, error) {
	n, err := parseTable(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	t, ok := s.tables[n.table]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err = s.c.Open(ctx, n.table)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.tables[n.table] = t
	s.mu.Unlock()
	return t, nil
}

// forget drops a deleted table's cached client table.
func (s *Server) forget(table string) {
	s.mu.Lock()
	delete(s.tables, table)
	s.mu.Unlock()
}
