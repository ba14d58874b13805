package limits_test

import (
	"testing"

	"bighive/internal/limits"
	"bighive/storage/tablet/backupfile"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// TestLayersHoldTheLimits: the limits of the layers under the API hold
// the largest row mutation and value the API accepts: one log record holds
// one row mutation (the request that carries it is larger), and one TSFile
// page holds the page target and one entry of the largest value, and so
// does one record of a backup export, which fits one gRPC message.
func TestLayersHoldTheLimits(t *testing.T) {
	if wal.MaxRecordBytes < limits.MaxRequestBytes {
		t.Errorf("wal.MaxRecordBytes %d is under limits.MaxRequestBytes %d: a row mutation may not fit a record", wal.MaxRecordBytes, limits.MaxRequestBytes)
	}
	if entry := limits.MaxValueBytes + limits.MaxRowKeyBytes + limits.MaxQualifierBytes + limits.MaxNameBytes + 1<<10; tsfile.MaxPageBytes < tsfile.DefaultPageSize+entry {
		t.Errorf("tsfile.MaxPageBytes %d does not hold a page of %d and an entry of %d", tsfile.MaxPageBytes, tsfile.DefaultPageSize, entry)
	}
	if entry := limits.MaxValueBytes + limits.MaxRowKeyBytes + limits.MaxQualifierBytes + limits.MaxNameBytes + 1<<10; backupfile.MaxChunk < backupfile.ChunkTarget+entry ||
		backupfile.MaxChunk+1<<10 > limits.MaxRequestBytes {
		t.Errorf("backupfile.MaxChunk %d does not hold a chunk of %d and an entry of %d, or does not fit a message of %d",
			backupfile.MaxChunk, backupfile.ChunkTarget, entry, limits.MaxRequestBytes)
	}
}
