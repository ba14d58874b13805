package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"bighive/client"
	"bighive/client/clienttest"
	pb "bighive/proto/bighivepb"
)

// The benchmarks measure the client's own cost (validation, location
// cache, gRPC on loopback) against the in-memory fake cluster: an upper
// bound on what the real cluster can reach through this client.

func benchTable(b *testing.B) *client.Table {
	b.Helper()
	fc := clienttest.Start(b, clienttest.Options{TServers: 1})
	var splits []string
	for i := 1; i < 8; i++ {
		splits = append(splits, fmt.Sprintf("%016d", i*(1<<40)/8))
	}
	if err := fc.CreateTable(&pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf"}}}, splits...); err != nil {
		b.Fatal(err)
	}
	c, err := client.Dial(context.Background(), fc.MasterAddrs())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	tbl, err := c.Open(context.Background(), "t")
	if err != nil {
		b.Fatal(err)
	}
	return tbl
}

func BenchmarkPut(b *testing.B) {
	tbl := benchTable(b)
	value := make([]byte, 1000)
	var n atomic.Int64
	b.SetBytes(1000)
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			key := fmt.Sprintf("%016d", (i*2654435761)%(1<<40))
			if err := tbl.Put(context.Background(), key, "cf", "q", value); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGet(b *testing.B) {
	tbl := benchTable(b)
	for i := 0; i < 1000; i++ {
		tbl.Put(context.Background(), fmt.Sprintf("%016d", i*(1<<30)), "cf", "q", make([]byte, 1000))
	}
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1) % 1000
			if _, err := tbl.Get(context.Background(), fmt.Sprintf("%016d", i*(1<<30))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkApplyBulk100(b *testing.B) {
	tbl := benchTable(b)
	value := make([]byte, 1000)
	rows := make([]string, 100)
	ms := make([]*client.Mutation, 100)
	b.SetBytes(100 * 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range rows {
			rows[j] = fmt.Sprintf("%016d", ((i*100+j)*2654435761)%(1<<40))
			ms[j] = client.NewMutation()
			ms[j].Set("cf", "q", 1, value)
		}
		if errs, err := tbl.ApplyBulk(context.Background(), rows, ms); errs != nil || err != nil {
			b.Fatal(errs, err)
		}
	}
}
