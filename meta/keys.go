package meta

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// FormatVersion is the on-disk version of meta.db. It must change when the
// schema changes incompatibly.
const FormatVersion = 1

// CommandVersion is the MetaCommand.version this package writes and applies.
const CommandVersion = 1

// Bucket and key names: on-disk constants, they must not change.
var (
	bucketMeta     = []byte("meta")
	bucketTables   = []byte("tables")
	bucketTablets  = []byte("tablets")
	bucketRanges   = []byte("ranges")
	bucketOwners   = []byte("owners")
	bucketTServers = []byte("tservers")
	// recoverygc: recovery files no tablet names any more, to delete.
	bucketRecoveryGC = []byte("recoverygc")
	// grants: principal 0x00 table 0x00 role name → empty (table "" = every table).
	bucketGrants = []byte("grants")
	// pending: tables being created or deleted in chunks (ddl.go).
	bucketPending = []byte("pending")
	// backups: backup name → bighive.v1.BackupMeta (backup.go).
	bucketBackups = []byte("backups")
	// sharedfiles: store uuid 0x00 footer block (u64 BE) → empty: every
	// TSFile some backup names or once named (backup.go).
	bucketSharedFiles = []byte("sharedfiles")
	// restores: table name → the request id of the RestoreTable that made
	// it (backup.go): a retry of that call finds its table restored. An
	// entry outlives its table until the next restore of the name.
	bucketRestores = []byte("restores")

	keyVersion      = []byte("version")
	keyApplied      = []byte("applied")
	keyNextTabletID = []byte("next_tablet_id")
	// keySchemaVersion is the last TableSchema.version handed out: one
	// counter over all tables, so a table deleted and created again under
	// its name never reuses a version a tserver may still hold.
	keySchemaVersion = []byte("schema_version")
	// keyGrantsVersion is raised by every change of the grants bucket.
	keyGrantsVersion = []byte("grants_version")

	allBuckets = [][]byte{bucketMeta, bucketTables, bucketTablets, bucketRanges, bucketOwners, bucketTServers, bucketRecoveryGC, bucketGrants, bucketPending, bucketBackups, bucketSharedFiles, bucketRestores}
)

// FormatTabletID names tablet number n.
func FormatTabletID(n uint64) string { return fmt.Sprintf("t%016x", n) }

// ParseTabletID is the inverse of FormatTabletID.
func ParseTabletID(id string) (uint64, error) {
	if len(id) != 17 || id[0] != 't' {
		return 0, fmt.Errorf("meta: tablet id %q is not t + 16 hex digits", id)
	}
	n, err := strconv.ParseUint(id[1:], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("meta: tablet id %q: %w", id, err)
	}
	return n, nil
}

func rangeKey(table string, start []byte) []byte {
	k := make([]byte, 0, len(table)+1+len(start))
	k = append(k, table...)
	k = append(k, 0)
	return append(k, start...)
}

func rangePrefix(table string) []byte { return rangeKey(table, nil) }

func ownerKey(tserver, tablet string) []byte {
	k := make([]byte, 0, len(tserver)+1+len(tablet))
	k = append(k, tserver...)
	k = append(k, 0)
	return append(k, tablet...)
}

func ownerPrefix(tserver string) []byte { return ownerKey(tserver, "") }

func sharedKey(store string, footer uint64) []byte {
	k := make([]byte, 0, len(store)+9)
	k = append(k, store...)
	k = append(k, 0)
	return append(k, u64(footer)...)
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}
