package client_test

import (
	"slices"
	"testing"

	"bighive/client"
	"bighive/client/clienttest"
	"bighive/internal/apierr"
	"bighive/internal/clustertest"
	pb "bighive/proto/bighivepb"
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
// several tablets of a real cluster, while a tablet splits and a tserver
// restarts under the read, deliver every row once, in order.
func TestReadRowsResumesOnRealCluster(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{TServers: 2})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{"row100", "row200"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
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
	splits := []string{"row050", "row150", "row250", "row270", "row030", "row130"}
	for _, reversed := range []bool{false, true} {
		var opts []client.ReadOption
		want := slices.Clone(rows)
		if reversed {
			opts = append(opts, client.ReverseScan())
			slices.Reverse(want)
		}
		var got []string
		err := tbl.ReadRows(ctx, client.RowRangeList{client.InfiniteRange("")}, func(r client.Row) bool {
			got = append(got, r.Key)
			switch len(got) {
			case 20, 120:
				row := splits[0]
				splits = splits[1:]
				if err := cl.SplitTablet(ctx, "t", row); err != nil {
					t.Errorf("split at %s: %v", row, err)
				}
			case 200:
				if err := c.RestartTServer(0); err != nil {
					t.Errorf("restart: %v", err)
				}
			}
			return true
		}, opts...)
		if err != nil {
			t.Fatalf("reversed %v: %v", reversed, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("reversed %v: delivered %d rows, want %d in order:\n%v", reversed, len(got), len(want), got)
		}
	}
}
