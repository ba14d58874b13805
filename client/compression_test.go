package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/client"
	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/inproc"
)

// mixedValue is an n-byte value, half repeated text and half random.
func mixedValue(rng *rand.Rand, n int) []byte {
	const text = "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. "
	v := make([]byte, n)
	for i := 0; i < n/2; i++ {
		v[i] = text[i%len(text)]
	}
	rng.Read(v[n/2:])
	return v
}

// fileBytes sums the TSFile bytes of each table's tablets on tserver 0.
func fileBytes(t *testing.T, ctx context.Context, c *inproc.Cluster) map[string]int64 {
	t.Helper()
	ts, err := c.TServerClient(0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ts.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, tb := range st.Tablets {
		out[tb.Table] += tb.TsfileBytes
	}
	return out
}

// TestFamilyCompressionThroughServer: a family's compression, given at
// CreateTable, at family creation or by SetCompression, is in the schema
// (DescribeTables), decides how large the tservers' TSFiles of the same
// data are, applies to files written after a change, and every value reads
// back, also after a restart of the tserver over files of both codecs.
func TestFamilyCompressionThroughServer(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	c := inproc.Start(t, inproc.Options{TServers: 1})
	ctx := ctxT(t)
	cl := c.Client()
	comps := map[string]client.Compression{"tn": client.CompressionNone, "ts": client.CompressionDefault, "tz": client.CompressionZstd}
	for name, comp := range comps {
		if err := cl.CreateTable(ctx, client.TableSpec{Name: name, Families: []client.FamilySpec{{Name: "cf", Compression: comp}}}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]map[string][]byte{}
	write := func(table string, from, to int) {
		tbl, err := cl.Open(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		if want[table] == nil {
			want[table] = map[string][]byte{}
		}
		var rows []string
		var ms []*client.Mutation
		for i := from; i < to; i++ {
			row := fmt.Sprintf("row%05d", i)
			v := mixedValue(rng, 1000)
			m := client.NewMutation()
			m.Set("cf", "q", 1000, v)
			rows, ms = append(rows, row), append(ms, m)
			want[table][row] = v
		}
		errs, err := tbl.ApplyBulk(ctx, rows, ms)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range comps {
		write(name, 0, 400)
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	first := fileBytes(t, ctx, c)
	t.Logf("file bytes after the first checkpoint: %v", first)
	for _, name := range []string{"ts", "tz"} {
		if r := float64(first[name]) / float64(first["tn"]); r > 0.65 {
			t.Errorf("table %s (%v) has %.3f of the uncompressed table's file bytes, want at most 0.65", name, comps[name], r)
		}
	}

	// Change the compression of ts to none, and add a zstd family to tn.
	if err := cl.SetCompression(ctx, "ts", "cf", client.CompressionNone); err != nil {
		t.Fatal(err)
	}
	if err := cl.CreateColumnFamilyWithSpec(ctx, "tn", client.FamilySpec{Name: "z2", Compression: client.CompressionZstd}); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetCompression(ctx, "ts", "cf", client.Compression(9)); apierr.CodeOf(err) != codes.InvalidArgument {
		t.Fatalf("SetCompression(9) = %v, want InvalidArgument", err)
	}
	if err := cl.SetCompression(ctx, "ts", "nope", client.CompressionZstd); apierr.CodeOf(err) != codes.InvalidArgument {
		t.Fatalf("SetCompression of a missing family = %v, want InvalidArgument", err)
	}
	infos, err := cl.DescribeTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.Compression{}
	for _, info := range infos {
		for _, f := range info.Families {
			got[info.Name+":"+f.Name] = f.Compression
		}
	}
	wantComp := map[string]client.Compression{"tn:cf": client.CompressionNone, "tn:z2": client.CompressionZstd,
		"ts:cf": client.CompressionNone, "tz:cf": client.CompressionZstd}
	if fmt.Sprint(got) != fmt.Sprint(wantComp) {
		t.Fatalf("DescribeTables compression %v, want %v", got, wantComp)
	}
	write("ts", 400, 800)
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	second := fileBytes(t, ctx, c)
	if grew := second["ts"] - first["ts"]; float64(grew) < 0.9*float64(first["tn"]) {
		t.Errorf("table ts grew by %d bytes under compression none for as much data as tn's %d", grew, first["tn"])
	}

	if err := c.RestartTServer(0); err != nil {
		t.Fatal(err)
	}
	for name, rows := range want {
		if err := c.WaitServing(ctx, name); err != nil {
			t.Fatal(err)
		}
		tbl, err := cl.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = tbl.Scan(ctx, "", "", func(r client.Row) bool {
			if len(r.Cells) != 1 || !bytes.Equal(r.Cells[0].Value, rows[r.Key]) {
				t.Errorf("table %s row %s: %d cells, value mismatch", name, r.Key, len(r.Cells))
			}
			n++
			return true
		})
		if err != nil || n != len(rows) {
			t.Fatalf("table %s after restart: %d of %d rows, %v", name, n, len(rows), err)
		}
	}
}
