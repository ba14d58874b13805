package tserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
	"bighive/tserver"
)

// cutProxy relays TCP to target until cut: then it closes every relayed
// connection and refuses new ones (closes them at once) until restored.
type cutProxy struct {
	lis    net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, target: target}
	t.Cleanup(func() { lis.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.lis.Addr().String() }

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestDeadTServerReregistersAsNewIncarnation: a tserver cut off from the
// master long enough to be declared dead, whose tablets moved to another
// tserver, is not taken back when it heartbeats again: it is told to
// register again, drops every tablet it held, and registers as a new
// incarnation; the old tablets stay with their new owner and their
// acknowledged writes read back.
func TestDeadTServerReregistersAsNewIncarnation(t *testing.T) {
	if testing.Short() {
		t.Skip("a tserver declared dead re-registering as a new incarnation: runs without -short")
	}
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := master.Start(master.Config{ID: "m1", Dir: filepath.Join(dir, "master"), RaftAddr: freeAddr(t), Raft: tserver.SoleMasterRaft(),
		Lease: time.Second, Heartbeat: 100 * time.Millisecond, Logger: quiet()}, lis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	proxy := newCutProxy(t, m.Addr())
	root := filepath.Join(dir, "root")
	var servers []*tserver.Server
	for i, masters := range [][]string{{proxy.addr()}, {m.Addr()}} {
		s, err := tserver.Start(context.Background(), tserver.Options{Listen: freeAddr(t), Masters: masters, Root: root,
			MemLimit: 1 << 20, HeartbeatInterval: 100 * time.Millisecond, SplitThreshold: -1, Logger: quiet()})
		if err != nil {
			t.Fatalf("start tserver %d: %v", i, err)
		}
		servers = append(servers, s)
		t.Cleanup(func() { s.Close() })
	}
	victim := servers[0]

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc, err := grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	incarnation := func() (int64, bool) {
		resp, err := mc.ListTServers(ctx, &pb.ListTServersRequest{})
		if err != nil {
			return 0, false
		}
		for _, ts := range resp.Tservers {
			if ts.Uuid == victim.UUID() {
				return ts.Incarnation, ts.Live
			}
		}
		return 0, false
	}
	wait.ForCtx(t, ctx, "both tservers live", func() error {
		resp, err := mc.ListTServers(ctx, &pb.ListTServersRequest{})
		live := 0
		for _, ts := range resp.GetTservers() {
			if ts.Live {
				live++
			}
		}
		if err == nil && live != 2 {
			err = fmt.Errorf("%d live", live)
		}
		return err
	})

	c, err := client.Dial(ctx, []string{m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}},
		SplitKeys: []string{"r2", "r4", "r6"}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 80; i++ {
		if err := tbl.Put(ctx, fmt.Sprintf("r%d-%03d", i%8, i), "cf", "q", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var held []client.TabletInfo
	for _, tb := range before {
		if tb.TServerUUID == victim.UUID() {
			held = append(held, tb)
		}
	}
	if len(held) == 0 {
		t.Fatalf("the victim serves no tablet: %+v", before)
	}
	oldInc, _ := incarnation()

	proxy.setCut(true)
	wait.ForCtx(t, ctx, "the victim declared dead and its tablets served by the other tserver", func() error {
		if _, live := incarnation(); live {
			return errors.New("the victim is live")
		}
		tabs, err := c.Tablets(ctx, "t")
		if err != nil {
			return err
		}
		for _, tb := range tabs {
			if tb.State != "serving" || tb.TServerUUID == victim.UUID() {
				return fmt.Errorf("tablet %s %s on %s", tb.StartRow, tb.State, tb.TServer)
			}
		}
		return nil
	})
	proxy.setCut(false)
	wait.ForCtx(t, ctx, "the victim registered again", func() error {
		if inc, live := incarnation(); !live || inc == oldInc {
			return fmt.Errorf("incarnation %d (was %d), live %v", inc, oldInc, live)
		}
		return nil
	})
	newInc, _ := incarnation()
	t.Logf("victim re-registered: incarnation %d → %d", oldInc, newInc)

	// Its old tablets, at their old epochs, are refused by the victim, and
	// still served by the other tserver.
	ts := tserverClient(t, victim.Addr())
	for _, tb := range held {
		err := writeLate(ctx, ts, tb)
		if te, ok := apierr.TabletReason(err); !ok || te.Reason != pb.TabletError_NOT_SERVING {
			t.Errorf("write to old tablet %s at epoch %d on the re-registered victim: %v, want NOT_SERVING", tb.ID, tb.Epoch, err)
		}
	}
	after, err := c.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range after {
		for _, h := range held {
			if tb.ID == h.ID && tb.TServerUUID == victim.UUID() && tb.Epoch == h.Epoch {
				t.Errorf("tablet %s is the victim's again at its old epoch %d", tb.ID, tb.Epoch)
			}
		}
	}
	n := 0
	if err := tbl.Scan(ctx, "", "", func(r client.Row) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 80 {
		t.Fatalf("scan after the move: %d rows, want 80", n)
	}
}
