package auth

import (
	"context"
	"strings"

	pb "bighive/proto/bighivepb"
)

// Kind is how a method is checked.
type Kind int

const (
	// Public methods need no credential (health checks, reflection).
	Public Kind = iota
	// Internal methods are server-to-server; the transport guards them
	// (server-role mutual TLS), not tokens or grants.
	Internal
	// Authenticated methods need a known principal and no role (cluster
	// information: list tables, tservers, status, ping).
	Authenticated
	// TableRole methods need Need.Role on the table of the request.
	TableRole
	// PerCommand streams (BatchCommands) authenticate when the stream opens;
	// the handler checks each command with Checker.Check.
	PerCommand
)

// TableFrom names where a method's table comes from.
type TableFrom int

const (
	// AllTables: the method needs the role on every table.
	AllTables TableFrom = iota
	// FromTableField: the request's table name (table, name, or
	// schema.name of CreateTable).
	FromTableField
	// FromTablet: the table of the tablet the request names (tserver
	// calls); an empty tablet id means every tablet, so every table.
	FromTablet
)

// Need is what one method requires.
type Need struct {
	Kind  Kind
	Role  Role
	Table TableFrom
}

const (
	masterSvc  = "/bighive.v1.Master/"
	tserverSvc = "/bighive.v1.TServer/"
)

var (
	internal = Need{Kind: Internal}
	authed   = Need{Kind: Authenticated}
	// adminAll: admin on every table.
	adminAll    = Need{Kind: TableRole, Role: RoleAdmin, Table: AllTables}
	ddl         = Need{Kind: TableRole, Role: RoleAdmin, Table: FromTableField}
	readTable   = Need{Kind: TableRole, Role: RoleRead, Table: FromTableField}
	readTablet  = Need{Kind: TableRole, Role: RoleRead, Table: FromTablet}
	writeTablet = Need{Kind: TableRole, Role: RoleWrite, Table: FromTablet}
)

// Methods is every gRPC method of the Master and TServer services with what
// it needs. A method not listed needs admin on every table (Lookup).
var Methods = map[string]Need{
	// Master: DDL and table administration, admin on the table.
	masterSvc + "CreateTable":          ddl,
	masterSvc + "DeleteTable":          ddl,
	masterSvc + "AddFamily":            ddl,
	masterSvc + "DeleteFamily":         ddl,
	masterSvc + "SetGCRule":            ddl,
	masterSvc + "SetFamilyCompression": ddl,
	masterSvc + "SetCachePriority":     ddl,
	masterSvc + "DropRowRange":         ddl,
	masterSvc + "SplitTablet":          ddl,
	masterSvc + "MergeTablets":         ddl,
	// Master: backups. A backup of a table needs admin on it; the others
	// read or change what any table held, so admin on every table.
	masterSvc + "CreateBackup": ddl,
	masterSvc + "GetBackup":    adminAll,
	masterSvc + "ListBackups":  adminAll,
	masterSvc + "UpdateBackup": adminAll,
	masterSvc + "DeleteBackup": adminAll,
	masterSvc + "RestoreTable": adminAll,
	masterSvc + "CopyBackup":   adminAll,
	masterSvc + "ImportBackup": adminAll,
	// Master: reads of a table's metadata, read on the table.
	masterSvc + "DescribeTable":     readTable,
	masterSvc + "GetTableLocations": readTable,
	// Master: cluster information.
	masterSvc + "ListTables":      authed,
	masterSvc + "ListTServers":    authed,
	masterSvc + "GetMasterStatus": authed,
	// Master: permissions.
	masterSvc + "Grant":      adminAll,
	masterSvc + "Revoke":     adminAll,
	masterSvc + "ListGrants": adminAll,
	// Master: called by tservers.
	masterSvc + "RegisterTServer":   internal,
	masterSvc + "Heartbeat":         internal,
	masterSvc + "ReportTabletLoad":  internal,
	masterSvc + "ReportTabletLoads": internal,
	masterSvc + "ReportCheckpoint":  internal,
	masterSvc + "AllocateTabletIds": internal,
	masterSvc + "ReportSplit":       internal,
	masterSvc + "ReportLogSplit":    internal,
	masterSvc + "GetGCReferences":   internal,
	masterSvc + "ReportMerge":       internal,
	masterSvc + "SharedTSFiles":     internal,

	// TServer: data.
	tserverSvc + "MutateRow":          writeTablet,
	tserverSvc + "MutateRows":         writeTablet,
	tserverSvc + "ReadModifyWriteRow": writeTablet,
	tserverSvc + "CheckAndMutateRow":  writeTablet,
	tserverSvc + "ReadRow":            readTablet,
	tserverSvc + "ScanRows":           readTablet,
	tserverSvc + "SampleRowKeys":      readTablet,
	tserverSvc + "BatchCommands":      {Kind: PerCommand},
	// TServer: operations.
	tserverSvc + "Checkpoint": adminAll,
	tserverSvc + "Compact":    {Kind: TableRole, Role: RoleAdmin, Table: FromTablet},
	tserverSvc + "Status":     authed,
	// TServer: a backup's export and import read and write what any
	// table may hold.
	tserverSvc + "ExportTSFile": adminAll,
	tserverSvc + "ImportTSFile": adminAll,
	tserverSvc + "Ping":         authed,
	// TServer: called by the master.
	tserverSvc + "Split":            internal,
	tserverSvc + "AssignTablets":    internal,
	tserverSvc + "SetCachePriority": internal,
	tserverSvc + "UpdateSchema":     internal,
	tserverSvc + "DropRows":         internal,
	tserverSvc + "PurgeFamily":      internal,
	tserverSvc + "Merge":            internal,
}

// The BatchCommands stream's commands, checked one by one as the unary
// call of the same name would be.
const (
	BatchMutateRow = tserverSvc + "BatchCommands/MutateRow"
	BatchReadRow   = tserverSvc + "BatchCommands/ReadRow"
)

// Lookup is what method needs. Health checks and reflection are public; a
// method of no table (another service, a method added without a line) needs
// admin on every table.
func Lookup(method string) Need {
	if n, ok := Methods[method]; ok {
		return n
	}
	if strings.HasPrefix(method, "/grpc.health.v1.Health/") || strings.HasPrefix(method, "/grpc.reflection.") {
		return Need{Kind: Public}
	}
	return adminAll
}

// tableOf returns the table a request names for Need.Table, via the
// Checker's TabletTable for tserver requests.
func (c *Checker) tableOf(ctx context.Context, n Need, req any) (string, error) {
	switch n.Table {
	case FromTableField:
		switch r := req.(type) {
		case *pb.CreateTableRequest:
			return r.GetSchema().GetName(), nil
		case interface{ GetTable() string }:
			return r.GetTable(), nil
		case interface{ GetName() string }:
			return r.GetName(), nil
		}
	case FromTablet:
		r, ok := req.(interface{ GetTabletId() string })
		if !ok || c.cfg.TabletTable == nil {
			break
		}
		if r.GetTabletId() == "" {
			return "", nil
		}
		return c.cfg.TabletTable(ctx, r.GetTabletId())
	}
	return "", nil
}
