package client_test

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/inproc"
)

// TestReadRowsResumes: a ReadRows of a row set, forward and reverse, whose
// streams fail mid-tablet and whose tablets split and move under it,
// delivers every row of the set once, in order, and counts its limit in
// delivered rows.
func TestReadRowsResumes(t *testing.T) {
	for _, reversed := range []bool{false, true} {
		t.Run(map[bool]string{false: "forward", true: "reverse"}[reversed], func(t *testing.T) {
			fc, _, tbl := setup(t, clienttest.Options{TServers: 2}, "row050")
			ctx := ctxT(t)
			rows := make([]string, 100)
			ms := make([]*client.Mutation, 100)
			for i := range rows {
				rows[i] = rowKey(i)
				ms[i] = client.NewMutation()
				ms[i].Set("cf", "q", 1, []byte("v"))
			}
			if errs, err := tbl.ApplyBulk(ctx, rows, ms); errs != nil || err != nil {
				t.Fatal(errs, err)
			}
			// Every row but 3..5, 40 and 77..: three ranges and a list of keys.
			set := client.RowRangeList{client.NewRange("", rowKey(3)), client.NewOpenRange(rowKey(5), rowKey(40)), client.NewClosedRange(rowKey(41), rowKey(76))}
			var want []string
			for i := 0; i < 77; i++ {
				if i < 3 || i > 5 && i != 40 {
					want = append(want, rowKey(i))
				}
			}
			var opts []client.ReadOption
			if reversed {
				opts = append(opts, client.ReverseScan())
				slices.Reverse(want)
			}
			fc.Inject(clienttest.Fault{Method: "ScanRows", AfterRows: 7, Err: apierr.Unavailable("tserver crashed"), Times: 2})
			var got []string
			err := tbl.ReadRows(ctx, set, func(r client.Row) bool {
				got = append(got, r.Key)
				switch len(got) {
				case 10:
					fc.Split("t", "row030")
					fc.Split("t", "row060")
				case 25:
					fc.MoveTablet("t", "row045", 0)
				case 40:
					fc.Inject(clienttest.Fault{Method: "ScanRows", Err: apierr.Tablet(pb.TabletError_NOT_SERVING, "", 0, "moved")})
					fc.MoveTablet("t", "row070", 1)
					fc.MoveTablet("t", "row010", 1)
				}
				return true
			}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("ReadRows delivered %d rows %v\nwant %d %v", len(got), got, len(want), want)
			}
			// With a limit, across the same failures.
			fc.Inject(clienttest.Fault{Method: "ScanRows", AfterRows: 4, Err: apierr.Unavailable("tserver crashed"), Times: 3})
			got = nil
			if err := tbl.ReadRows(ctx, set, func(r client.Row) bool { got = append(got, r.Key); return true }, append(opts, client.LimitRows(30))...); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[:30]) {
				t.Fatalf("ReadRows with limit 30 delivered %v\nwant %v", got, want[:30])
			}
		})
	}
}

// TestReadRowsResumesOnRealCluster: forward and reverse ReadRows over
// several tablets of a real cluster, while tablets ahead of the read split
// and the tserver serving the rows still to come restarts, deliver every
// row once, in order; the read does resume (the client logs its retries).
func TestReadRowsResumesOnRealCluster(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 2})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"row100", "row200"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	retries := &countHandler{msg: "client: retrying scan"}
	cl := c.Client(client.WithLogger(slog.New(retries)))
	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	rows := make([]string, n)
	ms := make([]*client.Mutation, n)
	for i := range rows {
		rows[i] = rowKey(i)
		ms[i] = client.NewMutation()
		ms[i].Set("cf", "q", 1, []byte("v"))
	}
	if errs, err := tbl.ApplyBulk(ctx, rows, ms); errs != nil || err != nil {
		t.Fatal(errs, err)
	}
	// restartOwner restarts the tserver serving row.
	restartOwner := func(row string) {
		tablets, err := cl.Tablets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tablets {
			if tb.StartRow <= row && (tb.EndRow == "" || row < tb.EndRow) {
				for i := range c.TServers() {
					if c.TServerAddr(i) == tb.TServer {
						if err := c.RestartTServer(i); err != nil {
							t.Fatal(err)
						}
						return
					}
				}
			}
		}
		t.Fatalf("no tserver serves %s", row)
	}
	for _, reversed := range []bool{false, true} {
		var opts []client.ReadOption
		want := slices.Clone(rows)
		// Rows ahead of the read at 20 and 120 rows read: tablets split
		// there before the read reaches them; at 200 rows the tserver of
		// the rest restarts.
		ahead := func(i int) string { return rowKey(i) }
		splits := map[int]string{20: ahead(150 + 5), 120: ahead(250 + 5)}
		restart := ahead(280)
		if reversed {
			opts = append(opts, client.ReverseScan())
			slices.Reverse(want)
			splits = map[int]string{20: ahead(150 - 5), 120: ahead(50 - 5)}
			restart = ahead(20)
		}
		before := retries.count.Load()
		var got []string
		err := tbl.ReadRows(ctx, client.RowRangeList{client.InfiniteRange("")}, func(r client.Row) bool {
			got = append(got, r.Key)
			if row, ok := splits[len(got)]; ok {
				if err := cl.SplitTablet(ctx, "t", row); err != nil {
					t.Errorf("split at %s: %v", row, err)
				}
			}
			if len(got) == 200 {
				restartOwner(restart)
			}
			return true
		}, opts...)
		if err != nil {
			t.Fatalf("reversed %v: %v", reversed, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("reversed %v: delivered %d rows, want %d in order:\n%v", reversed, len(got), len(want), got)
		}
		if retries.count.Load() == before {
			t.Errorf("reversed %v: the read never retried: the splits and the restart did not reach it", reversed)
		}
	}
}

// countHandler is a slog handler counting the records with one message.
type countHandler struct {
	msg   string
	count atomic.Int64
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.count.Add(1)
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }
