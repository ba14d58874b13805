package tablet

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"bighive/storage/memstore"
)

// DefaultSampleBytes is the spacing of SampleRowKeys when none is given.
const DefaultSampleBytes = 16 << 20

// Sample is one sample row key: Offset is the approximate size in bytes of
// the tablet's entries before Key.
type Sample struct {
	Key    []byte
	Offset int64
}

// bufferChunk is the granularity of a write buffer's size estimate.
const bufferChunk = 4 << 10

// sizePoint is some bytes of the tablet at a row: a TSFile page starting
// there, or a buffer entry.
type sizePoint struct {
	row   []byte
	bytes int64
}

// SampleRowKeys returns row keys that split the tablet's rows in [start,
// end) (end nil: unbounded; the tablet's range) into pieces of roughly
// every bytes each (0: DefaultSampleBytes), with the estimated size before
// each, and the estimated size of the whole. The keys are strictly
// increasing, all > start and < end. Sizes come from the TSFiles' page
// indexes (a page counts at its first row: no data is read) and from the
// write buffers' entries (key, value and a fixed overhead each), so a row
// written several times, or deleted, counts with every version still
// stored, as the storage it uses.
func (t *Tablet) SampleRowKeys(ctx context.Context, start, end []byte, every int64) ([]Sample, int64, error) {
	if every <= 0 {
		every = DefaultSampleBytes
	}
	s, err := t.snapshot()
	if err != nil {
		return nil, 0, err
	}
	defer s.release()
	var pts []sizePoint
	for _, f := range s.files {
		pages, err := f.r.Pages()
		if err != nil {
			return nil, 0, fmt.Errorf("tablet %s: sample row keys: %w", t.opts.ID, err)
		}
		for _, p := range pages {
			// Uncompressed, like the buffers' bytes below: offsets measure
			// data, whatever the families' compression.
			pts = append(pts, sizePoint{row: p.FirstRow, bytes: p.RawBytes})
		}
	}
	// A buffer counts in chunks of about bufferChunk bytes, each at its
	// first row (the buffer is in row order), like a page.
	for _, it := range s.bufs {
		n := 0
		var cur sizePoint
		for it.First(); it.Valid(); it.Next() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, 0, err
				}
			}
			e := it.Entry()
			if cur.row == nil || cur.bytes >= bufferChunk && !bytes.Equal(e.Row, cur.row) {
				if cur.row != nil {
					pts = append(pts, cur)
				}
				cur = sizePoint{row: e.Row}
			}
			cur.bytes += entrySize(e)
		}
		if cur.row != nil {
			pts = append(pts, cur)
		}
	}
	slices.SortStableFunc(pts, func(a, b sizePoint) int { return bytes.Compare(a.row, b.row) })
	var out []Sample
	var total int64
	next := every
	for _, p := range pts {
		if end != nil && bytes.Compare(p.row, end) >= 0 {
			break
		}
		if bytes.Compare(p.row, start) < 0 {
			continue // a split child reads its parent's files, wider than its range
		}
		if total >= next && bytes.Compare(p.row, start) > 0 &&
			(len(out) == 0 || bytes.Compare(p.row, out[len(out)-1].Key) > 0) {
			out = append(out, Sample{Key: bytes.Clone(p.row), Offset: total})
			next = total + every
		}
		total += p.bytes
	}
	return out, total, nil
}

// entrySize is what a buffer entry will take in a TSFile, roughly.
func entrySize(e *memstore.Entry) int64 {
	return int64(len(e.Row)+len(e.Family)+len(e.Qualifier)+len(e.Value)) + 16
}
