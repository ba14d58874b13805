package client_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"

	"bighive/client"
	"bighive/testkit/inproc"
)

var (
	keyOnlyBytes = flag.Int64("keyonly.bytes", 1<<30, "BenchmarkKeyOnlyScan: bytes of values to load")
	keyOnlyValue = flag.Int("keyonly.value", 4<<10, "BenchmarkKeyOnlyScan: bytes per value")
)

// BenchmarkKeyOnlyScan loads a table of -keyonly.bytes of random values
// (-keyonly.value bytes each, one cell per row) with ApplyBulk, flushes it
// to TSFiles, and scans it twice: in full, and key-only (a strip-value
// RowFilter evaluated on the tserver). It reports the bytes each scan
// received over the wire (gRPC payload wire length) and their ratio; each
// iteration is one key-only scan. Run it with -benchtime 1x.
func BenchmarkKeyOnlyScan(b *testing.B) {
	c := inproc.Start(b, inproc.Options{MemLimit: 64 << 20})
	ctx := context.Background()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		b.Fatal(err)
	}
	var wb wireBytes
	tbl, err := c.Client(client.WithGRPCDialOptions(grpc.WithStatsHandler(&wb))).Open(ctx, "t")
	if err != nil {
		b.Fatal(err)
	}
	rows := int(*keyOnlyBytes / int64(*keyOnlyValue))
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, *keyOnlyValue)
	start := time.Now()
	const batch = 256
	for i := 0; i < rows; i += batch {
		var keys []string
		var ms []*client.Mutation
		for j := i; j < min(i+batch, rows); j++ {
			for k := range value {
				value[k] = byte(rng.Uint32())
			}
			m := client.NewMutation()
			m.Set("cf", "q", 1000, append([]byte(nil), value...))
			keys, ms = append(keys, fmt.Sprintf("row%09d", j)), append(ms, m)
		}
		// The table splits while it loads: ApplyBulk retries the rows
		// refused meanwhile.
		if errs, err := tbl.ApplyBulk(ctx, keys, ms); err != nil || errs != nil {
			b.Fatalf("load rows %d..: %v %v", i, err, errs)
		}
	}
	if err := c.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d rows of %d B (%d MiB of values) in %v", rows, *keyOnlyValue, int64(rows)*int64(*keyOnlyValue)>>20, time.Since(start).Round(time.Second))
	scan := func(opts ...client.ReadOption) int64 {
		b.Helper()
		n := 0
		wb.n.Store(0)
		if err := tbl.Scan(ctx, "", "", func(client.Row) bool { n++; return true }, opts...); err != nil || n != rows {
			b.Fatalf("scan: %d rows, %v", n, err)
		}
		return wb.n.Load()
	}
	start = time.Now()
	full := scan()
	b.Logf("full scan: %d B on the wire in %v", full, time.Since(start).Round(time.Millisecond))
	var keys int64
	b.ResetTimer()
	for b.Loop() {
		keys = scan(client.RowFilter(client.StripValueFilter()))
	}
	b.StopTimer()
	b.Logf("key-only scan: %d B on the wire (%.0fx fewer than the full scan)", keys, float64(full)/float64(keys))
	b.ReportMetric(float64(full), "full-wire-B")
	b.ReportMetric(float64(keys), "keyonly-wire-B")
	b.ReportMetric(float64(full)/float64(keys), "ratio")
}
