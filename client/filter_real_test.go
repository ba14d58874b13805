package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/inproc"
)

// TestRowFilterReal: on the real servers a RowFilter composes with the
// ReadFilter selection (selection first), rows it empties are not
// returned, labels come back, and a bad filter is InvalidArgument naming
// what is wrong.
func TestRowFilterReal(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "a"}, {Name: "b"}}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Client().Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range []string{"r1", "r2", "r3"} {
		m := client.NewMutation()
		m.Set("a", "x", 1000, []byte(fmt.Sprint("ax", i)))
		m.Set("a", "x", 2000, []byte(fmt.Sprint("ax", i, "new")))
		m.Set("b", "y", 1000, []byte(fmt.Sprint("by", i)))
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatal(err)
		}
	}
	// Families("b") selects first, so the value filter sees only b's cells.
	r, err := tbl.Get(ctx, "r1", client.Families("b"), client.RowFilter(client.ValueFilter("ax.*|by0")))
	if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != "by0" {
		t.Errorf("Get with Families(b) and a value filter = %+v, %v; want the one cell b:y=by0", r, err)
	}
	// Rows the filter empties are not delivered.
	var keys []string
	var labels []string
	err = tbl.Scan(ctx, "", "", func(r client.Row) bool {
		keys = append(keys, r.Key)
		for _, c := range r.Cells {
			labels = append(labels, fmt.Sprintf("%s:%s@%d%v", c.Family, c.Qualifier, c.Timestamp, c.Labels))
		}
		return true
	}, client.RowFilter(client.ChainFilters(client.RowKeyFilter("r[13]"), client.LatestNFilter(1), client.LabelFilter("hit"))), client.Families("a"))
	if err != nil || strings.Join(keys, " ") != "r1 r3" || strings.Join(labels, " ") != "a:x@2000[hit] a:x@2000[hit]" {
		t.Errorf("scan = %v %v, %v", keys, labels, err)
	}
	for _, tt := range []struct {
		f    client.Filter
		want string
	}{
		{client.ValueFilter("a("), "does not compile"},
		{client.ChainFilters(client.LabelFilter("a"), client.LabelFilter("b")), "only one label"},
		{client.RowSampleFilter(1), "row_sample_filter"},
	} {
		_, err := tbl.Get(ctx, "r1", client.RowFilter(tt.f))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Get with %s: %v, want InvalidArgument naming %q", tt.f, err, tt.want)
		}
		err = tbl.Scan(ctx, "", "", func(client.Row) bool { return true }, client.RowFilter(tt.f))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Scan with %s: %v, want InvalidArgument naming %q", tt.f, err, tt.want)
		}
	}
}

// wireBytes counts the bytes of every message a client receives.
type wireBytes struct{ n atomic.Int64 }

func (w *wireBytes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w *wireBytes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.InPayload); ok {
		w.n.Add(int64(p.WireLength))
	}
}
func (w *wireBytes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w *wireBytes) HandleConn(context.Context, stats.ConnStats)                       {}

// TestKeyOnlyScanBytes: a key-only scan (strip value, evaluated on the
// tserver) moves at least 5x fewer bytes over the wire than a full scan of
// a table with large values. It logs the figure.
func TestKeyOnlyScanBytes(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{MemLimit: 64 << 20})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	var wb wireBytes
	tbl, err := c.Client(client.WithGRPCDialOptions(grpc.WithStatsHandler(&wb))).Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const rows, valueSize = 256, 16 << 10
	value := []byte(strings.Repeat("v", valueSize))
	for i := range rows {
		if err := tbl.Put(ctx, fmt.Sprintf("row%05d", i), "cf", "q", value); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	scan := func(opts ...client.ReadOption) int64 {
		t.Helper()
		n := 0
		wb.n.Store(0)
		if err := tbl.Scan(ctx, "", "", func(client.Row) bool { n++; return true }, opts...); err != nil || n != rows {
			t.Fatalf("scan: %d rows, %v", n, err)
		}
		return wb.n.Load()
	}
	full := scan()
	keys := scan(client.RowFilter(client.StripValueFilter()))
	t.Logf("%d rows of %d B values: full scan %d B on the wire, key-only scan %d B (%.0fx fewer)", rows, valueSize, full, keys, float64(full)/float64(keys))
	if keys*5 > full {
		t.Errorf("key-only scan moved %d B, full scan %d B: want at least 5x fewer", keys, full)
	}
}
