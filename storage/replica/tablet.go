package replica

import (
	"context"

	"bighive/storage/blockstore"
	"bighive/storage/tablet"
	"bighive/storage/tablet/tsfile"
)

// What the checkpoint coordinator, splits, merges and the tserver see of
// the engine, each the tablet.Tablet method of the same name. The engine's
// write primitives (BeginWrite, Apply, Abandon) are not among them: the
// write path (Write, WriteBatch, WriteRowLocked) and Replay are the only
// ways into a loaded tablet's buffers.

// MemoryUsage is the bytes held by both write buffers.
func (r *Replica) MemoryUsage() int64 { return r.o.Tablet.MemoryUsage() }

// SwapBuffers makes the active buffer the standby one (checkpoint step 3,
// a split's or a merge's snapshot), under the coordinator's exclusive
// state lock.
func (r *Replica) SwapBuffers() bool { return r.o.Tablet.SwapBuffers() }

// HasStandby reports whether a swapped buffer awaits InstallFlushed.
func (r *Replica) HasStandby() bool { return r.o.Tablet.HasStandby() }

// FlushStandby writes the standby buffer as one TSFile.
func (r *Replica) FlushStandby(ctx context.Context) (tsfile.Info, error) {
	return r.o.Tablet.FlushStandby(ctx)
}

// InstallFlushed puts a flushed file the metadata names in the read set.
func (r *Replica) InstallFlushed(info tsfile.Info) error { return r.o.Tablet.InstallFlushed(info) }

// Files is the read set of TSFiles, newest first.
func (r *Replica) Files() []tsfile.Info { return r.o.Tablet.Files() }

// CompactFiles merges the named files into one new TSFile.
func (r *Replica) CompactFiles(ctx context.Context, footers []blockstore.BlockRef, major bool) (tsfile.Info, error) {
	return r.o.Tablet.CompactFiles(ctx, footers, major)
}

// InstallCompacted replaces the named files by a compaction's output.
func (r *Replica) InstallCompacted(replaced []blockstore.BlockRef, info tsfile.Info) error {
	return r.o.Tablet.InstallCompacted(replaced, info)
}

// GarbageShare estimates the share of the files' entries a major
// compaction would drop.
func (r *Replica) GarbageShare() (float64, error) { return r.o.Tablet.GarbageShare() }

// EstimateGarbage is the garbage estimate behind GarbageShare, by kind.
func (r *Replica) EstimateGarbage() (tablet.GarbageEstimate, error) {
	return r.o.Tablet.EstimateGarbage()
}

// Schema is the tablet's current schema.
func (r *Replica) Schema() tablet.Schema { return r.o.Tablet.Schema() }

// SetSchema replaces the schema (a family added or deleted).
func (r *Replica) SetSchema(s tablet.Schema) { r.o.Tablet.SetSchema(s) }

// WaitWrites waits for every write validated against an older schema.
func (r *Replica) WaitWrites(ctx context.Context) error { return r.o.Tablet.WaitWrites(ctx) }

// Compression gives the codec of each family's pages (the schema's).
func (r *Replica) Compression() func(family string) tsfile.Compression {
	return r.o.Tablet.Compression()
}

// SampleRowKeys samples the tablet's rows at about every bytes of their
// estimated size (tablet.Tablet.SampleRowKeys over the tablet's range).
func (r *Replica) SampleRowKeys(ctx context.Context, every int64) ([]tablet.Sample, int64, error) {
	if err := r.readable(); err != nil {
		return nil, 0, err
	}
	return r.o.Tablet.SampleRowKeys(ctx, r.o.Start, r.o.End, every)
}

// RowKeys lists the keys of the rows in [start, end) that hold any entry,
// visible or not; the caller keeps the bounds inside the tablet's range.
func (r *Replica) RowKeys(ctx context.Context, start, end []byte, limit int) ([][]byte, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	return r.o.Tablet.RowKeys(ctx, start, end, limit)
}

// FamilyRowKeys lists the keys of the rows in [start, end) that hold any
// entry of family, visible or not.
func (r *Replica) FamilyRowKeys(ctx context.Context, family string, start, end []byte, limit int) ([][]byte, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	return r.o.Tablet.FamilyRowKeys(ctx, family, start, end, limit)
}
