package limits_test

import (
	"testing"

	"bighive/internal/limits"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// TestLayersHoldTheLimits: the limits of the layers under the API hold
// the largest row mutation and value the API accepts: one log record holds
// one row mutation (the request that carries it is larger), and one TSFile
// page holds the page target and one entry of the largest value.
func TestLayersHoldTheLimits(t *testing.T) {
	if wal.MaxRecordBytes < limits.MaxRequestBytes {
		t.Errorf("wal.MaxRecordBytes %d is under limits.MaxRequestBytes %d: a row mutation may not fit a record", wal.MaxRecordBytes, limits.MaxRequestBytes)
	}
	if entry := limits.MaxValueBytes + limits.MaxRowKeyBytes + limits.MaxQualifierBytes + limits.MaxNameBytes + 1<<10; tsfile.MaxPageBytes < tsfile.DefaultPageSize+entry {
		t.Errorf("tsfile.MaxPageBytes %d does not hold a page of %d and an entry of %d", tsfile.MaxPageBytes, tsfile.DefaultPageSize, entry)
	}
}
