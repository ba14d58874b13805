package client_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/testkit/inproc"
)

var readPathRows = flag.Int("readpath.rows", 20_000, "BenchmarkReadPath: rows of 1000-byte values to load")

// BenchmarkReadPath measures the read path on a real in-process cluster
// (one master, one tserver, the client in the same process): a table of
// -readpath.rows rows of one 1000-byte cell, four tablets, flushed to
// TSFiles and read once so that the block cache is warm. Sub-benchmarks:
// get-1 (one caller, one Get at a time), get-64 (64 concurrent callers,
// whose Gets the batch stream carries together), multiget-100 (ReadRows
// of a RowList of 100 random rows; keys/s), and scan (one full scan per
// iteration; MB/s of key, qualifier and value bytes).
func BenchmarkReadPath(b *testing.B) {
	c := inproc.Start(b, inproc.Options{MemLimit: 64 << 20})
	ctx := context.Background()
	n := *readPathRows
	key := func(i int) string { return fmt.Sprintf("%016d", i) }
	spec := client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}
	for i := 1; i < 4; i++ {
		spec.SplitKeys = append(spec.SplitKeys, key(i*n/4))
	}
	if err := c.CreateTable(ctx, spec); err != nil {
		b.Fatal(err)
	}
	tbl, err := c.Client().Open(ctx, "t")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 1000)
	for i := range val {
		val[i] = byte(rng.Uint32())
	}
	for i := 0; i < n; i += 500 {
		var keys []string
		var ms []*client.Mutation
		for j := i; j < min(i+500, n); j++ {
			m := client.NewMutation()
			m.Set("cf", "v", 1000, val)
			keys, ms = append(keys, key(j)), append(ms, m)
		}
		if errs, err := tbl.ApplyBulk(ctx, keys, ms); err != nil || errs != nil {
			b.Fatal(err, errs)
		}
	}
	if err := c.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	rowBytes := int64(16 + 1 + len(val))
	scan := func() int {
		rows := 0
		if err := tbl.Scan(ctx, "", "", func(r client.Row) bool {
			if len(r.Cells) != 1 || len(r.Cells[0].Value) != len(val) {
				b.Fatalf("row %q: %d cells", r.Key, len(r.Cells))
			}
			rows++
			return true
		}); err != nil {
			b.Fatal(err)
		}
		return rows
	}
	scan() // warm the block cache
	get := func(r *rand.Rand) {
		row, err := tbl.Get(ctx, key(r.IntN(n)))
		if err != nil || len(row.Cells) != 1 {
			b.Fatalf("get: %v, %d cells", err, len(row.Cells))
		}
	}
	rate := func(b *testing.B, what string, count int64, start time.Time) {
		b.ReportMetric(float64(count)/time.Since(start).Seconds(), what)
	}
	b.Run("get-1", func(b *testing.B) {
		r := rand.New(rand.NewPCG(3, 4))
		start := time.Now()
		for i := 0; i < b.N; i++ {
			get(r)
		}
		rate(b, "gets/s", int64(b.N), start)
	})
	b.Run("get-64", func(b *testing.B) {
		var seed atomic.Uint64
		b.SetParallelism(64 / max(1, testingProcs()))
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(seed.Add(1), 5))
			for pb.Next() {
				get(r)
			}
		})
		rate(b, "gets/s", int64(b.N), start)
	})
	b.Run("multiget-100", func(b *testing.B) {
		r := rand.New(rand.NewPCG(6, 7))
		start := time.Now()
		for i := 0; i < b.N; i++ {
			seen := map[string]bool{}
			var list client.RowList
			for len(list) < 100 {
				k := key(r.IntN(n))
				if !seen[k] {
					seen[k] = true
					list = append(list, k)
				}
			}
			got := 0
			if err := tbl.ReadRows(ctx, list, func(client.Row) bool { got++; return true }); err != nil || got != 100 {
				b.Fatalf("read rows: %v, %d rows", err, got)
			}
		}
		rate(b, "keys/s", 100*int64(b.N), start)
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(n) * rowBytes)
		for i := 0; i < b.N; i++ {
			if got := scan(); got != n {
				b.Fatalf("scan: %d rows, want %d", got, n)
			}
		}
	})
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
