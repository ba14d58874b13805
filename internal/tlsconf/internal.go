package tlsconf

import pb "bighive/proto/bighivepb"

// InternalMethods are the full gRPC method names only servers call on
// each other (tserver to master, master to tserver; a follower master
// forwarding to the leader passes them on with its own certificate). With
// TLS on they need a peer certificate with the server role. Every other
// method is a client's: data, DDL and admin calls, whose caller is
// checked by the permissions, not here.
var InternalMethods = map[string]bool{
	// tserver → master
	pb.Master_RegisterTServer_FullMethodName:   true,
	pb.Master_Heartbeat_FullMethodName:         true,
	pb.Master_ReportTabletLoad_FullMethodName:  true,
	pb.Master_ReportTabletLoads_FullMethodName: true,
	pb.Master_ReportCheckpoint_FullMethodName:  true,
	pb.Master_AllocateTabletIds_FullMethodName: true,
	pb.Master_ReportSplit_FullMethodName:       true,
	pb.Master_ReportLogSplit_FullMethodName:    true,
	pb.Master_GetGCReferences_FullMethodName:   true,
	pb.Master_ReportMerge_FullMethodName:       true,

	// master → tserver
	pb.TServer_AssignTablets_FullMethodName:    true,
	pb.TServer_UpdateSchema_FullMethodName:     true,
	pb.TServer_DropRows_FullMethodName:         true,
	pb.TServer_PurgeFamily_FullMethodName:      true,
	pb.TServer_Split_FullMethodName:            true,
	pb.TServer_Merge_FullMethodName:            true,
	pb.TServer_SetCachePriority_FullMethodName: true,
}

// IsInternal reports whether method (a full method name,
// "/bighive.v1.Master/Heartbeat") is one of InternalMethods.
func IsInternal(method string) bool { return InternalMethods[method] }
