// Package meta is the master's replicated metadata: a hashicorp/raft state
// machine (FSM) whose state lives in a bbolt database, plus the raft wiring
// (raft-boltdb/v2 log and stable store, file snapshot store, TCP
// transport) in Node.
//
// # Invariants
//
//   - Every raft command is one storagepb.MetaCommand and is applied in one
//     bbolt read-write transaction: a command changes all it names or
//     nothing (a split replaces the parent by its children atomically,
//     invariant 5 in docs/design.md, 'a split commits in one transaction').
//   - Apply is deterministic: it reads only the command and the current
//     state, never the clock or randomness. Decisions (who gets a tablet)
//     are made by the leader and carried in the command.
//   - Entries raft commits together are applied in one transaction
//     (BatchingFSM: one fsync for a burst of load or checkpoint reports).
//     The transaction also records the highest applied raft index. On
//     restart raft replays entries the FSM may already hold; every entry at
//     or below the recorded index is skipped, so no command applies twice.
//   - A refused command (AlreadyExists, a stale epoch, ...) changes
//     nothing: every command checks all it can refuse for before it
//     writes. A command that fails inside (a corrupt record) is refused
//     with Internal after its transaction is rolled back and the rest of
//     the batch is applied one by one; only a failed commit stops the
//     process (a replica that cannot write its state must not go on).
//   - Every assignment increments the tablet's epoch; a report carrying a
//     different epoch, or coming from another tserver than the owner, is
//     refused with FailedPrecondition and changes nothing.
//   - The FSM never names a tablet in two places: the owners index holds
//     exactly one entry per tablet, under its tserver (or under "" when
//     UNASSIGNED).
//   - FSM.OwnerGeneration(uuid) changes after (never before) a committed
//     transaction changes the owners index entries of uuid or the epoch or
//     table of one of its tablets, and at every Restore; in memory only.
//
// # Files
//
//	<data>/meta.db            the FSM state (bbolt)
//	<data>/meta.db.restore    a snapshot being installed (removed or renamed over meta.db)
//	<data>/raft/raft.db       raft log and stable store (raft-boltdb/v2)
//	<data>/raft/snapshots/    raft file snapshots; each is a copy of meta.db
//
// bbolt does its own file I/O (it is not behind vfs.FS); the restore path,
// which meta writes itself, goes through vfs.FS.
//
// # Schema (bbolt buckets), format version 1
//
//	meta      "version"        → uint64 BE  (1; Open refuses a higher one)
//	          "applied"        → uint64 BE  (raft index of the last applied command)
//	          "next_tablet_id" → uint64 BE  (the next id to hand out, from 1)
//	          "schema_version" → uint64 BE  (the last TableSchema.version handed out)
//	tables    <name>                       → bighive.v1.TableSchema (protobuf)
//	tablets   <tablet id>                  → bighive.v1.TabletMeta  (protobuf: table, range,
//	                                         state, tserver, epoch, log positions, TSFiles,
//	                                         data-dir group, child logs, recovery files)
//	ranges    <table> 0x00 <start row>     → <tablet id>   (location lookups, row order)
//	owners    <tserver uuid> 0x00 <tablet> → empty         (uuid "" = UNASSIGNED)
//	tservers  <uuid>                       → bighive.storage.v1.MetaTServer (protobuf: address,
//	                                         incarnation, WAL prefix, block store UUID)
//	recoverygc <recovery file path>        → empty (a file a checkpoint stopped naming; deleted by the master's GC)
//	grants    <principal> 0x00 <table> 0x00 <role> → empty (table "" = every table; role read, write or admin)
//	meta      "grants_version" → uint64 BE  (raised by every grant change; absent: 0)
//	pending   <name>                       → bighive.storage.v1.MetaPendingTable (a table being
//	                                         created or deleted in chunks: schema, deleting, next row)
//	backups   <name>                       → bighive.v1.BackupMeta (protobuf: source table, schema,
//	                                         times, per tablet its range and TSFiles)
//	sharedfiles <store uuid> 0x00 <footer block, u64 BE> → empty (a TSFile some backup names or once named)
//
// The recoverygc, grants, pending, backups and sharedfiles buckets were added without a version
// change: an older database simply lacks them and Open creates them empty. So were
// "schema_version" and "grants_version" (absent: 0).
//
// Chunked DDL (ddl.go): CreateTablets creates a table in chunks, each
// one command: the first records it in pending (not in tables, so Table is
// NotFound and the master neither assigns its tablets nor lets tservers
// keep them), each later one must start at the pending record's next row,
// and the last gives the schema its version and moves it into tables.
// DeleteTablets moves a visible table into pending marked deleting (or
// marks a pending creation deleting: a rollback, after which further
// CreateTablets of it are refused with Unavailable) and deletes at most max tablets in row
// order per command; the one that finds none left removes the record. A
// table is thus in exactly one of tables and pending, and its tablets tile
// the row space whenever it is in tables. The single-command CreateTable
// and DeleteTable are still applied (older logs) but refuse a pending name.
//
// Grants (grants.go): Grant adds one (a no-op when it exists), Revoke
// removes one (NotFound when absent), BootstrapAdmin grants admin on every
// table only while the bucket is empty, so every master may propose it at
// start and only the first one applied does anything. Principals are
// printable ASCII without spaces, so 0x00 separates the key's parts.
//
// Schema changes: CreateTable, AddFamily, DeleteFamily, SetGCRule and
// SetCompression (FamilySpec.compression) each give the table's schema a
// new version from one counter over all tables
// (TableSchema.version), so versions of a name only grow, even across a
// delete and a create. Tservers keep the highest version they have seen.
// SetGCRule stores the rule in FamilySpec.gc_rule and clears max_versions
// and max_age_micros (a set gc_rule wins over them anyway). A family's
// aggregate (FamilySpec.aggregate: int64 sum, min or max) is given only
// by CreateTable or AddFamily and no command changes it: a value type is
// immutable once the family exists, as in Cloud Bigtable. A table may
// have no family (created without one, or its last one deleted), as in
// Cloud Bigtable. DeleteFamily adds the name to
// TableSchema.purging_families until FamilyPurged (the master has masked
// the family's old cells on every tablet) removes it; AddFamily of a name
// still listed there is FailedPrecondition.
//
// Log splitting (recovery.go): LogSplitDone replaces an UNASSIGNED
// tablet's positions of a dead prefix by its recovery files, only if the
// tablet's epoch and oldest position of that prefix are still the ones the
// split was planned from (LogSplitsDone applies the splits of several
// prefixes so, in one transaction); a checkpoint that replaces the
// positions, or the table's deletion, moves the tablet's recovery files to
// recoverygc. A split's children inherit the parent's recovery files.
//
// Merge (merge.go): Merge replaces two adjacent tablets of one table, both
// owned by the reporter at the reported epochs, by one tablet ASSIGNED to
// it at epoch 1, in one transaction. Its TSFiles are the report's flushed
// files followed by both parents' lists as this metadata holds them (never
// as the report claims them, so a compaction committed meanwhile counts);
// it has no log positions, child logs or recovery files, because the
// flushed files hold the parents' buffers as of their fence. A retried
// report of a committed merge answers the merged tablet again.
//
// Backups (backup.go, docs/design.md 'Backups'): CreateBackup copies the
// table's schema and every tablet's range and TSFile list as this metadata
// holds them, in one transaction, and is refused (Aborted) unless every
// tablet of the table is among the ones the leader's flushes committed for
// it; every file it names goes into sharedfiles. GCReferences counts a
// backup's blocks as live. RestoreTable creates a table of the backup's
// schema under a new name whose UNASSIGNED tablets have the backup's
// ranges and files, so the files are named by both. DeleteBackup with an
// expiry time deletes only a backup expired by then. The commands were
// added as new oneof numbers (26 to 29): entries logged before them apply
// as before, and CommandVersion stays 1. RecordBackup (30) records a copy
// of a READY backup, read in the same transaction, or an import begun
// CREATING with its schema and ranges only; AddBackupFiles (31) adds an
// import's files and, last, makes it READY. Every file either names goes
// into sharedfiles, and a CREATING backup's files count for GCReferences
// like any backup's, but it cannot be restored or copied.
//
// Table names never contain 0x00 ([A-Za-z0-9_.-]), nor do tserver uuids as
// the master accepts them, so the 0x00 separator is unambiguous. Tablet ids
// are "t" followed by 16 lower-case hex digits of the id counter
// (FormatTabletID / ParseTabletID).
//
// A snapshot is the whole bbolt file written by a read transaction
// (bbolt Tx.WriteTo); restore writes it to meta.db.restore, fsyncs it,
// checks it opens with a known version, renames it over meta.db and
// fsyncs the directory.
package meta
