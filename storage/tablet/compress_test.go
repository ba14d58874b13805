package tablet

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/tsfile"
)

// mixedValue is an n-byte value, half repeated text and half random.
func mixedValue(rng *rand.Rand, n int) []byte {
	const text = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. "
	v := make([]byte, n)
	for i := 0; i < n/2; i++ {
		v[i] = text[i%len(text)]
	}
	rng.Read(v[n/2:])
	return v
}

// dataRatio is the stored over raw bytes of family cf in a TSFile.
func dataRatio(t *testing.T, store blockstore.Manager, f TSFileInfo) float64 {
	t.Helper()
	r, err := tsfile.Open(store, f.FooterRef(), tsfile.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stored, raw := r.DataBytes("cf")
	return float64(stored) / float64(raw)
}

// TestCompressionThroughTablet writes through the tablet under each
// family compression setting, flushes, compacts, reopens the tablet over
// its files and reads every cell back; the files' data blocks are as
// small as the setting makes them. A schema change applies to the files
// written after it.
func TestCompressionThroughTablet(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	ctx := context.Background()
	for _, tc := range []struct {
		codec    tsfile.Compression
		maxRatio float64 // of the first flush
		minRatio float64
	}{
		{tsfile.CompressionDefault, 0.65, 0},
		{tsfile.CompressionNone, 1.1, 1.0},
		{tsfile.CompressionSnappy, 0.65, 0},
		{tsfile.CompressionZstd, 0.65, 0},
	} {
		t.Run(tc.codec.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			store := newStore(t)
			schema := Schema{Families: map[string]FamilyPolicy{"cf": {Compression: tc.codec}, "other": {MaxVersions: 1}}}
			opts := Options{ID: "t", Schema: schema, Store: store, PageSize: 16 << 10}
			tb, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]byte{}
			write := func(from, to int) {
				for i := from; i < to; i++ {
					row := fmt.Sprintf("row%06d", i)
					v := mixedValue(rng, 1000)
					m := mutation.RowMutation{Row: []byte(row), Ops: []mutation.Op{
						{Kind: mutation.SetCell, Family: "cf", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: v},
						{Kind: mutation.SetCell, Family: "other", Qualifier: []byte("o"), Timestamp: mutation.ServerTime, Value: []byte(row)},
					}}
					if i%50 == 49 {
						m.Ops = []mutation.Op{{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}}
						delete(want, row)
					} else {
						want[row] = v
					}
					if err := tb.AssignTimestamps(&m); err != nil {
						t.Fatal(err)
					}
					if err := tb.Apply(&m); err != nil {
						t.Fatal(err)
					}
				}
			}
			flush := func() TSFileInfo {
				tb.SwapBuffers()
				info, err := tb.FlushStandby(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := tb.InstallFlushed(info); err != nil {
					t.Fatal(err)
				}
				return info
			}
			write(0, 400)
			first := flush()
			ratio := dataRatio(t, store, first)
			t.Logf("%v: flushed file stores %.3f of the raw bytes", tc.codec, ratio)
			if ratio > tc.maxRatio || ratio < tc.minRatio {
				t.Fatalf("%v: ratio %.3f outside [%.2f, %.2f]", tc.codec, ratio, tc.minRatio, tc.maxRatio)
			}
			// The next files are written under the changed setting.
			changed := tsfile.CompressionNone
			if tc.codec == tsfile.CompressionNone {
				changed = tsfile.CompressionZstd
			}
			schema.Families = map[string]FamilyPolicy{"cf": {Compression: changed}, "other": {MaxVersions: 1}}
			tb.SetSchema(schema)
			write(400, 700)
			second := flush()
			if r := dataRatio(t, store, second); (changed == tsfile.CompressionNone) != (r >= 1) {
				t.Fatalf("after the change to %v, the next file stores %.3f of the raw bytes", changed, r)
			}
			write(700, 800) // a third file, so the compaction merges several
			flush()
			var refs []blockstore.BlockRef
			for _, f := range tb.Files() {
				refs = append(refs, f.FooterRef())
			}
			merged, err := tb.CompactFiles(ctx, refs, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.InstallCompacted(refs, merged); err != nil {
				t.Fatal(err)
			}
			if r := dataRatio(t, store, merged); (changed == tsfile.CompressionNone) != (r >= 1) {
				t.Fatalf("compacted under %v: stores %.3f of the raw bytes", changed, r)
			}
			var files []FileRef
			for _, f := range tb.Files() {
				files = append(files, FileRef{Footer: f.FooterRef()})
			}
			tb.Close()

			opts.Files = files
			tb, err = Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			got := 0
			err = tb.Scan(ctx, nil, nil, 0, ReadOptions{}, func(r Row) bool {
				v, ok := want[string(r.Key)]
				var cf []byte
				for _, c := range r.Cells {
					if c.Family == "cf" {
						cf = c.Value
					}
				}
				if !ok || !bytes.Equal(cf, v) {
					t.Errorf("row %s: cf value of %d bytes, want %d (present %v)", r.Key, len(cf), len(v), ok)
				}
				got++
				return true
			})
			if err != nil || got != len(want) {
				t.Fatalf("scan after reopening: %d of %d rows, %v", got, len(want), err)
			}
		})
	}
}
