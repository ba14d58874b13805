package frontend

import (
	"fmt"
	"testing"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/wait"
)

// TestDataDeletedTable: a table deleted after the frontend opened it
// answers NotFound to reads and writes, and a table created again under
// the name is served.
func TestDataDeletedTable(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}})
	ctx := ctxT(t)
	tbl := a.bt.Open("t")
	m := bigtable.NewMutation()
	m.Set("f", "q", 1000, []byte("v"))
	if err := tbl.Apply(ctx, "r", m); err != nil {
		t.Fatal(err)
	}
	if err := a.c.Client().DeleteTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// The tservers unload a deleted table's tablets on their next
	// heartbeat, so the frontend's cached locations may still be served
	// for a moment: poll.
	wait.ForCtx(t, ctx, "NotFound for ReadRow of a deleted table", func() error {
		if _, err := tbl.ReadRow(ctx, "r"); status.Code(err) != codes.NotFound {
			return fmt.Errorf("ReadRow: %v", err)
		}
		return nil
	})
	if err := tbl.Apply(ctx, "r", m); status.Code(err) != codes.NotFound {
		t.Errorf("Apply to a deleted table = %v; want NotFound", err)
	}
	if err := a.c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Apply(ctx, "r2", m); err != nil {
		t.Errorf("Apply to the table created again = %v", err)
	}
	if r, err := tbl.ReadRow(ctx, "r2"); err != nil || len(r["f"]) != 1 {
		t.Errorf("ReadRow of the table created again = %v, %v", r, err)
	}
}
