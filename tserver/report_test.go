package tserver_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/master"
	pb "bighive/proto/bighivepb"
	"bighive/storage/merge"
	"bighive/storage/split"
	"bighive/tserver"
)

// lostReply is the master as a tserver sees it when the reply to its
// first merge or split report is lost (a master failover, say): that
// attempt commits at the real master but answers Unavailable, so
// masterconn retries it, and the retry is refused with NotFound, as the
// master refuses a retried report once the merged tablet moved or a child
// was split again since the commit (meta's mergeDone, splitDone). Every
// other call is the real master's.
type lostReply struct {
	*master.Master
	merges, splits atomic.Int32 // reports received
}

func (l *lostReply) ReportMerge(ctx context.Context, req *pb.ReportMergeRequest) (*pb.ReportMergeResponse, error) {
	return loseFirst(&l.merges, req.LeftTabletId, func() (*pb.ReportMergeResponse, error) { return l.Master.ReportMerge(ctx, req) })
}

func (l *lostReply) ReportSplit(ctx context.Context, req *pb.ReportSplitRequest) (*pb.ReportSplitResponse, error) {
	return loseFirst(&l.splits, req.ParentTabletId, func() (*pb.ReportSplitResponse, error) { return l.Master.ReportSplit(ctx, req) })
}

// loseFirst commits the first report (commit) and loses its reply; it
// refuses every later one, naming tablet id.
func loseFirst[R any](reports *atomic.Int32, id string, commit func() (R, error)) (R, error) {
	var none R
	if reports.Add(1) > 1 {
		return none, status.Errorf(codes.NotFound, "tablet %s not found", id)
	}
	if _, err := commit(); err != nil {
		return none, err
	}
	return none, status.Error(codes.Unavailable, "the reply was lost")
}

// lostReplyNode starts a master and one tserver that reaches it through a
// lostReply (clients reach the master directly). opt adjusts the
// tserver's options.
func lostReplyNode(t *testing.T, opt func(o *tserver.Options)) (*node, *lostReply) {
	t.Helper()
	n := startNode(t, 0, 6*time.Second, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &lostReply{Master: n.master}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(apierr.UnaryServerInterceptor(quiet())))
	pb.RegisterMasterServer(srv, l)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	n.add(func(o *tserver.Options) {
		o.Masters = []string{lis.Addr().String()}
		o.SplitThreshold = -1
		opt(o)
	})
	return n, l
}

// putRows writes rows prefix0..prefix(n-1) and records them in want.
func putRows(t *testing.T, ctx context.Context, tbl *client.Table, want map[string]string, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("%s%03d", prefix, i), fmt.Sprintf("v-%s%d", prefix, i)
		if err := tbl.Put(ctx, k, "cf", "q", []byte(v)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		want[k] = v
	}
}

// TestMergeRetriedReportRefusalIsUnknown: the merge report commits, its
// reply is lost, and the retry is refused. The refusal answers a retry,
// so the outcome is unknown, not refused: the parents must not take writes
// again and the flushed files (here holding the writes made after the
// merge's checkpoint) must not be deleted; the merged tablet the master
// committed is then assigned and holds every acknowledged write.
func TestMergeRetriedReportRefusalIsUnknown(t *testing.T) {
	t.Parallel()
	testRetriedRefusal(t, retriedReport{
		splitKeys: []string{"m"},
		// Past the merge's checkpoint: the writes go to the flushed files.
		hook: func(o *tserver.Options, pause func()) {
			o.MergeHook = func(s merge.Step) error { return pauseAt(s == merge.StepAllocate, pause) }
		},
		run: func(ctx context.Context, c *client.Client) error {
			_, err := c.MergeTablets(ctx, "t", "a")
			return err
		},
		reports: func(l *lostReply) int32 { return l.merges.Load() },
		after:   1,
	})
}

// TestSplitRetriedReportRefusalIsUnknown: the split report commits, its
// reply is lost, and the retry is refused. The outcome is unknown, not
// refused: the parent must not take writes again and neither the
// children's TSFiles nor their child logs (here holding the writes made
// after the snapshot) may be deleted; the children the master committed
// are then assigned and hold every acknowledged write.
func TestSplitRetriedReportRefusalIsUnknown(t *testing.T) {
	t.Parallel()
	testRetriedRefusal(t, retriedReport{
		// After the snapshot: the writes go to the child logs.
		hook: func(o *tserver.Options, pause func()) {
			o.SplitHook = func(s split.Step) error { return pauseAt(s == split.StepChildLogs, pause) }
		},
		run:     func(ctx context.Context, c *client.Client) error { return c.SplitTablet(ctx, "t", "m") },
		reports: func(l *lostReply) int32 { return l.splits.Load() },
		after:   2,
	})
}

// retriedReport is a split or a merge whose report's reply is lost and
// whose retry is refused (lostReply).
type retriedReport struct {
	splitKeys []string // of the table
	// hook sets the split's or merge's hook to call pause at the step
	// where the test writes more rows.
	hook    func(o *tserver.Options, pause func())
	run     func(ctx context.Context, c *client.Client) error
	reports func(*lostReply) int32 // reports the master received
	after   int                    // tablets once the report committed
}

// pauseAt calls pause when at is true; a hook's step never fails.
func pauseAt(at bool, pause func()) error {
	if at {
		pause()
	}
	return nil
}

func testRetriedRefusal(t *testing.T, rr retriedReport) {
	paused, resume, quit := make(chan struct{}), make(chan struct{}), make(chan struct{})
	n, lost := lostReplyNode(t, func(o *tserver.Options) {
		rr.hook(o, func() {
			select { // quit: the test ended first
			case paused <- struct{}{}:
				select {
				case <-resume:
				case <-quit:
				}
			case <-quit:
			}
		})
	})
	t.Cleanup(func() { close(quit) }) // before the tserver closes (cleanups run last first)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: rr.splitKeys}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	putRows(t, ctx, tbl, want, "a", 50)
	putRows(t, ctx, tbl, want, "n", 50)
	parents, err := c.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- rr.run(ctx, c) }()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("the split or merge ended before its pause: %v", err)
	}
	putRows(t, ctx, tbl, want, "b", 20)
	putRows(t, ctx, tbl, want, "p", 20)
	close(resume)
	err = <-done
	t.Logf("the split or merge answered: %v", err)
	if got := rr.reports(lost); got != 2 {
		t.Fatalf("%d reports reached the master, want 2 (the committed one and its refused retry)", got)
	}
	// The report committed: the parents must stay fenced or be gone.
	ts := tserverClient(t, n.servers[0].Addr())
	for _, tb := range parents {
		if err := writeLate(ctx, ts, tb); err == nil {
			t.Fatalf("parent %s took a write after its report committed", tb.ID)
		}
	}

	// The master assigns what it committed, with every file it names.
	waitServing(t, ctx, c, "t")
	if got, _ := c.Tablets(ctx, "t"); len(got) != rr.after {
		t.Fatalf("%d tablets after the report committed, want %d: %+v", len(got), rr.after, got)
	}
	checkRows(t, ctx, tbl, want)
}
