package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"bighive/client"
	"bighive/testkit/inproc"
)

// TestSampleRowKeysReal: over a table of uniform rows in four tablets on
// two tservers, the samples are strictly increasing keys of the table,
// every tablet boundary among them, the last one empty with the table's
// size; each sample's offset is near the bytes of the rows before it (the
// rows are uniform, so near its key's rank times the row size) and
// consecutive samples of a tablet are about the asked spacing apart. The
// same holds with the rows in write buffers, after a checkpoint (in
// TSFiles), after a major compaction and after a split.
func TestSampleRowKeysReal(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 2})
	ctx := ctxT(t)
	splits := []string{"r0500", "r1000", "r1500"}
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: splits}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const rows, value = 2000, 1 << 10
	var keys []string
	var ms []*client.Mutation
	for i := 0; i < rows; i++ {
		keys = append(keys, fmt.Sprintf("r%04d", i))
		m := client.NewMutation()
		m.Set("cf", "q", 1, []byte(strings.Repeat("v", value)))
		ms = append(ms, m)
	}
	if errs, err := tbl.ApplyBulk(ctx, keys, ms); err != nil || errs != nil {
		t.Fatal(errs, err)
	}
	const every = 64 << 10
	check := func(stage string) {
		t.Helper()
		samples, err := tbl.SampleRowKeyOffsets(ctx, every)
		if err != nil {
			t.Fatal(err)
		}
		last := samples[len(samples)-1]
		if last.Key != "" {
			t.Fatalf("%s: the last sample is %q, want the end of the table", stage, last.Key)
		}
		total := last.OffsetBytes
		if total < rows*value || total > 2*rows*value {
			t.Fatalf("%s: table size %d, want about %d", stage, total, rows*value)
		}
		perRow := float64(total) / rows
		var prev client.RowKeySample
		for i, s := range samples[:len(samples)-1] {
			var n int
			if _, err := fmt.Sscanf(s.Key, "r%04d", &n); err != nil || n <= 0 || n >= rows {
				t.Fatalf("%s: sample %d key %q is not a row of the table", stage, i, s.Key)
			}
			if i > 0 && s.Key <= prev.Key {
				t.Fatalf("%s: sample %d %q after %q", stage, i, s.Key, prev.Key)
			}
			if d := float64(s.OffsetBytes) - float64(n)*perRow; d > 2*every || d < -2*every {
				t.Fatalf("%s: sample %q at offset %d, %d rows of %.0f bytes are before it", stage, s.Key, s.OffsetBytes, n, perRow)
			}
			if !slices.Contains(splits, s.Key) {
				// Inside a tablet: at least every after the previous
				// sample, and not much more.
				if gap := s.OffsetBytes - prev.OffsetBytes; gap < every || gap > every+40<<10 {
					t.Fatalf("%s: sample %q is %d bytes after %q", stage, s.Key, gap, prev.Key)
				}
			}
			prev = s
		}
		for _, sp := range splits {
			if !slices.ContainsFunc(samples, func(s client.RowKeySample) bool { return s.Key == sp }) {
				t.Fatalf("%s: the tablet boundary %q is not a sample", stage, sp)
			}
		}
		if n := len(samples); n < rows*value/every || n > 2*rows*value/every {
			t.Fatalf("%s: %d samples of %d bytes every %d", stage, n, total, every)
		}
		got, err := tbl.SampleRowKeys(ctx) // 16 MiB apart: the tablet boundaries only
		if want := append(slices.Clone(splits), ""); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: SampleRowKeys = %q %v, want %q", stage, got, err, want)
		}
		t.Logf("%s: %d samples, table %d bytes", stage, len(samples), total)
	}
	check("rows in write buffers")
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	if err := c.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	check("after a major compaction")
	// Split children read their parent's TSFiles: each counts only the
	// pages of its own range.
	if err := cl.SplitTablet(ctx, "t", "r0250"); err != nil {
		t.Fatal(err)
	}
	splits = []string{"r0250", "r0500", "r1000", "r1500"}
	waitTablets(t, cl, "t", 5)
	check("after a split at r0250")
	if _, err := tbl.SampleRowKeyOffsets(ctx, 100); err == nil {
		t.Fatal("a spacing of 100 bytes was accepted")
	}
}
