package split

import (
	"bytes"
	"context"

	"bighive/storage/tablet"
)

// maxSamples bounds the rows remembered while looking for the middle row.
const maxSamples = 4096

type sample struct {
	row []byte
	cum int64 // bytes of the rows before this one
}

// middleRow scans the parent's visible rows once and returns the first
// row at which half of the bytes lie before it: a row key, so the
// boundary never falls inside a row. It keeps at most maxSamples rows
// (every k-th, k doubling), so memory is bounded whatever the tablet's
// size. It fails with ErrTooSmall when the tablet has fewer than two rows.
func middleRow(ctx context.Context, t Tablet, start, end []byte) ([]byte, error) {
	var (
		samples []sample
		every   int64 = 1
		n       int64
		total   int64
	)
	err := t.Scan(ctx, start, end, 0, tablet.ReadOptions{}, func(r tablet.Row) bool {
		if n%every == 0 {
			samples = append(samples, sample{row: bytes.Clone(r.Key), cum: total})
			if len(samples) >= maxSamples {
				kept := samples[:0]
				for i := 0; i < len(samples); i += 2 {
					kept = append(kept, samples[i])
				}
				samples = kept
				every *= 2
			}
		}
		n++
		total += int64(len(r.Key))
		for _, c := range r.Cells {
			total += int64(len(c.Family)+len(c.Qualifier)+len(c.Value)) + 16
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	// samples[0] is the first row: the middle row must leave a row before it.
	for _, s := range samples[min(1, len(samples)):] {
		if s.cum*2 >= total {
			return s.row, nil
		}
	}
	if len(samples) >= 2 {
		return samples[len(samples)-1].row, nil
	}
	return nil, ErrTooSmall
}
