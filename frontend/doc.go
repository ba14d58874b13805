// Package frontend serves the Cloud Bigtable API — the data service
// google.bigtable.v2.Bigtable and the table admin service
// google.bigtable.admin.v2.BigtableTableAdmin — over a Bighive cluster, so
// that Bigtable clients in any language talk to Bighive unchanged (for
// example through BIGTABLE_EMULATOR_HOST).
//
// Placement: a frontend is stateless. It holds one Bighive client
// (package client), whose location cache routes every row to the tserver
// of its tablet and whose retry rules ride through moves, splits and
// failovers; the frontend never keeps a second copy of locations or
// retries of its own. Cloud Bigtable likewise puts a routing frontend
// before its tablet servers. Any number of frontends may run (one per
// `bighive dev`, one per host, several behind a TCP load balancer): they
// share nothing but the cluster. A tserver may serve the API itself
// (cmd/tserver --bigtable): this package is then registered on the
// tserver's gRPC server, over a client that reaches that tserver's tablets
// in-process (client.WithLocalTServer).
//
// Tables created through CreateTable have millisecond timestamp
// granularity unless the request asks for MICROS (unspecified is MILLIS,
// as in Cloud Bigtable); the tablets truncate server timestamps and refuse
// other client timestamps, and the frontend only truncates a SetCell's
// CLIENT_AUTO_GENERATED timestamp (timestamp_origin) for such a table.
//
// Resource names are projects/{p}/instances/{i}/tables/{t}; any project and
// instance are accepted, like Google's emulator, and the table ID is the
// Bighive table. Backups are projects/{p}/instances/{i}/clusters/{c}/backups/{b}
// under any cluster too (Bighive's backups belong to no cluster); CreateBackup,
// RestoreTable and CopyBackup answer long-running operations, which this package also
// serves (google.longrunning.Operations, GetOperation): the work runs in the
// frontend that took the request, which keeps the operation in memory for an
// hour after it ends (operations.go). The messages are the official generated packages
// cloud.google.com/go/bigtable/apiv2/bigtablepb and
// cloud.google.com/go/bigtable/admin/apiv2/adminpb; no second copy of
// google.bigtable.* is generated here.
//
// The data service converts each request into client library calls
// (ReadRows with a row set and the request's RowFilter passed through to
// the tservers, Apply, ApplyBulk, conditional mutations, ReadModifyWrite,
// SampleRowKeyOffsets) with the caller's context, so the caller's deadline
// is the client's (without one, the client's retry timeout bounds the
// call). Every served method's error goes through one mapping
// (errors.go; the table of codes is docs/bigtable-api.md's "Errors"):
// the client's codes are kept (its package documentation, "Status rules":
// a write of unknown outcome is Unavailable saying so), but for an unknown
// column family, which is NotFound as in Cloud Bigtable; the message
// names the method, the row and the table's resource name, and none of
// Bighive's internal prefixes. DeadlineExceeded, which the Cloud Bigtable
// clients take for their own deadline and do not retry, is answered only
// once the caller's deadline has passed; any other is Unavailable. A ReadRows
// response holds whole rows, cut after about 1 MiB of cell data, while a
// row is within the server's whole-row bound (3.5 MiB by default): the
// official Go client's reader refuses a response that ends inside a row,
// and with its default options it receives 4 MiB at most. A larger row is
// streamed across responses of about 1 MiB, its values cut across
// CellChunks (value_size on each chunk of a value but its last), as the
// API allows; a value is cut at the start of a UTF-8 sequence and never
// after its first 8 bytes, where the official Node.js client would
// corrupt it (cutAt). Whole rows are encoded straight into a response's
// wire form, the bytes protobuf would write for the same CellChunks
// (appendRowChunks); a larger row is built as CellChunk messages. Aggregate families (a value type of an Int64 input
// with sum, min or max) are created, described and written (AddToCell,
// MergeToCell) through the client's FamilySpec.Aggregate and
// Mutation.AddToCell; a value type changed after creation and the
// HyperLogLog++ aggregator are InvalidArgument (docs/bigtable-api.md
// 'Aggregate column families'). What Bighive does not have (views, change
// streams, SQL queries) answers Unimplemented.
package frontend
