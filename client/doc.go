// Package client is the Go client library of Bighive. Its shape follows the
// Cloud Bigtable Go client: a Client for the cluster (tables, admin calls),
// a Table for rows (Put, Get, Scan, ReadRows, Apply, ApplyBulk), Mutations
// built of sets, deletes and adds to the cells of aggregate families
// (AddToCell, MergeToCell; FamilySpec.Aggregate) applied atomically to
// one row, conditional
// mutations (NewCondMutation: a predicate filter picks the true or the
// false mutation on the tserver, atomically) and read-modify-writes
// (NewReadModifyWrite). Server-side row filters
// have the Cloud Bigtable client's constructors (ChainFilters,
// InterleaveFilters, ConditionFilter, RowKeyFilter, ColumnFilter,
// StripValueFilter, LatestNFilter, ...) and apply to Get and Scan through
// the RowFilter read option, after the Families, Column, TimeRange and
// LatestN selection.
//
//	c, err := client.Dial(ctx, []string{"127.0.0.1:7100"})
//	defer c.Close()
//	err = c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}})
//	tbl, err := c.Open(ctx, "t")
//	err = tbl.Put(ctx, "row1", "cf", "q", []byte("v"))
//	row, err := tbl.Get(ctx, "row1")
//
// # Backups
//
// CreateBackup backs a table up by reference (docs/design.md 'Backups'):
// every write acknowledged before the call is in it, and no data is
// copied. GetBackup, ListBackups, UpdateBackup (the expiry time) and
// DeleteBackup manage backups; RestoreTable makes a new table of one. A
// CreateBackup carries one request id over its retries, so a retry whose
// first attempt was recorded answers the backup, not AlreadyExists; a
// RestoreTable retry that finds the table its lost attempt restored (the
// backup's schema and tablet count) succeeds. BackupInfo gives a backup's
// space: ExclusiveBytes (what deleting it frees) and SharedBytes.
// CopyBackup records a second backup of the same files. ExportBackup
// writes a backup to a directory in the export format
// (docs/backup-format.md) and ImportBackup brings such a directory into a
// cluster as a backup; the bytes go through tservers' ExportTSFile and
// ImportTSFile streams, so neither needs the cluster's shared root.
//
// # Schema changes
//
// CreateColumnFamily, DeleteColumnFamily, SetGCPolicy (MaxVersionsPolicy,
// MaxAgePolicy, UnionPolicy, IntersectionPolicy, NoGcPolicy, nested to any
// depth), DropRowRange (by a non-empty key prefix) and DropAllRows return
// once every tserver serving the table applies the change: a write to a
// new family succeeds at once, a deleted family is unreadable at once (and
// a family created again under its name starts empty), and rows written
// after a drop returns are kept.
//
//	err = c.CreateColumnFamily(ctx, "t", "cf2")
//	err = c.SetGCPolicy(ctx, "t", "cf", client.UnionPolicy(
//		client.IntersectionPolicy(client.MaxAgePolicy(7*24*time.Hour), client.MaxVersionsPolicy(2)),
//		client.MaxVersionsPolicy(10)))
//	err = c.DropRowRange(ctx, "t", "user#42#")
//
// A retry of CreateColumnFamily (DeleteColumnFamily) after a lost reply
// that finds the family present (absent) succeeds.
//
// # Sample row keys
//
// Table.SampleRowKeys returns row keys splitting the table into pieces of
// about equal size (every tablet boundary among them, the last one empty:
// the end of the table), as Cloud Bigtable's client does;
// SampleRowKeyOffsets adds the estimated bytes before each and takes the
// spacing. Each tablet estimates from its TSFiles' page indexes and write
// buffers, reading no data.
//
//	keys, err := tbl.SampleRowKeys(ctx) // e.g. ["user#5", ""]
//
// # Routing
//
// A Table asks the master for tablet locations once per row range and keeps
// them in a location cache per table (sorted, non-overlapping ranges). Every
// data request names the tablet and the epoch the master gave; a tserver
// that does not serve that tablet at that epoch answers with a TabletError
// detail (NOT_SERVING, WRONG_TABLET, RECOVERING). The client then drops the
// cached range, asks the master again and retries with exponential backoff
// and jitter (10 ms doubling to 1 s by default) until the context's
// deadline. Master calls go through internal/masterconn: to the last known
// leader, each attempt bounded by the attempt timeout, following a NotLeader
// hint and otherwise moving to the next master on Unavailable, an attempt's
// timeout or a transport error. Connections use gRPC keepalive.
//
// # Calls follow the tablet
//
// A call that waits on a tserver that does not answer (paused, partitioned,
// its disk stalled) does not wait for the attempt timeout (5 s, as long as
// the tserver's lease) to learn that its tablet moved. After the move
// check's interval (WithMoveCheck, 1 s by default) without an answer, it
// asks the master where the tablet is, bypassing the location cache, and
// again every interval while it waits:
//
//   - Still there: it goes on waiting (the tserver holds the lease).
//   - Moved (another tserver or epoch, a split, or no tserver yet): it
//     stops waiting. A read is retried at the new owner at once; a write
//     that was not sent yet (still queued on the batch stream, or waiting
//     for the stream to open) never reached the old owner, and is sent to
//     the new one whatever its idempotence; a sent idempotent write is
//     retried there too; a sent non-idempotent write is answered
//     Unavailable "outcome unknown" at once (Status rules).
//
// Calls waiting on one tablet share the master lookup (one at a time per
// table, as cache misses do), and a lookup made less than a quarter of the
// interval ago answers without another. The calls on the batch stream
// (Put, Apply of a plain mutation, Get) cost no timer and no goroutine for
// it: the stream's expire tick, which times attempts out, finds the
// overdue ones. Scans (after the interval without a message), bulk
// writes, conditional and read-modify-write mutations, which are unary
// calls, each have one timer for it (callWatch).
//
// # Retry rules
//
//   - Reads (Get, Scan) are retried on any retryable failure: a routing
//     error, Unavailable, Aborted, or an attempt that timed out while the
//     caller's context is still alive.
//   - A mutation is idempotent when it holds no Set with ServerTime and no
//     AddToCell or MergeToCell (an add applied twice counts twice): writing
//     the same (row, column, timestamp) again overwrites the same cell, and
//     deletes are idempotent as in Cloud Bigtable. Idempotent mutations are
//     retried on any retryable failure. Put uses the client's clock
//     (microseconds), so Put is idempotent.
//   - A mutation with a ServerTime Set, or an add, is retried only when the failure is
//     known to have happened before the tserver logged it: a routing error
//     (the tserver checks the tablet and epoch first), or a request that
//     never reached a server (no transport stream was opened, or a batch
//     stream command still queued, unsent, when its attempt timed out or
//     its tablet moved). Any other retryable failure leaves its outcome
//     unknown, and is returned as Unavailable "outcome unknown" (Status
//     rules).
//   - ApplyReadModifyWrite (increment, append) and a conditional mutation
//     (Apply of NewCondMutation) are never idempotent and follow the rule
//     of a ServerTime mutation: retried only after a routing error or a
//     request that never reached a server. The tserver answers any write
//     that may have been logged (lease lost after the append, log failure)
//     with Unavailable, never with a routing error, so none of them is
//     retried after it.
//   - InvalidArgument, NotFound, AlreadyExists, FailedPrecondition (without
//     a TabletError), ResourceExhausted and Internal are never retried.
//     Input is validated on the client with package limits first, so bad
//     input fails fast with InvalidArgument and never reaches a server.
//   - A non-idempotent write sent on the batch stream is not given up at
//     its attempt timeout: no retry may follow it, so it waits for its
//     answer until the call's deadline (the context's, or the retry
//     timeout) rather than turn a slow answer into an unknown outcome.
//
// # Status rules
//
// What a call that does not succeed returns, once its retries end (an
// outcome, not a timeout):
//
//   - A permanent error: its own code (the list above).
//   - A write that may have been applied and may not be retried (it reached
//     a tserver, no answer says what became of it, and it is not
//     idempotent), and a write whose retries ran out after such an attempt:
//     Unavailable, with a message that says "outcome unknown", whatever
//     the attempt's own code. An attempt's timeout is not the caller's
//     deadline, and the Cloud Bigtable clients take DeadlineExceeded for
//     the caller's own.
//   - A call whose retries ran out otherwise: Canceled when the caller
//     cancelled; DeadlineExceeded when the caller's own context deadline
//     passed; Unavailable, with the last failure in the message, when the
//     client's retry timeout ran out. A call without a context deadline
//     never ends in DeadlineExceeded.
//
// So a write that ends in any code but Unavailable "outcome unknown" (or
// Canceled or DeadlineExceeded of the caller's own context, after a
// failure that left it unknown) was not applied. ApplyBulk answers each
// row by the same rules, and a scan that keeps failing without a deadline
// ends in Unavailable.
//
// # Batch stream
//
// On a small machine a unary RPC per row, not the storage, is what a row
// costs. So by default (WithBatchStream) Put, Apply of a plain mutation
// and Get go to each tserver on one long-lived BatchCommands stream, on
// the model of TiKV's BatchCommands:
//
//   - Each call is a command tagged with an id. One sender goroutine per
//     stream sends everything pending as one message, then what arrived
//     while that message was being sent, and so on: no timer, a lone call
//     goes at once.
//   - The tserver runs a message's writes as one batch write per tablet
//     (one WAL group commit, one apply pass), each tablet's on a goroutine
//     of its own, and its reads on one goroutine, as one multi-get per
//     tablet and selection, and answers with messages of the results that
//     are ready. Each call returns when its own result came back, so a
//     write is durable when its call returns nil, and it gets its own
//     status: the code, message and TabletError the unary call would have
//     returned.
//   - The retry rules above are unchanged. A result is classified as the
//     unary reply; a call still waiting to be sent when the stream broke
//     or its attempt timed out never reached a server (safe to retry); a
//     call that was sent and got no result, because the stream broke or
//     the attempt timed out, has an unknown outcome, exactly as a unary
//     call lost in flight: only an idempotent one is retried. The next
//     call opens a new stream.
//   - The stream replaces write coalescing: with it on, writes are not
//     queued per tablet on the client (the stream already batches every
//     call to a tserver, across tablets, and the tserver groups them per
//     tablet), and non-idempotent plain mutations (ServerTime) ride the
//     stream too, since each carries its own full status.
//
// ReadModifyWrite, CheckAndMutate, ApplyBulk (already batched), scans and
// admin calls stay unary, and so does every call with
// WithBatchStream(false), for tools and other languages.
//
// # Write coalescing
//
// With the batch stream off (WithBatchStream(false)) and
// WithWriteCoalescing on (its default), concurrent writes to the same
// tablet share RPCs, the way the tserver's log shares fsyncs (group
// commit):
//
//   - A write to a tablet with no write to it in flight is sent at once,
//     alone, as a MutateRow: a lone writer never waits for a timer.
//   - Writes that arrive while one is in flight queue up; when it ends, the
//     queue goes in one MutateRows (at most 256 rows and a quarter of the
//     request limit), and so on while writes keep arriving.
//   - Each call returns when its own row's status came back, so it is
//     durable when the call returns nil, and it gets its own row's error.
//   - Only idempotent mutations are coalesced (Put, and Apply without a
//     ServerTime Set or an add); the others are always sent alone. If the coalesced
//     attempt fails with anything but a permanent error, the write is sent
//     again alone under the retry rules above: a per-row status of
//     MutateRows has a code but no TabletError detail, so it cannot show
//     that the row was not logged, and resending is safe only because the
//     mutation is idempotent.
//
// ReadRows reads a RowSet (RowList, RowRange with open, closed or
// unbounded bounds, RowRangeList; an empty list is InvalidArgument, "empty
// row set") with the official client's shapes; Scan is ReadRows of one
// range. Both walk the tablets in row order (in reverse order with
// ReverseScan, which returns rows in descending key order), sending each
// tablet one request with all of its part of the set, and LimitRows counts
// the rows delivered. A retried read resumes just after (reverse: before)
// the last row it delivered, so fn never sees a row twice and rows arrive
// in strictly increasing (decreasing) key order.
//
// A tablet's part of a RowList goes as single-row ranges, which the
// tserver answers with one multi-get (one snapshot, the rows sorted, each
// TSFile's bloom filter probed once per row and its pages walked forward
// once). Scan messages come in the flat encoding (WithFlatScan, default
// on): each message one buffer of contiguous rows, bounded by 1 MiB and
// 8192 rows, decoded with one allocation for its cells and one for its
// keys and qualifiers; values alias the message. A goroutine per scan
// receives and decodes the next message while fn consumes the current one.
//
// Every error a caller gets is a gRPC status (status.Code works on it) with
// a message that names the table, the row or the tablet concerned. When the
// context has no deadline, retries stop after the Client's retry timeout
// (WithRetryTimeout, 30 s by default), with Unavailable ("Status rules").
//
// The package keeps no state on disk.
package client
