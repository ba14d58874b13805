package tserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"bighive/client"
	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// node is an in-process cluster: one real master (raft on loopback, bbolt)
// and tservers with real storage, talking real gRPC.
type node struct {
	t       *testing.T
	master  *master.Master
	root    string
	servers []*tserver.Server
	opts    []tserver.Options // what start(i) starts tserver i with
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var freeAddr = tserver.FreeAddr

// startNode starts a master with the given lease and tservers with small
// buffers and fast heartbeats; opt, if set, adjusts tserver i's options.
func startNode(t *testing.T, tservers int, lease time.Duration, opt func(i int, o *tserver.Options)) *node {
	t.Helper()
	return startNodeWith(t, tservers, func(c *master.Config) { c.Lease = lease }, opt)
}

// startNodeWith is startNode with the master's config adjusted by tweak
// (its heartbeat is 200 ms unless tweak changes it).
func startNodeWith(t *testing.T, tservers int, tweak func(*master.Config), opt func(i int, o *tserver.Options)) *node {
	t.Helper()
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := master.Config{ID: "m1", Dir: filepath.Join(dir, "master"), RaftAddr: freeAddr(t), Raft: tserver.SoleMasterRaft(),
		Heartbeat: 200 * time.Millisecond, Logger: quiet()}
	tweak(&cfg)
	m, err := master.Start(cfg, lis)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, master: m, root: filepath.Join(dir, "root")}
	t.Cleanup(func() {
		for _, s := range n.servers {
			if s != nil {
				s.Close()
			}
		}
		m.Close()
	})
	for i := 0; i < tservers; i++ {
		n.add(func(o *tserver.Options) {
			if opt != nil {
				opt(i, o)
			}
		})
	}
	return n
}

// add starts one more tserver with small buffers and fast heartbeats;
// opt, if set, adjusts its options.
func (n *node) add(opt func(o *tserver.Options)) {
	n.t.Helper()
	o := tserver.Options{Listen: freeAddr(n.t), Masters: []string{n.master.Addr()}, Root: n.root, MemLimit: 1 << 20,
		HeartbeatInterval: 200 * time.Millisecond, Logger: quiet()}
	if opt != nil {
		opt(&o)
	}
	n.opts = append(n.opts, o)
	n.servers = append(n.servers, nil)
	n.start(len(n.servers) - 1)
}

// start starts tserver i (again, after a Close: same address and root).
func (n *node) start(i int) {
	n.t.Helper()
	s, err := tserver.Start(context.Background(), n.opts[i])
	if err != nil {
		n.t.Fatalf("start tserver %d: %v", i, err)
	}
	n.servers[i] = s
}

func (n *node) client(ctx context.Context) *client.Client {
	n.t.Helper()
	c, err := client.Dial(ctx, []string{n.master.Addr()})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

// writeLate writes one cell, past tb's start row, to tablet tb at its
// epoch through ts.
func writeLate(ctx context.Context, ts pb.TServerClient, tb client.TabletInfo) error {
	_, err := ts.MutateRow(ctx, &pb.MutateRowRequest{TabletId: tb.ID, Epoch: tb.Epoch, Row: &pb.RowMutation{
		RowKey: []byte(tb.StartRow + "-late"), Mutations: []*pb.Mutation{{Mutation: &pb.Mutation_SetCell_{SetCell: &pb.Mutation_SetCell{
			Family: "cf", Qualifier: []byte("late"), TimestampMicros: -1, Value: []byte("late")}}}}}})
	return err
}

// createServing creates table t, family cf, split at split, waits until
// its tablets serve and opens it.
func createServing(t *testing.T, ctx context.Context, c *client.Client, split string) *client.Table {
	t.Helper()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{split}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// waitServing polls until every tablet of table is served.
func waitServing(t *testing.T, ctx context.Context, c *client.Client, table string) {
	t.Helper()
	wait.ForCtx(t, ctx, "table "+table+" serving", func() error {
		tablets, err := c.Tablets(ctx, table)
		if err != nil {
			return err
		}
		ok := len(tablets) > 0
		for _, tb := range tablets {
			ok = ok && tb.State == "serving"
		}
		if !ok {
			return fmt.Errorf("tablets %+v", tablets)
		}
		return nil
	})
}

// TestWritesSurviveCheckpointsAndRestart writes enough to cause several
// checkpoints (256 KiB buffer limit), restarts every tserver, and reads every
// acknowledged write back.
func TestWritesSurviveCheckpointsAndRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t, 2, 2*time.Second, func(_ int, o *tserver.Options) { o.MemLimit = 256 << 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"k0700", "k1400"}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 1000)
	want := map[string]string{}
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("k%04d", i*7%2000)
		v := fmt.Sprintf("%d-%s", i, val[:i%900])
		if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		want[k] = v
	}
	check := func(stage string) {
		t.Helper()
		for k, v := range want {
			r, err := tbl.Get(ctx, k)
			if err != nil {
				t.Fatalf("%s: get %s: %v", stage, k, err)
			}
			if len(r.Cells) == 0 || string(r.Cells[0].Value) != v {
				t.Fatalf("%s: get %s = %d cells, want %q...", stage, k, len(r.Cells), v[:min(len(v), 10)])
			}
		}
		rows := 0
		if err := tbl.Scan(ctx, "", "", func(client.Row) bool { rows++; return true }); err != nil {
			t.Fatalf("%s: scan: %v", stage, err)
		}
		if rows != len(want) {
			t.Fatalf("%s: scan saw %d rows, want %d", stage, rows, len(want))
		}
	}
	check("before restart")
	for i, s := range n.servers {
		if err := s.Close(); err != nil {
			t.Fatalf("close tserver %d: %v", i, err)
		}
		n.start(i)
	}
	waitServing(t, ctx, c, "t")
	check("after restart")
}
