package frontend

import (
	"bytes"
	"fmt"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"bighive/client"
)

// TestReadRowsResponsesEndOnRows: ReadRows cuts its responses at about
// 1 MiB, always after a committed row (the official Go client's reader
// refuses a response that leaves a row half read), and names the row key
// and family once per row.
func TestReadRowsResponsesEndOnRows(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}, {Name: "g"}}})
	ctx := ctxT(t)
	tbl := a.bt.Open("t")
	const rows = 12
	for i := range rows {
		m := bigtable.NewMutation()
		for q := range 3 {
			m.Set("f", fmt.Sprint("q", q), 1000, bytes.Repeat([]byte("x"), 100<<10))
		}
		m.Set("g", "q", 1000, []byte("small"))
		if err := tbl.Apply(ctx, fmt.Sprintf("r%02d", i), m); err != nil {
			t.Fatal(err)
		}
	}
	raw := btpb.NewBigtableClient(a.conn)
	st, err := raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/t", RequestStatsView: btpb.ReadRowsRequest_REQUEST_STATS_FULL})
	if err != nil {
		t.Fatal(err)
	}
	responses, committed := 0, 0
	var stats *btpb.RequestStats
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		if r.RequestStats != nil {
			stats = r.RequestStats
			continue
		}
		responses++
		if n := len(r.Chunks); n == 0 || !r.Chunks[n-1].GetCommitRow() {
			t.Fatalf("response %d does not end with a committed row", responses)
		}
		for i, c := range r.Chunks {
			first := i == 0 || r.Chunks[i-1].GetCommitRow()
			if first != (c.RowKey != nil) || first != (c.FamilyName != nil) && c.FamilyName.GetValue() != "g" {
				t.Errorf("response %d chunk %d: row key %q family %v (first of its row: %v)", responses, i, c.RowKey, c.FamilyName, first)
			}
			if c.GetCommitRow() {
				committed++
			}
		}
	}
	if committed != rows || responses < 3 || responses > rows {
		t.Errorf("%d rows in %d responses; want %d rows in 3 to %d responses of about 1 MiB", committed, responses, rows, rows)
	}
	// The tserver's scan takes several messages, each reporting what was
	// examined since the last; no filter, so all of it is returned.
	if s := stats.GetFullReadStatsView().GetReadIterationStats(); s.GetRowsReturnedCount() != rows || s.GetCellsReturnedCount() != 4*rows ||
		s.GetRowsSeenCount() != rows || s.GetCellsSeenCount() != 4*rows {
		t.Errorf("request stats = %v; want %d rows and %d cells seen and returned", stats, rows, 4*rows)
	}
}
