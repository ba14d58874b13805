package frontend

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
)

// be is v as an aggregate cell's value: 8 bytes, big-endian.
func be(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// TestAggregatesOfficialClient drives aggregate column families through
// the official Go client. Google's emulator has no aggregates, so the
// expected values follow the API's definition: AddToCell folds its input
// into the cell with the family's aggregator (sum, min, max of int64s),
// MergeToCell folds a state (the same 8-byte big-endian int64), a read
// returns one cell per (column, timestamp) whose value is the result, and
// what Cloud Bigtable refuses (a SetCell into an aggregate family, an
// AddToCell into a plain one, a value type changed after creation, the
// HyperLogLog++ aggregator Bighive does not serve) is InvalidArgument
// naming the family.
func TestAggregatesOfficialClient(t *testing.T) {
	a := startAPI(t, client.TableSpec{})
	ctx := ctxT(t)
	adm, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(a.conn))
	if err != nil {
		t.Fatal(err)
	}
	agg := func(g bigtable.Aggregator) bigtable.Family {
		return bigtable.Family{ValueType: bigtable.AggregateType{Input: bigtable.Int64Type{}, Aggregator: g}}
	}
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"sum": agg(bigtable.SumAggregator{}), "p": {}}}); err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]bigtable.Aggregator{"min": bigtable.MinAggregator{}, "max": bigtable.MaxAggregator{}} {
		if err := adm.CreateColumnFamilyWithConfig(ctx, "t", name, agg(g)); err != nil {
			t.Fatalf("create family %s: %v", name, err)
		}
	}

	// GetTable returns each family's value type, its state type filled in.
	info, err := adm.TableInfo(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, f := range info.FamilyInfos {
		types[f.Name] = "none"
		if at, ok := f.ValueType.(bigtable.AggregateType); ok {
			types[f.Name] = aggregatorName(at.Aggregator)
			if _, ok := at.Input.(bigtable.Int64Type); !ok {
				t.Errorf("family %s: input type %#v, want Int64", f.Name, at.Input)
			}
		}
	}
	if want := map[string]string{"sum": "sum", "min": "min", "max": "max", "p": "none"}; fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("value types %v, want %v", types, want)
	}

	tbl := a.bt.Open("t")
	apply := func(row string, m *bigtable.Mutation) error { return tbl.Apply(ctx, row, m) }
	read := func(row string, opts ...bigtable.ReadOption) map[string][]int64 {
		t.Helper()
		r, err := tbl.ReadRow(ctx, row, opts...)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]int64{}
		for _, items := range r {
			for _, it := range items {
				if len(it.Value) != 8 {
					t.Fatalf("%s: %d-byte value %q, want 8 bytes", it.Column, len(it.Value), it.Value)
				}
				out[it.Column] = append(out[it.Column], int64(binary.BigEndian.Uint64(it.Value)))
			}
		}
		return out
	}

	// Sums, minimums and maximums over several requests and ops, through
	// MutateRow, MutateRows and MergeToCell.
	const ts = bigtable.Timestamp(1_000_000)
	m := bigtable.NewMutation()
	m.AddIntToCell("sum", "c", ts, 5)
	m.AddIntToCell("sum", "c", ts, 7)
	m.AddIntToCell("min", "c", ts, 5)
	m.AddIntToCell("max", "c", ts, 5)
	if err := apply("r", m); err != nil {
		t.Fatal(err)
	}
	m = bigtable.NewMutation()
	m.AddIntToCell("sum", "c", ts, -20)
	m.AddIntToCell("min", "c", ts, -3)
	m.AddIntToCell("max", "c", ts, 9)
	m.MergeBytesToCell("sum", "c", ts, be(100))
	m2 := bigtable.NewMutation()
	m2.AddIntToCell("sum", "c", ts, 1000)
	m2.MergeBytesToCell("min", "c", ts, be(-4))
	if errs, err := tbl.ApplyBulk(ctx, []string{"r", "r"}, []*bigtable.Mutation{m, m2}); err != nil || errs != nil {
		t.Fatalf("ApplyBulk: %v %v", err, errs)
	}
	got := read("r")
	if want := map[string][]int64{"sum:c": {1092}, "min:c": {-4}, "max:c": {9}}; !sameInts(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}

	// Each timestamp is its own cell; versions and filters count merged cells.
	m = bigtable.NewMutation()
	m.AddIntToCell("sum", "c", ts+1000, 1)
	m.AddIntToCell("sum", "c", ts+1000, 2)
	if err := apply("r", m); err != nil {
		t.Fatal(err)
	}
	if got, want := read("r", bigtable.RowFilter(bigtable.FamilyFilter("sum"))), map[string][]int64{"sum:c": {3, 1092}}; !sameInts(got, want) {
		t.Errorf("two timestamps: %v, want %v", got, want)
	}
	if got, want := read("r", bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter("sum"), bigtable.LatestNFilter(1)))), map[string][]int64{"sum:c": {3}}; !sameInts(got, want) {
		t.Errorf("latest 1: %v, want %v", got, want)
	}
	r, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter("sum"), bigtable.StripValueFilter())))
	if err != nil || len(r["sum"]) != 2 || len(r["sum"][0].Value) != 0 {
		t.Errorf("strip value: %v %v, want two empty cells", r, err)
	}

	// A conditional mutation's predicate sees the merged value (3 at the
	// newest timestamp, never one of its operands 1 and 2).
	for _, tc := range []struct {
		lo, hi  int64
		matched bool
	}{{3, 4, true}, {1, 3, false}} {
		cond := bigtable.ChainFilters(bigtable.FamilyFilter("sum"), bigtable.LatestNFilter(1), bigtable.ValueRangeFilter(be(tc.lo), be(tc.hi)))
		add := bigtable.NewMutation()
		add.AddIntToCell("max", "cond", ts, tc.lo)
		var matched bool
		if err := tbl.Apply(ctx, "r", bigtable.NewCondMutation(cond, add, nil), bigtable.GetCondMutationResult(&matched)); err != nil {
			t.Fatal(err)
		}
		if matched != tc.matched {
			t.Errorf("predicate value in [%d, %d): matched %v, want %v", tc.lo, tc.hi, matched, tc.matched)
		}
	}
	if got := read("r", bigtable.RowFilter(bigtable.ColumnFilter("cond"))); !sameInts(got, map[string][]int64{"max:cond": {3}}) {
		t.Errorf("after the conditional adds: %v, want max:cond 3", got)
	}
	// A branch the predicate does not pick is checked too: a SetCell into
	// an aggregate family there refuses the whole request.
	badSet := bigtable.NewMutation()
	badSet.Set("sum", "c", ts, []byte("x"))
	goodAdd := bigtable.NewMutation()
	goodAdd.AddIntToCell("max", "cond", ts, 100)
	if err := tbl.Apply(ctx, "r", bigtable.NewCondMutation(bigtable.PassAllFilter(), goodAdd, badSet)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"sum"`) {
		t.Errorf("a conditional mutation with a SetCell into an aggregate family in its other branch: %v; want InvalidArgument naming it", err)
	}
	if got := read("r", bigtable.RowFilter(bigtable.ColumnFilter("cond"))); !sameInts(got, map[string][]int64{"max:cond": {3}}) {
		t.Errorf("after the refused conditional mutation: %v, want max:cond 3 still", got)
	}

	// A delete hides what was added before it; a later add starts afresh.
	m = bigtable.NewMutation()
	m.DeleteCellsInColumn("sum", "c")
	m.AddIntToCell("sum", "c", ts, 42)
	if err := apply("r", m); err != nil {
		t.Fatal(err)
	}
	if got := read("r", bigtable.RowFilter(bigtable.FamilyFilter("sum"))); !sameInts(got, map[string][]int64{"sum:c": {42}}) {
		t.Errorf("after delete and add: %v, want sum:c 42", got)
	}

	// A MergeToCell of NULL has no effect; alone in a request it is refused.
	raw := btpb.NewBigtableClient(a.conn)
	const tn = "projects/p/instances/i/tables/t"
	nullMerge := &btpb.Mutation{Mutation: &btpb.Mutation_MergeToCell_{MergeToCell: &btpb.Mutation_MergeToCell{
		FamilyName: "sum", ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("c")}},
		Timestamp: &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: int64(ts)}}}}}
	add1 := &btpb.Mutation{Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{
		FamilyName: "sum", ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("c")}},
		Timestamp: &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: int64(ts)}},
		Input:     &btpb.Value{Kind: &btpb.Value_IntValue{IntValue: 1}}}}}
	if _, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{nullMerge, add1}}); err != nil {
		t.Fatalf("a NULL merge and an add: %v", err)
	}
	if got := read("r", bigtable.RowFilter(bigtable.FamilyFilter("sum"))); !sameInts(got, map[string][]int64{"sum:c": {43}}) {
		t.Errorf("after a NULL merge and an add of 1: %v, want sum:c 43", got)
	}
	if _, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{nullMerge}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "NULL") {
		t.Errorf("only a NULL merge: %v; want InvalidArgument saying nothing is written", err)
	}

	// What Cloud Bigtable refuses, each an InvalidArgument naming the family.
	rawAdd := func(fam string, ts int64, input *btpb.Value) error {
		_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: tn, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{
			FamilyName: fam, ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("c")}},
			Timestamp: &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: ts}}, Input: input}}}}})
		return err
	}
	intValue := &btpb.Value{Kind: &btpb.Value_IntValue{IntValue: 1}}
	set := bigtable.NewMutation()
	set.Set("sum", "c", ts, []byte("x"))
	addPlain := bigtable.NewMutation()
	addPlain.AddIntToCell("p", "c", ts, 1)
	addNow := bigtable.NewMutation()
	addNow.AddIntToCell("sum", "c", bigtable.ServerTime, 1)
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("sum", "c", 1)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"SetCell into an aggregate family", apply("r", set), `"sum"`},
		{"AddToCell into a plain family", apply("r", addPlain), `"p"`},
		{"AddToCell at server time", apply("r", addNow), `"sum"`},
		{"AddToCell off the table's millisecond granularity", rawAdd("sum", 1500, intValue), "granularity"},
		{"AddToCell of a string", rawAdd("sum", 1000, &btpb.Value{Kind: &btpb.Value_StringValue{StringValue: "1"}}), `"sum"`},
		{"ReadModifyWriteRow on an aggregate family", func() error { _, err := tbl.ApplyReadModifyWrite(ctx, "r", rmw); return err }(), `rule 0 is on aggregate family "sum"`},
		{"a value type changed", adm.UpdateFamily(ctx, "t", "p", agg(bigtable.SumAggregator{})), "immutable"},
		{"HyperLogLog++", adm.CreateColumnFamilyWithConfig(ctx, "t", "hll", agg(bigtable.HllppUniqueCountAggregator{})), "HyperLogLog++"},
		{"an Int64 input of ordered-code encoding", adm.CreateColumnFamilyWithConfig(ctx, "t", "oc", bigtable.Family{ValueType: bigtable.AggregateType{
			Input: bigtable.Int64Type{Encoding: bigtable.Int64OrderedCodeBytesEncoding{}}, Aggregator: bigtable.SumAggregator{}}}), "big_endian_bytes"},
	} {
		if status.Code(tc.err) != codes.InvalidArgument || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v; want InvalidArgument saying %s", tc.name, tc.err, tc.want)
		}
	}
	// The value type of a missing family: NotFound before the refusal.
	adminRaw := adminpb.NewBigtableTableAdminClient(a.conn)
	_, err = adminRaw.ModifyColumnFamilies(ctx, &adminpb.ModifyColumnFamiliesRequest{Name: tn, Modifications: []*adminpb.ModifyColumnFamiliesRequest_Modification{
		{Id: "nofam", Mod: &adminpb.ModifyColumnFamiliesRequest_Modification_Update{Update: &adminpb.ColumnFamily{}}, UpdateMask: nil}}})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `"nofam"`) {
		t.Errorf("update of a missing family: %v; want NotFound naming it", err)
	}
	if got := read("r", bigtable.RowFilter(bigtable.FamilyFilter("sum"))); !sameInts(got, map[string][]int64{"sum:c": {43}}) {
		t.Errorf("after the refused writes: %v, want sum:c 43 still", got)
	}
}

// aggregatorName names an aggregator of the official client.
func aggregatorName(g bigtable.Aggregator) string {
	switch g.(type) {
	case bigtable.SumAggregator:
		return "sum"
	case bigtable.MinAggregator:
		return "min"
	case bigtable.MaxAggregator:
		return "max"
	}
	return fmt.Sprintf("%T", g)
}

func sameInts(a, b map[string][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb := b[k]
		if len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}
