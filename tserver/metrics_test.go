package tserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"bighive/client"
	"bighive/testkit/inproc"
	"bighive/tserver"
)

// value is the sample of family name whose labels are exactly labels
// (name=value pairs), and whether there is one.
func value(fams []*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.Metric {
			if len(m.Label)*2 != len(labels) {
				continue
			}
			for i, l := range m.Label {
				if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestMetricsCollector: the tserver's collector is consistent (a pedantic
// registry checks every sample against its description) and its figures
// follow writes, reads, a checkpoint and a major compaction.
func TestMetricsCollector(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	c := inproc.Start(t, inproc.Options{MemLimit: 64 << 20, TServer: func(i int, o *tserver.Options) { o.Metrics = reg }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "m", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	defer cl.Close()
	tbl, err := cl.Open(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ { // two TSFiles for the compaction to merge
		for i := 0; i < 50; i++ {
			if err := tbl.Put(ctx, fmt.Sprintf("r%03d", i), "cf", "q", []byte(fmt.Sprintf("v%d-%d", round, i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := tbl.Get(ctx, fmt.Sprintf("r%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather (pedantic): %v", err)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		ok     func(float64) bool
	}{
		{"bighive_wal_appends_total", nil, func(v float64) bool { return v >= 100 }},
		{"bighive_wal_written_bytes_total", nil, func(v float64) bool { return v > 0 }},
		{"bighive_wal_group_size_records", nil, func(v float64) bool { return v > 0 }},
		{"bighive_wal_fdatasync_duration_seconds", nil, func(v float64) bool { return v > 0 }},
		{"bighive_wal_rolls_total", nil, func(v float64) bool { return v >= 2 }},
		{"bighive_wal_zeroed_files_total", nil, func(v float64) bool { return v >= 1 }},
		{"bighive_wal_recycled_files_total", nil, func(v float64) bool { return v >= 0 }},
		{"bighive_checkpoint_runs_total", nil, func(v float64) bool { return v >= 2 }},
		{"bighive_checkpoint_duration_seconds", nil, func(v float64) bool { return v >= 2 }},
		{"bighive_checkpoint_flushed_bytes_total", nil, func(v float64) bool { return v > 0 }},
		{"bighive_compaction_runs_total", []string{"kind", "major"}, func(v float64) bool { return v == 1 }},
		{"bighive_compaction_duration_seconds", []string{"kind", "major"}, func(v float64) bool { return v == 1 }},
		{"bighive_compaction_read_bytes_total", nil, func(v float64) bool { return v > 0 }},
		{"bighive_compaction_written_bytes_total", nil, func(v float64) bool { return v > 0 }},
		{"bighive_compaction_garbage_majors_total", nil, func(v float64) bool { return v == 0 }},
		{"bighive_tserver_throttle_max_seconds", nil, func(v float64) bool { return v >= 0 }},
		{"bighive_tserver_tablet_tsfiles_max", nil, func(v float64) bool { return v >= 1 }},
		{"bighive_compaction_backlog_total", nil, func(v float64) bool { return v == 0 }},
		{"bighive_tserver_write_slowdown_total", nil, func(v float64) bool { return v == 0 }},
		{"bighive_tserver_write_slowdown_seconds_total", nil, func(v float64) bool { return v == 0 }},
		{"bighive_tserver_write_slowdown_max_seconds", nil, func(v float64) bool { return v == 0 }},
		{"bighive_blockcache_misses_total", nil, func(v float64) bool { return v > 0 }},
		{"bighive_blockcache_inserts_total", nil, func(v float64) bool { return v > 0 }},
		{"bighive_blockstore_live_bytes", nil, func(v float64) bool { return v > 0 }},
		{"bighive_tserver_tablets", []string{"state", "serving"}, func(v float64) bool { return v == 1 }},
		{"bighive_tserver_recovery_duration_seconds", nil, func(v float64) bool { return v == 1 }},
		{"bighive_tserver_lease_valid", nil, func(v float64) bool { return v == 1 }},
		{"bighive_grpc_server_requests_total", []string{"code", "OK", "method", "/bighive.v1.TServer/Compact"}, func(v float64) bool { return v == 1 }},
	} {
		v, ok := value(fams, tc.name, tc.labels...)
		if !ok || !tc.ok(v) {
			t.Errorf("%s%v = %v (found %v), implausible", tc.name, tc.labels, v, ok)
		}
	}
}
