package client_test

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/testkit/inproc"
)

// TestAggregatesOnRealServers: the native client creates aggregate
// families (at CreateTable and later), DescribeTables reports their
// aggregator, AddToCell and MergeToCell fold into one cell per timestamp
// (sum, min, max of int64s, 8-byte big-endian values), and the tablets
// refuse a Set into an aggregate family and an AddToCell into a plain one
// with InvalidArgument naming the family.
func TestAggregatesOnRealServers(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{
		{Name: "sum", Aggregate: client.AggregateSum}, {Name: "mx", Aggregate: client.AggregateMax}, {Name: "plain"}}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	if err := cl.CreateColumnFamilyWithSpec(ctx, "t", client.FamilySpec{Name: "mn", Aggregate: client.AggregateMin}); err != nil {
		t.Fatal(err)
	}
	infos, err := cl.DescribeTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.Aggregate{}
	for _, f := range infos[0].Families {
		got[f.Name] = f.Aggregate
	}
	if want := map[string]client.Aggregate{"sum": client.AggregateSum, "mx": client.AggregateMax, "mn": client.AggregateMin, "plain": client.NoAggregate}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("DescribeTables families %v, want %v", got, want)
	}

	tbl, err := cl.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	be := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	for _, ops := range [][]int64{{5, -3, 9}, {7, 11, -20}, {1, 0, 0}} {
		m := client.NewMutation()
		for i, fam := range []string{"sum", "mx", "mn"} {
			m.AddToCell(fam, "c", 1000, ops[i])
		}
		m.MergeToCell("sum", "c", 1000, be(100))
		m.AddToCell("sum", "c", 2000, 1)
		if err := tbl.Apply(ctx, "r", m); err != nil {
			t.Fatal(err)
		}
	}
	row, err := tbl.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var cells []string
	for _, cell := range row.Cells {
		cells = append(cells, cell.Family+":"+cell.Qualifier+"@"+strconv.FormatInt(cell.Timestamp, 10)+"="+strconv.FormatInt(int64(binary.BigEndian.Uint64(cell.Value)), 10))
	}
	if want := "mn:c@1000=-20 mx:c@1000=11 sum:c@2000=3 sum:c@1000=313"; strings.Join(cells, " ") != want {
		t.Errorf("cells %s, want %s", strings.Join(cells, " "), want)
	}

	set := client.NewMutation()
	set.Set("sum", "c", 1000, []byte("x"))
	add := client.NewMutation()
	add.AddToCell("plain", "c", 1000, 1)
	short := client.NewMutation()
	short.MergeToCell("sum", "c", 1000, []byte{1, 2, 3})
	for _, tc := range []struct {
		name string
		m    *client.Mutation
		want string
	}{
		{"Set into an aggregate family", set, `"sum"`},
		{"AddToCell into a plain family", add, `"plain"`},
		{"MergeToCell of 3 bytes", short, "8-byte"},
	} {
		if err := tbl.Apply(ctx, "r", tc.m); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want InvalidArgument saying %s", tc.name, err, tc.want)
		}
	}
}

func TestParseAggregate(t *testing.T) {
	tests := []struct {
		in   string
		want client.Aggregate
		err  string
	}{
		{"intsum", client.AggregateSum, ""},
		{"SUM", client.AggregateSum, ""},
		{"intmin", client.AggregateMin, ""},
		{"intmax", client.AggregateMax, ""},
		{"inthll", client.NoAggregate, "HyperLogLog++"},
		{"avg", client.NoAggregate, "unknown aggregate"},
	}
	for _, tc := range tests {
		got, err := client.ParseAggregate(tc.in)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseAggregate(%q) = %v, %v; want %v, an error saying %q", tc.in, got, err, tc.want, tc.err)
		}
		if err == nil && got.String() != "int"+strings.TrimPrefix(strings.ToLower(tc.in), "int") {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}
