package frontend

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
)

// granularityScenario runs the same calls against a Cloud Bigtable API
// server on conn (the frontend, or bttest) and describes what they did:
// tables created through the admin API (default granularity, and MICROS),
// server timestamps, a client timestamp of 1500 µs (the official client
// truncates it; a raw request keeps it), a CLIENT_AUTO_GENERATED one, and
// a read-modify-write. Timestamps the server picks are described by
// whether they are whole milliseconds, so the two servers compare;
// emulator says conn is bttest's.
func granularityScenario(t *testing.T, ctx context.Context, conn *grpc.ClientConn, emulator bool) string {
	t.Helper()
	const parent = "projects/p/instances/i"
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	adm, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	bt, err := bigtable.NewClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	rawAdm := adminpb.NewBigtableTableAdminClient(conn)
	raw := btpb.NewBigtableClient(conn)

	// The official client's CreateTable sends no granularity: MILLIS.
	if err := adm.CreateTable(ctx, "ms"); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateColumnFamily(ctx, "ms", "cf"); err != nil {
		t.Fatal(err)
	}
	_, err = rawAdm.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent, TableId: "us",
		Table: &adminpb.Table{Granularity: adminpb.Table_MICROS, ColumnFamilies: map[string]*adminpb.ColumnFamily{"cf": {}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rawAdm.CreateTable(ctx, &adminpb.CreateTableRequest{Parent: parent, TableId: "bad",
		Table: &adminpb.Table{Granularity: 9}})
	say("create granularity 9: %v", status.Code(err))
	for _, id := range []string{"ms", "us"} {
		got, err := rawAdm.GetTable(ctx, &adminpb.GetTableRequest{Name: parent + "/tables/" + id, View: adminpb.Table_SCHEMA_VIEW})
		if err != nil {
			t.Fatal(err)
		}
		say("table %s: %v", id, got.Granularity)
	}

	ms, us := bt.Open("ms"), bt.Open("us")
	// In a fixed order: the lines of the two servers are compared.
	for _, tt := range []struct {
		name string
		tbl  *bigtable.Table
	}{{"ms", ms}, {"us", us}} {
		name, tbl := tt.name, tt.tbl
		m := bigtable.NewMutation()
		for i := 0; i < 20; i++ {
			m.Set("cf", "q", bigtable.ServerTime, []byte{byte(i)})
		}
		if err := tbl.Apply(ctx, "one", m); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			m := bigtable.NewMutation()
			m.Set("cf", "q", bigtable.ServerTime, []byte{byte(i)})
			if err := tbl.Apply(ctx, "fast", m); err != nil {
				t.Fatal(err)
			}
		}
		// The official client truncates a timestamp to milliseconds.
		m = bigtable.NewMutation()
		m.Set("cf", "q", bigtable.Timestamp(1500), []byte("client"))
		if err := tbl.Apply(ctx, "client", m); err != nil {
			t.Fatal(err)
		}
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment("cf", "n", 1)
		inc, err := tbl.ApplyReadModifyWrite(ctx, "inc", rmw)
		if err != nil {
			t.Fatal(err)
		}
		one, err := tbl.ReadRow(ctx, "one")
		if err != nil {
			t.Fatal(err)
		}
		fast, err := tbl.ReadRow(ctx, "fast")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := tbl.ReadRow(ctx, "client")
		if err != nil {
			t.Fatal(err)
		}
		whole := true
		for _, items := range []bigtable.Row{one, fast, inc} {
			for _, it := range items["cf"] {
				whole = whole && it.Timestamp%1000 == 0
			}
		}
		if name == "ms" && !whole {
			t.Errorf("table ms: a server timestamp is not a whole millisecond: %v %v %v", one, fast, inc)
		}
		if name == "ms" && (len(fast["cf"]) == 0 || len(fast["cf"]) > 20 || fast["cf"][0].Value[0] != 19) {
			t.Errorf("table ms: 20 writes left %v", fast["cf"])
		}
		// bttest reads its clock for each server-time set of a mutation:
		// in a MICROS table some of them share a µs, in a MILLIS table
		// they may span two milliseconds. Bighive gives one mutation's
		// sets one timestamp (MILLIS: one version), strictly increasing
		// ones in a MICROS table. Lines starting with "~" are not
		// compared; Bighive's are checked below.
		say("~%s: one mutation of 20 server-time sets leaves %d versions, the newest %d", name, len(one["cf"]), one["cf"][0].Value[0])
		say("%s: Timestamp(1500) through the official client stored at %d", name, cl["cf"][0].Timestamp)
	}

	// A raw request keeps 1500: MILLIS refuses it, MICROS takes it; a
	// CLIENT_AUTO_GENERATED one is truncated.
	for _, tc := range []struct {
		table  string
		origin btpb.Mutation_TimestampOrigin
	}{
		{"ms", btpb.Mutation_TIMESTAMP_ORIGIN_UNSPECIFIED},
		{"ms", btpb.Mutation_USER_SPECIFIED},
		{"ms", btpb.Mutation_CLIENT_AUTO_GENERATED},
		{"us", btpb.Mutation_TIMESTAMP_ORIGIN_UNSPECIFIED},
	} {
		row := "raw-" + tc.origin.String()
		_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: parent + "/tables/" + tc.table, RowKey: []byte(row),
			Mutations: []*btpb.Mutation{{TimestampOrigin: tc.origin, Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "cf", ColumnQualifier: []byte("q"), TimestampMicros: 1500, Value: []byte("v")}}}}})
		code := status.Code(err)
		if tc.table == "ms" && code == codes.InvalidArgument && !strings.Contains(err.Error(), "1500") {
			t.Errorf("refusal of 1500 does not name it: %v", err)
		}
		stored := "nothing"
		if r, err := bt.Open(tc.table).ReadRow(ctx, row); err == nil && len(r["cf"]) > 0 {
			stored = fmt.Sprint(r["cf"][0].Timestamp)
		}
		say("raw MutateRow %s origin %v timestamp 1500: %v, stored %s", tc.table, tc.origin, code, stored)
		// MutateRows, per entry.
		st, err := raw.MutateRows(ctx, &btpb.MutateRowsRequest{TableName: parent + "/tables/" + tc.table, Entries: []*btpb.MutateRowsRequest_Entry{{
			RowKey: []byte(row + "-bulk"), Mutations: []*btpb.Mutation{{TimestampOrigin: tc.origin, Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "cf", ColumnQualifier: []byte("q"), TimestampMicros: 1500, Value: []byte("v")}}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		// bttest answers a refused MutateRows entry Internal; Bighive
		// answers InvalidArgument, as Cloud Bigtable (and as for a
		// missing family, docs/bigtable-api.md "Errors").
		code = codes.Code(resp.Entries[0].GetStatus().GetCode())
		if emulator && code == codes.Internal {
			code = codes.InvalidArgument
		}
		say("raw MutateRows %s origin %v timestamp 1500: %v", tc.table, tc.origin, code)
	}
	return strings.Join(out, "\n")
}

// TestGranularityOfficialClient: tables created through the Cloud Bigtable
// admin API have millisecond granularity unless they ask for MICROS, and
// the frontend answers the calls of granularityScenario as Google's
// emulator (bttest) does.
func TestGranularityOfficialClient(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{})
	ctx := ctxT(t)
	got := granularityScenario(t, ctx, a.conn, false)

	want := granularityScenario(t, ctx, dialEmulator(t), true)
	compared := func(s string) string {
		var keep []string
		for _, line := range strings.Split(s, "\n") {
			if !strings.HasPrefix(line, "~") {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	if compared(got) != compared(want) {
		t.Errorf("frontend:\n%s\nbttest:\n%s", got, want)
	}
	for _, line := range []string{
		"table ms: MILLIS",
		"table us: MICROS",
		"~ms: one mutation of 20 server-time sets leaves 1 versions, the newest 19",
		"~us: one mutation of 20 server-time sets leaves 20 versions",
		"raw MutateRows ms origin USER_SPECIFIED timestamp 1500: InvalidArgument",
		"ms: Timestamp(1500) through the official client stored at 1000",
		"raw MutateRow ms origin USER_SPECIFIED timestamp 1500: InvalidArgument, stored nothing",
		"raw MutateRow ms origin CLIENT_AUTO_GENERATED timestamp 1500: OK, stored 1000",
		"raw MutateRow us origin TIMESTAMP_ORIGIN_UNSPECIFIED timestamp 1500: OK, stored 1500",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("frontend does not say %q:\n%s", line, got)
		}
	}
}
