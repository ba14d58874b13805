package master

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/meta"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

func appliedCommands(t *testing.T, m *Master, kind string) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.metrics.commands.WithLabelValues(kind, "applied").Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// tableState is what one master holds of a table: visible, pending, and
// its tablets (checked to tile the row space when there are any).
func tableState(t *testing.T, m *Master, name string) (visible, pending bool, tablets int) {
	t.Helper()
	err := m.view(func(r *meta.Reader) error {
		_, err := r.Table(name)
		visible = err == nil
		if _, pending, err = r.PendingTable(name); err != nil {
			return err
		}
		ts, err := r.TableTablets(name, nil, 0)
		if err != nil {
			return err
		}
		tablets = len(ts)
		if visible && !pending {
			var end []byte
			for i, tm := range ts {
				if !bytes.Equal(tm.Range.GetStartRow(), end) || (i < len(ts)-1) == (len(tm.Range.GetEndRow()) == 0) {
					t.Errorf("%s: tablet %d of %s is %q..%q after %q: not a tiling", m.cfg.ID, i, name, tm.Range.GetStartRow(), tm.Range.GetEndRow(), end)
				}
				end = tm.Range.GetEndRow()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return visible, pending, tablets
}

// TestBigCreateTableChunks: with a DDL chunk of 10, a CreateTable of 96
// tablets commits 10 commands of at most 10 tablets, the table invisible
// until the last one; DeleteTable hides it with its first of 10 commands.
func TestBigCreateTableChunks(t *testing.T) {
	var c *cluster
	var sizes []int
	var invisibleBefore []bool
	prev := 0
	c = startCluster(t, 1, func(cfg *Config) {
		cfg.DDLChunk = 10
		cfg.ddlChunkHook = func(_ context.Context, table string, _ int) {
			vis, _, n := tableState(t, c.masters[0], table)
			sizes = append(sizes, n-prev)
			prev = n
			invisibleBefore = append(invisibleBefore, !vis)
		}
	})
	c.leader(10 * time.Second)
	m := c.masters[0]
	mc := newClient(t, c.addrs()...).at(0)
	ctx := ctxT(t, 30*time.Second)

	resp, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("big", "cf"), SplitKeys: splitKeys(95)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Table.TabletCount != 96 {
		t.Fatalf("CreateTable answered %d tablets, want 96", resp.Table.TabletCount)
	}
	if got := appliedCommands(t, m, "create_tablets"); got != 10 {
		t.Fatalf("%v create_tablets commands, want 10", got)
	}
	if len(sizes) != 10 {
		t.Fatalf("chunk hook ran %d times, want 10", len(sizes))
	}
	for i, n := range sizes {
		if n < 1 || n > 10 || invisibleBefore[i] != (i < 9) {
			t.Fatalf("chunk %d added %d tablets (invisible before the last: %v)", i+1, n, invisibleBefore[i])
		}
	}
	if vis, pend, n := tableState(t, m, "big"); !vis || pend || n != 96 {
		t.Fatalf("after CreateTable: visible %v, pending %v, %d tablets", vis, pend, n)
	}
	// Validation errors are as before chunking.
	if _, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("big", "cf")}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second CreateTable: %v, want AlreadyExists", err)
	}
	if _, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("bad", "cf"), SplitKeys: [][]byte{[]byte("b"), []byte("a")}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unsorted split keys: %v, want InvalidArgument", err)
	}

	sizes, invisibleBefore, prev = nil, nil, 96
	if _, err := mc.DeleteTable(ctx, &pb.DeleteTableRequest{Name: "big"}); err != nil {
		t.Fatal(err)
	}
	if got := appliedCommands(t, m, "delete_tablets"); got != 10 {
		t.Fatalf("%v delete_tablets commands, want 10", got)
	}
	if len(sizes) != 9 { // the hook runs between chunks: not after the last
		t.Fatalf("delete chunk hook ran %d times, want 9", len(sizes))
	}
	for i, n := range sizes {
		if n != -10 || !invisibleBefore[i] {
			t.Fatalf("delete chunk %d removed %d tablets (hidden: %v)", i+1, -n, invisibleBefore[i])
		}
	}
	if vis, pend, n := tableState(t, m, "big"); vis || pend || n != 0 {
		t.Fatalf("after DeleteTable: visible %v, pending %v, %d tablets", vis, pend, n)
	}
	if _, err := mc.DeleteTable(ctx, &pb.DeleteTableRequest{Name: "big"}); status.Code(err) != codes.NotFound {
		t.Fatalf("second DeleteTable: %v, want NotFound", err)
	}
}

// TestDDLLeaderKilledBetweenChunks: the leader stops in the middle of a
// chunked CreateTable, then of a chunked DeleteTable; every remaining
// master ends with the whole table or none of it (the new leader rolls
// the creation back and finishes the deletion), and the name is usable.
func TestDDLLeaderKilledBetweenChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("a master leader stopped between the chunks of a CreateTable and a DeleteTable: runs without -short")
	}
	var blockAt atomic.Int32 // the chunk whose hook blocks once, 0: none
	reached := make(chan struct{}, 1)
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.DDLChunk = 10
		cfg.ddlChunkHook = func(ctx context.Context, _ string, chunk int) {
			if b := blockAt.Load(); int(b) == chunk && blockAt.CompareAndSwap(b, 0) {
				reached <- struct{}{}
				<-ctx.Done() // until the leader's gRPC server stops
			}
		}
	})
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 90*time.Second)

	// interrupt runs call at the leader, stops the leader once the hook
	// was reached, and returns the call's error.
	interrupt := func(what string, call func(pb.MasterClient) error) error {
		t.Helper()
		l := c.leader(20 * time.Second)
		errc := make(chan error, 1)
		go func() { errc <- call(cl.at(l)) }()
		select {
		case <-reached:
		case err := <-errc:
			t.Fatalf("%s returned before the chunk hook: %v", what, err)
		case <-ctx.Done():
			t.Fatalf("%s: hook never reached", what)
		}
		c.stop(l)
		err := <-errc
		t.Logf("%s: leader %s stopped between chunks; the call returned %v", what, c.peers[l].ID, err)
		return err
	}
	// settled waits until every running master agrees the table is whole
	// (tablets of it) or absent (0), nothing pending.
	settled := func(what string, tablets int) {
		t.Helper()
		wait.For(t, 60*time.Second, what, func() error {
			for i, m := range c.masters {
				if m == nil {
					continue
				}
				vis, pend, n := tableState(t, m, "big")
				if pend || vis != (tablets > 0) || n != tablets {
					return fmt.Errorf("master %d: visible %v, pending %v, %d tablets", i, vis, pend, n)
				}
			}
			return nil
		})
	}

	blockAt.Store(5)
	if err := interrupt("CreateTable", func(mc pb.MasterClient) error {
		_, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("big", "cf"), SplitKeys: splitKeys(199)})
		return err
	}); err == nil {
		t.Fatal("CreateTable succeeded though its leader stopped after chunk 5 of 20")
	}
	settled("the half-created table rolled back on every master", 0)
	err := cl.do(ctx, func(mc pb.MasterClient) error {
		_, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("big", "cf"), SplitKeys: splitKeys(199)})
		return err
	})
	if err != nil {
		t.Fatalf("CreateTable again after the rollback: %v", err)
	}
	settled("the table created whole", 200)

	c.start(firstStopped(c))
	blockAt.Store(3)
	if err := interrupt("DeleteTable", func(mc pb.MasterClient) error {
		_, err := mc.DeleteTable(ctx, &pb.DeleteTableRequest{Name: "big"})
		return err
	}); err == nil {
		t.Fatal("DeleteTable succeeded though its leader stopped after chunk 3 of 20")
	}
	settled("the half-deleted table finished by the new leader", 0)
	if err := cl.do(ctx, func(mc pb.MasterClient) error {
		_, err := mc.DescribeTable(ctx, &pb.DescribeTableRequest{Name: "big"})
		return err
	}); status.Code(err) != codes.NotFound {
		t.Fatalf("DescribeTable after the deletion: %v, want NotFound", err)
	}
}

func firstStopped(c *cluster) int {
	for i, m := range c.masters {
		if m == nil {
			return i
		}
	}
	return -1
}
