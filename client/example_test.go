package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"bighive/client"
	"bighive/testkit/cluster"
)

// The examples run against a real cluster started by the multi-process
// harness, testkit/cluster (one master, one tserver as OS processes,
// shared by all examples), and their Output comments are checked by go
// test.

var (
	exampleOnce    sync.Once
	exampleCluster *cluster.Cluster
	exampleDir     string
)

// exampleClient starts the shared example cluster on first use, creates
// table with family "cf", and returns a client and the open table.
func exampleClient(table string, splits ...string) (*client.Client, *client.Table) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exampleOnce.Do(func() {
		var err error
		if exampleDir, err = os.MkdirTemp("", "bighive-example-"); err != nil {
			log.Fatal(err)
		}
		// Heartbeats every 100 ms: a new table serves within a tenth of a
		// second, not the production heartbeat's second.
		exampleCluster, err = cluster.Start(ctx, cluster.Options{Masters: 1, TServers: 1, Dir: exampleDir, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			log.Fatal(err)
		}
	})
	c, err := client.Dial(ctx, exampleCluster.MasterAddrs())
	if err != nil {
		log.Fatal(err)
	}
	spec := client.TableSpec{Name: table, Families: []client.FamilySpec{{Name: "cf", MaxVersions: 3}}, SplitKeys: splits}
	if err := c.CreateTable(ctx, spec); err != nil {
		log.Fatal(err)
	}
	if err := exampleCluster.WaitServing(ctx, table); err != nil {
		log.Fatal(err)
	}
	tbl, err := c.Open(ctx, table)
	if err != nil {
		log.Fatal(err)
	}
	return c, tbl
}

// stopExampleCluster is called by TestMain after the examples ran.
func stopExampleCluster() {
	if exampleCluster != nil {
		exampleCluster.Close()
		os.RemoveAll(exampleDir)
	}
}

func ExampleTable_Put() {
	c, tbl := exampleClient("example_put")
	defer c.Close()
	ctx := context.Background()

	if err := tbl.Put(ctx, "user#42", "cf", "name", []byte("Ada")); err != nil {
		log.Fatal(err)
	}
	row, err := tbl.Get(ctx, "user#42")
	if err != nil {
		log.Fatal(err)
	}
	name, _ := row.Value("cf", "name")
	fmt.Printf("%s: %s\n", row.Key, name)
	// Output:
	// user#42: Ada
}

func ExampleTable_Get() {
	c, tbl := exampleClient("example_get")
	defer c.Close()
	ctx := context.Background()

	m := client.NewMutation()
	for v := int64(1); v <= 3; v++ {
		m.Set("cf", "temp", v*1000, []byte(fmt.Sprint(20+v)))
	}
	m.Set("cf", "city", 1000, []byte("Oslo"))
	if err := tbl.Apply(ctx, "sensor-1", m); err != nil {
		log.Fatal(err)
	}
	// The newest version of one column.
	row, err := tbl.Get(ctx, "sensor-1", client.Column("cf", "temp"), client.LatestN(1))
	if err != nil {
		log.Fatal(err)
	}
	for _, cell := range row.Cells {
		fmt.Printf("%s:%s @%d = %s\n", cell.Family, cell.Qualifier, cell.Timestamp, cell.Value)
	}
	// A missing row is no error: it has no cells.
	missing, err := tbl.Get(ctx, "sensor-9")
	fmt.Println(len(missing.Cells), err)
	// Output:
	// cf:temp @3000 = 23
	// 0 <nil>
}

func ExampleTable_Scan() {
	c, tbl := exampleClient("example_scan", "row-3", "row-6") // three tablets
	defer c.Close()
	ctx := context.Background()

	for i := 0; i < 9; i++ {
		if err := tbl.Put(ctx, fmt.Sprintf("row-%d", i), "cf", "n", []byte(fmt.Sprint(i*i))); err != nil {
			log.Fatal(err)
		}
	}
	// [row-2, row-7) crosses all three tablets; rows come in key order.
	err := tbl.Scan(ctx, "row-2", "row-7", func(r client.Row) bool {
		v, _ := r.Value("cf", "n")
		fmt.Printf("%s=%s ", r.Key, v)
		return true
	})
	fmt.Println()
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// row-2=4 row-3=9 row-4=16 row-5=25 row-6=36
}

func ExampleTable_Apply() {
	c, tbl := exampleClient("example_apply")
	defer c.Close()
	ctx := context.Background()

	// Several sets and deletes on one row, applied atomically.
	m := client.NewMutation()
	m.Set("cf", "status", client.ServerTime, []byte("shipped"))
	m.Set("cf", "carrier", client.ServerTime, []byte("DHL"))
	m.DeleteCellsInColumn("cf", "eta")
	if err := tbl.Apply(ctx, "order-7", m); err != nil {
		log.Fatal(err)
	}
	row, err := tbl.Get(ctx, "order-7")
	if err != nil {
		log.Fatal(err)
	}
	for _, cell := range row.Cells {
		fmt.Printf("%s=%s\n", cell.Qualifier, cell.Value)
	}
	// Output:
	// carrier=DHL
	// status=shipped
}

func ExampleTable_ApplyBulk() {
	c, tbl := exampleClient("example_bulk", "m")
	defer c.Close()
	ctx := context.Background()

	rows := []string{"apple", "kiwi", "plum", ""}
	var ms []*client.Mutation
	for _, r := range rows {
		m := client.NewMutation()
		m.Set("cf", "len", 1, []byte(fmt.Sprint(len(r))))
		ms = append(ms, m)
	}
	errs, err := tbl.ApplyBulk(ctx, rows, ms)
	if err != nil {
		log.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			fmt.Printf("row %d: %v\n", i, e)
		}
	}
	// Output:
	// row 3: rpc error: code = InvalidArgument desc = client: table "example_bulk": apply to row "": row key is empty
}
