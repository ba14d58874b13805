package frontend

import (
	"bytes"
	"testing"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/inproc"
)

// TestDataEmulatorHost: the official Go client reaches the frontend
// through BIGTABLE_EMULATOR_HOST with no options at all. It dials that
// address with gRPC's default 4 MiB receive limit, and its reader wants
// whole rows in each response: a row of 3 MiB goes whole and reads back,
// one of 5 MiB is cut across responses (as the API allows) and its reader
// refuses it (with Google's emulator it fails too, ResourceExhausted).
func TestDataEmulatorHost(t *testing.T) {
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", listenAPI(t, New(c.Client(), nil)))
	bt, err := bigtable.NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	tbl := bt.Open("t")
	for _, tt := range []struct {
		row  string
		size int
		code codes.Code
	}{{"small", 10, codes.OK}, {"three", 3 << 20, codes.OK}, {"five", 5 << 20, codes.Unknown}} {
		m := bigtable.NewMutation()
		m.Set("f", "q", 1000, bytes.Repeat([]byte("v"), tt.size))
		if err := tbl.Apply(ctx, tt.row, m); err != nil {
			t.Fatalf("Apply %s: %v", tt.row, err)
		}
		r, err := tbl.ReadRow(ctx, tt.row)
		if status.Code(err) != tt.code || err == nil && (len(r["f"]) != 1 || len(r["f"][0].Value) != tt.size) {
			t.Errorf("ReadRow %s = %d cells, %v; want %v", tt.row, len(r["f"]), err, tt.code)
		}
	}
}
