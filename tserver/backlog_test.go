package tserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/tserver"
)

// TestWriteSlowdownPastStopFiles: a Put to a tablet with more TSFiles
// than --compaction-stop-files goes through the backlog rule's delay on
// the tserver's write path, succeeds, and shows in the metrics with the
// tablet's file count.
func TestWriteSlowdownPastStopFiles(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := inproc.Start(t, inproc.Options{MemLimit: 64 << 20, TServer: func(i int, o *tserver.Options) {
		o.Metrics = reg
		// No compaction catches up: the files stay.
		o.CompactionMaxFiles, o.CompactionMajorEvery, o.CompactionGarbageShare = 100, -1, -1
		o.CompactionBacklogFiles, o.CompactionStopFiles = -1, 2
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "s", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	defer cl.Close()
	tbl, err := cl.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	const files = 4
	for i := range files {
		if err := tbl.Put(ctx, fmt.Sprintf("r%03d", i), "cf", "q", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(fams, "bighive_tserver_write_slowdown_total"); v != 1 {
		// The third Put found 2 files (not over), the fourth 3.
		t.Fatalf("write_slowdown_total = %v after %d Puts, want 1", v, files)
	}
	if err := tbl.Put(ctx, "last", "cf", "q", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if fams, err = reg.Gather(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   func(float64) bool
	}{
		{"bighive_tserver_tablet_tsfiles_max", func(v float64) bool { return v == files }},
		{"bighive_tserver_write_slowdown_total", func(v float64) bool { return v == 2 }},
		{"bighive_tserver_write_slowdown_seconds_total", func(v float64) bool { return v > 0 }},
		{"bighive_tserver_write_slowdown_max_seconds", func(v float64) bool { return v > 0 }},
		{"bighive_compaction_backlog_total", func(v float64) bool { return v == 0 }},
	} {
		if v, ok := value(fams, tc.name); !ok || !tc.ok(v) {
			t.Errorf("%s = %v (found %v), implausible", tc.name, v, ok)
		}
	}
	if got, err := tbl.Get(ctx, "last"); err != nil || len(got.Cells) != 1 {
		t.Fatalf("Get of the slowed Put = %v, %v", got, err)
	}
}
