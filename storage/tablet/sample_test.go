package tablet

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"bighive/storage/mutation"
)

// TestSampleRowKeys: over uniform rows, the samples are strictly
// increasing keys inside the range, spaced by roughly the asked bytes,
// and the estimated size is close to the data written, with the rows in
// the write buffers, half flushed, or all in TSFiles (1 KiB pages).
func TestSampleRowKeys(t *testing.T) {
	ctx := context.Background()
	tb := openTablet(t, &fakeClock{})
	const rows, value = 2000, 200
	write := func(from, to int) {
		for i := from; i < to; i++ {
			m := mutation.RowMutation{Row: fmt.Appendf(nil, "row%05d", i), Ops: []mutation.Op{
				{Kind: mutation.SetCell, Family: "c", Qualifier: []byte("q"), Timestamp: 1, Value: bytes.Repeat([]byte("v"), value)}}}
			if err := tb.AssignTimestamps(&m); err != nil {
				t.Fatal(err)
			}
			if err := tb.Apply(&m); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush := func() { t.Helper(); flushActive(t, tb) }
	const every = 40 << 10
	check := func(stage string, start, end []byte, written int) {
		t.Helper()
		samples, total, err := tb.SampleRowKeys(ctx, start, end, every)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := 0, written
		if start != nil {
			fmt.Sscanf(string(start), "row%05d", &lo)
		}
		if end != nil {
			fmt.Sscanf(string(end), "row%05d", &hi)
			hi = min(hi, written)
		}
		data := int64((hi - lo) * value)
		if total < data || total > 2*data {
			t.Fatalf("%s: estimated size %d, want about %d", stage, total, data)
		}
		if len(samples) < int(total/every)-1 || len(samples) > int(total/every) {
			t.Fatalf("%s: %d samples over %d bytes every %d", stage, len(samples), total, every)
		}
		prev := Sample{Key: start}
		for i, s := range samples {
			if bytes.Compare(s.Key, prev.Key) <= 0 || end != nil && bytes.Compare(s.Key, end) >= 0 {
				t.Fatalf("%s: sample %d %q after %q (range [%q, %q))", stage, i, s.Key, prev.Key, start, end)
			}
			// Spaced by every, give or take a page (1 KiB here) or a buffer chunk (4 KiB).
			if gap := s.Offset - prev.Offset; gap < every || gap > every+5<<10 {
				t.Fatalf("%s: sample %d %q at offset %d, %d after the previous", stage, i, s.Key, s.Offset, gap)
			}
			prev = s
		}
		if total-prev.Offset > every+5<<10 {
			t.Fatalf("%s: %d bytes after the last sample", stage, total-prev.Offset)
		}
	}
	write(0, rows/2)
	check("half the rows in a buffer", nil, nil, rows/2)
	flush()
	write(rows/2, rows)
	check("half in a TSFile", nil, nil, rows)
	check("half in a TSFile, a sub-range", []byte("row00500"), []byte("row01500"), rows)
	flush()
	check("all in TSFiles", nil, nil, rows)
	if s, total, err := tb.SampleRowKeys(ctx, nil, nil, 0); err != nil || len(s) != 0 || total == 0 {
		t.Fatalf("default spacing over a small tablet: %d samples, %d bytes, %v", len(s), total, err)
	}
}
