package tserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"bighive/client"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/wait"
)

// TestMutateRowsIsOneGroupCommit: the rows of one MutateRows go through
// the replica's WriteBatch, one WAL group commit for the lot (it ran a
// goroutine and an append per row, several group commits), and a bad row
// still fails alone.
func TestMutateRowsIsOneGroupCommit(t *testing.T) {
	n := startNode(t, 1, 2*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := n.client(ctx)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ctx, c, "t")
	tablets, err := c.Tablets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(tablets[0].TServer, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts := pb.NewTServerClient(conn)
	walCounters := func() (records, batches int64) {
		st, err := ts.Status(ctx, &pb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st.Counters["wal_records"], st.Counters["wal_batches"]
	}
	var rows []*pb.RowMutation
	for i := range 100 {
		fam := "cf"
		if i == 37 {
			fam = "nofam"
		}
		rows = append(rows, &pb.RowMutation{RowKey: fmt.Appendf(nil, "r%03d", i), Mutations: []*pb.Mutation{{Mutation: &pb.Mutation_SetCell_{
			SetCell: &pb.Mutation_SetCell{Family: fam, Qualifier: []byte("q"), TimestampMicros: -1, Value: make([]byte, 100)}}}}})
	}
	rec0, bat0 := walCounters()
	// The master shows the tablet serving once its load is reported; the
	// tserver serves it when the report's answer is back, a moment later,
	// and refuses it as loading (nothing applied) until then.
	var resp *pb.MutateRowsResponse
	wait.ForCtx(t, ctx, "the tablet served by its tserver", func() error {
		resp, err = ts.MutateRows(ctx, &pb.MutateRowsRequest{TabletId: tablets[0].ID, Epoch: tablets[0].Epoch, Rows: rows})
		if isLoading(err) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range resp.Statuses {
		want := codes.OK
		if i == 37 {
			want = codes.InvalidArgument
		}
		if codes.Code(st.Code) != want {
			t.Errorf("row %d: %v %s, want %v", i, codes.Code(st.Code), st.Message, want)
		}
	}
	rec1, bat1 := walCounters()
	if rec1-rec0 != 99 || bat1-bat0 != 1 {
		t.Errorf("MutateRows of 99 valid rows logged %d records in %d group commits, want 99 in 1", rec1-rec0, bat1-bat0)
	}
}

// isLoading reports whether err is a tserver's refusal of a tablet it is
// still loading (TabletError RECOVERING): nothing was applied.
func isLoading(err error) bool {
	te, ok := apierr.TabletReason(err)
	return ok && te.GetReason() == pb.TabletError_RECOVERING
}
