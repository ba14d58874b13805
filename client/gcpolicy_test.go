package client_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/testkit/inproc"
)

// TestFamilyGCPolicy: a family created with FamilySpec.GCPolicy keeps that
// policy (reads apply it), and DescribeTables shows the policy of every
// family whose policy was given at creation or set by SetGCPolicy.
func TestFamilyGCPolicy(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{TServers: 1})
	ctx := ctxT(t)
	cl := c.Client()
	nested := client.IntersectionPolicy(client.MaxVersionsPolicy(1),
		client.UnionPolicy(client.MaxAgePolicy(time.Hour), client.MaxVersionsPolicy(3)))
	spec := client.TableSpec{Name: "g", Families: []client.FamilySpec{
		{Name: "p", GCPolicy: client.MaxVersionsPolicy(2)},
		{Name: "n", GCPolicy: nested},
		{Name: "old", MaxVersions: 4},
	}}
	if err := cl.CreateTable(ctx, spec); err != nil {
		t.Fatal(err)
	}
	tbl, err := cl.Open(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMicro()
	m := client.NewMutation()
	for i := int64(1); i <= 3; i++ {
		m.Set("p", "q", now+i, []byte{byte(i)})
	}
	if err := tbl.Apply(ctx, "r", m); err != nil {
		t.Fatal(err)
	}
	row, err := tbl.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(row.Cells) != 2 {
		t.Errorf("family p (GCPolicy max 2 versions) reads %d cells, want 2", len(row.Cells))
	}
	if err := cl.SetGCPolicy(ctx, "g", "old", client.MaxAgePolicy(time.Minute)); err != nil {
		t.Fatal(err)
	}
	infos, err := cl.DescribeTables(ctx)
	if err != nil || len(infos) != 1 {
		t.Fatalf("DescribeTables = %v, %v", infos, err)
	}
	want := map[string]string{"p": "versions() > 2", "n": nested.String(), "old": "age() > 1m0s"}
	for _, f := range infos[0].Families {
		if f.GCPolicy == nil || f.GCPolicy.String() != want[f.Name] || f.MaxVersions != 0 || f.MaxAge != 0 {
			t.Errorf("family %s described as %+v, want GCPolicy %q alone", f.Name, f, want[f.Name])
		}
	}
	bad := client.TableSpec{Name: "b", Families: []client.FamilySpec{{Name: "f", MaxVersions: 1, GCPolicy: client.MaxVersionsPolicy(1)}}}
	if err := cl.CreateTable(ctx, bad); apierr.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("CreateTable with both GCPolicy and MaxVersions: %v, want InvalidArgument", err)
	}
}
