package tserver

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"bighive/client"
	"bighive/master"
	"bighive/storage/checkpoint"
	"bighive/storage/merge"
	rp "bighive/storage/replica"
)

// TestMergeReportFencedByLoad: a parent of a merge is unloaded here after
// the merge fenced it and before its report. The report was computed for
// a load that no longer serves the tablet (loaded again, even at the same
// epoch, its new load would take writes the merge does not hold), so it
// is not sent: the merge is refused with ErrLoadEnded, and the metadata
// still holds both parents.
func TestMergeReportFencedByLoad(t *testing.T) {
	t.Parallel()
	var srv atomic.Pointer[Server]
	var unloaded atomic.Bool
	m, s := startWithMaster(t, func(c *master.Config) { c.MergeThreshold = -1 }, func(o *Options) {
		o.MergeHook = func(step merge.Step) error {
			if step == merge.StepReport && unloaded.CompareAndSwap(false, true) {
				s := srv.Load()
				for _, r := range s.tablets.all() {
					if len(r.Start()) == 0 { // the left parent
						s.unload(r, "test: unloaded while its merge reports")
					}
				}
			}
			return nil
		}
	})
	srv.Store(s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"a", "z"} {
		if err := tbl.Put(ctx, row, "cf", "q", []byte(row)); err != nil {
			t.Fatal(err)
		}
	}
	var left, right *rp.Replica
	for _, r := range s.tablets.all() {
		if len(r.Start()) == 0 {
			left = r
		} else {
			right = r
		}
	}
	if left == nil || right == nil {
		t.Fatal("the table's two tablets are not both served here")
	}
	_, err = s.runMerge(s.ctx, left, right)
	if !errors.Is(err, merge.ErrRefused) || !errors.Is(err, checkpoint.ErrLoadEnded) {
		t.Fatalf("merge whose left parent was unloaded before its report: %v, want ErrRefused wrapping ErrLoadEnded", err)
	}
	tablets, err := c.Tablets(ctx, "t")
	if err != nil || len(tablets) != 2 {
		t.Fatalf("the metadata holds %d tablets (%v), want both parents", len(tablets), err)
	}
	// The master gives the unloaded parent back; every row reads.
	for _, row := range []string{"a", "z"} {
		got, err := tbl.Get(ctx, row)
		if err != nil || len(got.Cells) != 1 || string(got.Cells[0].Value) != row {
			t.Fatalf("get %s after the refused merge: %+v, %v", row, got, err)
		}
	}
}
