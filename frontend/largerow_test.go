package frontend

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"testing"
	"unicode/utf8"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"bighive/client"
	"bighive/internal/limits"
	"bighive/internal/wirecodec"
	"bighive/testkit/inproc"
	"bighive/testkit/race"
)

// apiCell is one cell as a ReadRows stream delivers it.
type apiCell struct {
	family, qualifier string
	ts                int64
	value             []byte
	labels            []string
}

// apiRow is a row merged from CellChunks.
type apiRow struct {
	key   string
	cells []apiCell
}

// readStats is what mergeChunks saw of a stream's responses.
type readStats struct {
	responses   int
	maxCellData int // the most cell data one response held
	cutValues   int // values cut across chunks
	splitRows   int // rows whose chunks span responses
}

// mergeChunks reads a ReadRows stream to its end and merges its chunks
// into rows, checking every rule of the CellChunk contract a reader
// relies on: a row's first chunk names its key, family and qualifier; a
// cut value's chunks but the last set value_size to its length and carry
// no key, no timestamp and no labels (labels go on the first); commit_row
// only on a cell's last chunk; rows in order (descending if reversed).
func mergeChunks(t *testing.T, st btpb.Bigtable_ReadRowsClient, reversed bool) ([]apiRow, readStats) {
	t.Helper()
	var (
		rows   []apiRow
		cur    *apiRow
		cell   *apiCell
		want   int32 // value_size of the cell in progress; 0: none
		fam    string
		qual   string
		stats  readStats
		inRow  bool
		splits = map[string]bool{}
	)
	for {
		r, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ReadRows: %v", err)
		}
		if len(r.Chunks) == 0 {
			continue
		}
		stats.responses++
		if inRow {
			splits[cur.key] = true
		}
		data := 0
		for _, ch := range r.Chunks {
			data += len(ch.Value)
			if cell != nil && want > 0 { // continuing a cut value
				if ch.RowKey != nil || ch.FamilyName != nil || ch.Qualifier != nil || ch.TimestampMicros != 0 || ch.Labels != nil {
					t.Fatalf("row %q: a value's continuation chunk names a key, a timestamp or labels: %v", cur.key, ch)
				}
				cell.value = append(cell.value, ch.Value...)
			} else {
				if !inRow {
					if ch.RowKey == nil || ch.FamilyName == nil || ch.Qualifier == nil {
						t.Fatalf("a row's first chunk lacks its key, family or qualifier: %v", ch)
					}
					if n := len(rows); n > 0 && (string(ch.RowKey) <= rows[n-1].key) != reversed {
						t.Fatalf("row %q after %q (reversed %v)", ch.RowKey, rows[n-1].key, reversed)
					}
					cur, inRow = &apiRow{key: string(ch.RowKey)}, true
				} else if ch.RowKey != nil && string(ch.RowKey) != cur.key {
					t.Fatalf("row key %q inside row %q", ch.RowKey, cur.key)
				}
				if ch.FamilyName != nil {
					fam = ch.FamilyName.Value
				}
				if ch.Qualifier == nil {
					t.Fatalf("row %q: a cell's first chunk has no qualifier", cur.key)
				}
				qual = string(ch.Qualifier.Value)
				cur.cells = append(cur.cells, apiCell{family: fam, qualifier: qual, ts: ch.TimestampMicros,
					value: append([]byte(nil), ch.Value...), labels: ch.Labels})
				cell = &cur.cells[len(cur.cells)-1]
			}
			if ch.ValueSize > 0 {
				if want != 0 && ch.ValueSize != want {
					t.Fatalf("row %q: value_size %d, then %d", cur.key, want, ch.ValueSize)
				}
				if ch.GetCommitRow() {
					t.Fatalf("row %q: commit_row on a chunk of an unfinished value", cur.key)
				}
				if want == 0 {
					stats.cutValues++
				}
				want = ch.ValueSize
				continue
			}
			if want != 0 && int(want) != len(cell.value) {
				t.Fatalf("row %q: value of %d bytes, value_size said %d", cur.key, len(cell.value), want)
			}
			want, cell = 0, nil
			if ch.GetCommitRow() {
				rows = append(rows, *cur)
				cur, inRow = nil, false
			}
		}
		stats.maxCellData = max(stats.maxCellData, data)
	}
	if inRow || want != 0 {
		t.Fatalf("the stream ended inside row %q", cur.key)
	}
	stats.splitRows = len(splits)
	return rows, stats
}

// TestReadRowsCutsLargeRows: a row over DefaultWholeRowBytes goes out across
// responses of about 1 MiB of cell data, its values cut across chunks
// with value_size set, labels on a cell's first chunk only, and
// commit_row on its last chunk; smaller rows still go whole, in order
// and reversed.
func TestReadRowsCutsLargeRows(t *testing.T) {
	t.Parallel()
	a := startAPI(t, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}, {Name: "g"}}})
	ctx := ctxT(t)
	tbl := a.bt.Open("t")
	rnd := rand.New(rand.NewChaCha8([32]byte{1}))
	val := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	want := map[string][]apiCell{}
	put := func(row string, cells ...apiCell) {
		m := bigtable.NewMutation()
		for _, c := range cells {
			m.Set(c.family, c.qualifier, bigtable.Timestamp(c.ts), c.value)
		}
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatalf("Apply %s: %v", row, err)
		}
		want[row] = cells
	}
	put("a", apiCell{family: "f", qualifier: "q", ts: 1000, value: []byte("small")})
	// 3 MiB: whole, in one response (the official Go client reads it).
	put("b", apiCell{family: "f", qualifier: "q1", ts: 1000, value: val(1 << 20)}, apiCell{family: "f", qualifier: "q2", ts: 1000, value: val(2 << 20)})
	// About 7.5 MiB: cut. Small cells before, between and after its
	// large values, in two families.
	var big []apiCell
	for i, n := range []int{100, 2<<20 + 12345, 7, 3 << 20, 0, 2<<20 + 1, 300 << 10} {
		f := "f"
		if i >= 4 {
			f = "g"
		}
		big = append(big, apiCell{family: f, qualifier: fmt.Sprint("c", i), ts: 2000, value: val(n)})
	}
	put("c", big...)
	put("d", apiCell{family: "g", qualifier: "q", ts: 1000, value: []byte("after")})

	raw := btpb.NewBigtableClient(a.conn)
	label := &btpb.RowFilter{Filter: &btpb.RowFilter_ApplyLabelTransformer{ApplyLabelTransformer: "lbl"}}
	for _, reversed := range []bool{false, true} {
		st, err := raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/t", Filter: label, Reversed: reversed})
		if err != nil {
			t.Fatal(err)
		}
		rows, stats := mergeChunks(t, st, reversed)
		keys := make([]string, len(rows))
		for i, r := range rows {
			keys[i] = r.key
			w := want[r.key]
			if len(r.cells) != len(w) {
				t.Fatalf("row %s: %d cells, want %d", r.key, len(r.cells), len(w))
			}
			for j, c := range r.cells {
				if c.family != w[j].family || c.qualifier != w[j].qualifier || c.ts != w[j].ts || !bytes.Equal(c.value, w[j].value) ||
					len(c.labels) != 1 || c.labels[0] != "lbl" {
					t.Fatalf("row %s cell %d: %s:%s@%d, %d bytes, labels %v; want %s:%s@%d, %d bytes, [lbl]",
						r.key, j, c.family, c.qualifier, c.ts, len(c.value), c.labels, w[j].family, w[j].qualifier, w[j].ts, len(w[j].value))
				}
			}
		}
		wantKeys := "[a b c d]"
		if reversed {
			wantKeys = "[d c b a]"
		}
		if fmt.Sprint(keys) != wantKeys {
			t.Fatalf("reversed %v: rows %v, want %v", reversed, keys, wantKeys)
		}
		// Row c alone is cut: three values over responses of about
		// 1 MiB of cell data; row b's 3 MiB goes whole, with what
		// comes before it while under DefaultWholeRowBytes.
		if stats.splitRows != 1 || stats.cutValues != 3 || stats.maxCellData < 3<<20 || stats.maxCellData > DefaultWholeRowBytes || stats.responses < 9 {
			t.Errorf("reversed %v: %+v; want row c alone split, its 3 large values cut, responses of about 1 MiB but row b's 3 MiB", reversed, stats)
		}
	}

	// The official client reads the rows that go whole, and row c
	// fails: its reader refuses a response that ends inside a row.
	for _, k := range []string{"a", "b", "d"} {
		r, err := tbl.ReadRow(ctx, k)
		if err != nil || len(r) == 0 {
			t.Errorf("official client ReadRow %s: %v, %v", k, r, err)
		}
	}
	if _, err := tbl.ReadRow(ctx, "c"); err == nil {
		t.Errorf("official client read row c (cut across responses): if its reader now merges rows across responses, update docs/bigtable-api.md and DefaultWholeRowBytes")
	}
}

// largeSizes are the sizes TestLargeRowsEmulatorHost writes: one cell of
// the largest value, and a row of cells of 1 MiB.
func largeSizes(t *testing.T) (cellBytes, rowCells int) {
	switch {
	case race.Enabled:
		// The race detector's shadow memory and its slower copies: a
		// smaller cell and row.
		return 12 << 20, 12
	case testing.Short():
		// Over the whole-row bound and gRPC's 4 MiB receive limit, so
		// the values are cut: what the full sizes test, at less cost.
		return 6 << 20, 6
	}
	return limits.MaxValueBytes, 50
}

// TestLargeRowsEmulatorHost writes a 100 MiB cell and a 50 MiB row (50
// cells of 1 MiB) through the official Go client dialed by
// BIGTABLE_EMULATOR_HOST with its default options (gRPC's 4 MiB receive
// limit, unlimited sends), and reads both back, from the memstore and
// after a checkpoint from TSFiles, over a connection with gRPC's default
// limits merging chunks by the CellChunk contract: every response holds
// about 1 MiB of cell data. The official Go client itself cannot read
// them (its reader wants whole rows in each response, so a row over
// gRPC's 4 MiB receive limit never reaches it); it reads a row of 3 MiB.
// A value one byte over 100 MiB and a row mutation over 256 MiB are
// InvalidArgument naming the row. -short and -race use smaller sizes.
func TestLargeRowsEmulatorHost(t *testing.T) {
	cellBytes, rowCells := largeSizes(t)
	// Collect garbage sooner: the peak is several copies of the largest
	// value in flight (client, frontend, tserver), not their garbage.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	c := inproc.Start(t, inproc.Options{})
	ctx := ctxT(t)
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "f"}}}); err != nil {
		t.Fatal(err)
	}
	srv := New(c.Client(), nil)
	addr := listenAPI(t, srv)
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	bt, err := bigtable.NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	tbl := bt.Open("t")

	// The values: pseudo-random bytes, so no codec shrinks them; only
	// their hashes are kept.
	rnd := rand.New(rand.NewChaCha8([32]byte{2}))
	fill := func(b []byte) []byte {
		for i := 0; i+8 <= len(b); i += 8 {
			v := rnd.Uint64()
			b[i], b[i+1], b[i+2], b[i+3], b[i+4], b[i+5], b[i+6], b[i+7] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		}
		return b
	}
	want := map[string][][32]byte{} // row → its cells' hashes, in qualifier order
	buf := fill(make([]byte, cellBytes))
	m := bigtable.NewMutation()
	m.Set("f", "q", 1000, buf)
	if err := tbl.Apply(ctx, "cell", m); err != nil {
		t.Fatalf("Apply a %d MiB cell: %v", cellBytes>>20, err)
	}
	want["cell"] = [][32]byte{sha256.Sum256(buf)}
	m = bigtable.NewMutation()
	for i := range rowCells {
		v := fill(buf[i<<20 : (i+1)<<20 : (i+1)<<20])
		m.Set("f", fmt.Sprintf("q%03d", i), 1000, v)
		want["row"] = append(want["row"], sha256.Sum256(v))
	}
	if err := tbl.Apply(ctx, "row", m); err != nil {
		t.Fatalf("Apply a row of %d cells of 1 MiB: %v", rowCells, err)
	}
	buf, m = nil, nil
	small := bytes.Repeat([]byte("s"), 3<<20)
	mm := bigtable.NewMutation()
	mm.Set("f", "q", 1000, small)
	if err := tbl.Apply(ctx, "small", mm); err != nil {
		t.Fatal(err)
	}

	// A connection with gRPC's defaults: 4 MiB received at most.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := btpb.NewBigtableClient(conn)
	read := func(when string) {
		t.Helper()
		for _, k := range []string{"cell", "row"} {
			st, err := raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/t",
				Rows: &btpb.RowSet{RowKeys: [][]byte{[]byte(k)}}})
			if err != nil {
				t.Fatal(err)
			}
			rows, stats := mergeChunks(t, st, false)
			if len(rows) != 1 || len(rows[0].cells) != len(want[k]) {
				t.Fatalf("%s: row %s: %d rows, want 1 of %d cells", when, k, len(rows), len(want[k]))
			}
			for i, c := range rows[0].cells {
				if sha256.Sum256(c.value) != want[k][i] {
					t.Fatalf("%s: row %s cell %d (%s, %d bytes): hash differs", when, k, i, c.qualifier, len(c.value))
				}
			}
			if stats.maxCellData > maxResponseBytes {
				t.Fatalf("%s: row %s: a response of %d bytes of cell data", when, k, stats.maxCellData)
			}
			t.Logf("%s: row %s read back in %d responses", when, k, stats.responses)
		}
		if r, err := tbl.ReadRow(ctx, "small"); err != nil || len(r["f"]) != 1 || !bytes.Equal(r["f"][0].Value, small) {
			t.Fatalf("%s: official client ReadRow of a 3 MiB row: %v", when, err)
		}
	}
	read("from the memstore")
	if _, err := c.Client().CheckpointAll(ctx); err != nil {
		t.Fatal(err)
	}
	read("from TSFiles")

	// One byte over the value limit: through the official client, or
	// under the race detector given to the server in process (its copies
	// of the message are slow and large there).
	over := make([]byte, limits.MaxValueBytes+1)
	if race.Enabled {
		_, err = (&dataServer{s: srv}).MutateRow(ctx, &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/t", RowKey: []byte("overvalue"),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{FamilyName: "f", ColumnQualifier: []byte("q"), TimestampMicros: 1000, Value: over}}}}})
	} else {
		m = bigtable.NewMutation()
		m.Set("f", "q", 1000, over)
		err = tbl.Apply(ctx, "overvalue", m)
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `row "overvalue"`) ||
		!strings.Contains(err.Error(), fmt.Sprint(limits.MaxValueBytes)) {
		t.Errorf("Apply of a value of 100 MiB and 1 byte: %v; want InvalidArgument naming the row and the limit", err)
	}
	t.Logf("a value over the limit: %v", err)
	// A row mutation over 256 MiB, given to the server in process (its
	// values share one buffer: the test sends no 256 MiB message).
	over = over[:limits.MaxValueBytes]
	var ms []*btpb.Mutation
	for i := range 3 {
		ms = append(ms, &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
			FamilyName: "f", ColumnQualifier: []byte{byte(i)}, TimestampMicros: 1000, Value: over}}})
	}
	_, err = (&dataServer{s: srv}).MutateRow(ctx, &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/t", RowKey: []byte("overrow"), Mutations: ms})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `row "overrow"`) ||
		!strings.Contains(err.Error(), fmt.Sprint(limits.MaxRowMutationBytes)) {
		t.Errorf("MutateRow of 300 MiB: %v; want InvalidArgument naming the row and the limit", err)
	}
	t.Logf("a row mutation over the limit: %v", err)
	if r, err := tbl.ReadRow(ctx, "overrow"); err != nil || r != nil {
		t.Errorf("the refused row reads %v, %v; want no row", r, err)
	}
}

// sentResponses is a ReadRows server stream that keeps what is sent.
type sentResponses struct {
	btpb.Bigtable_ReadRowsServer
	resps []*btpb.ReadRowsResponse
}

func (s *sentResponses) Send(r *btpb.ReadRowsResponse) error {
	s.resps = append(s.resps, r)
	return nil
}

// SendMsg takes the chunkWriter's encoded responses: decoded, they are
// kept as Send keeps the others.
func (s *sentResponses) SendMsg(m any) error {
	e, ok := m.(*wirecodec.Encoded)
	if !ok {
		return fmt.Errorf("SendMsg of %T", m)
	}
	r := &btpb.ReadRowsResponse{}
	if err := proto.Unmarshal(e.Data.Materialize(), r); err != nil {
		return err
	}
	e.Data.Free()
	return s.Send(r)
}

// TestCutValueFirstChunkNotEightBytes: wherever a response fills, a cut
// value's first chunk is never 8 bytes (nodeNumberBytes), which the
// official Node.js client would take for an integer; the chunks still
// hold the whole value.
func TestCutValueFirstChunkNotEightBytes(t *testing.T) {
	second := bytes.Repeat([]byte("0123456789"), 200<<10) // 2000 KiB, cut once or twice
	header := len("r") + len("f") + len("a") + 16         // the first chunk's key, family, qualifier and 16
	seen := map[int]bool{}
	for firstPiece := range 17 {
		// The first cell fills the response but for the second cell's
		// qualifier and 16 bytes and firstPiece bytes of its value.
		first := make([]byte, maxResponseBytes-header-(len("b")+16)-firstPiece)
		st := &sentResponses{}
		w := &chunkWriter{stream: st, whole: 1}
		w.row(client.Row{Key: "r", Cells: []client.Cell{
			{Family: "f", Qualifier: "a", Timestamp: 1000, Value: first},
			{Family: "f", Qualifier: "b", Timestamp: 1000, Value: second},
		}})
		if w.err == nil {
			w.err = w.flush()
		}
		if w.err != nil {
			t.Fatal(w.err)
		}
		var got []byte
		cutAt := -1
		for _, r := range st.resps {
			for _, ch := range r.Chunks {
				if ch.GetQualifier().GetValue() != nil && string(ch.Qualifier.Value) == "b" {
					cutAt = len(ch.Value)
					got = ch.Value
				} else if cutAt >= 0 && ch.Qualifier == nil {
					got = append(got[:len(got):len(got)], ch.Value...)
				}
			}
		}
		if cutAt == nodeNumberBytes {
			t.Errorf("first piece %d: the value's first chunk is %d bytes", firstPiece, cutAt)
		}
		if !bytes.Equal(got, second) {
			t.Errorf("first piece %d: the chunks hold %d bytes, want the value's %d", firstPiece, len(got), len(second))
		}
		seen[cutAt] = true
	}
	// Every length but 8 up to 16 was a first chunk: the bound moved the
	// cut by one byte at 8 only.
	for n := range 17 {
		if seen[n] != (n != nodeNumberBytes) {
			t.Errorf("first chunks of %d bytes: %v; want every length from 0 to 16 but %d", n, seen[n], nodeNumberBytes)
		}
	}
}

// TestCutAt: a value is cut at the start of a UTF-8 sequence, moving back
// 3 bytes at most (a binary value of continuation bytes is cut 3 bytes
// back), and its first chunk is never nodeNumberBytes long.
func TestCutAt(t *testing.T) {
	text := []byte(strings.Repeat("aé€😀", 8)) // sequences of 1, 2, 3 and 4 bytes
	for _, first := range []bool{true, false} {
		for n := range len(text) {
			got := cutAt(text, n, first)
			if got > n || got < n-3 || !utf8.RuneStart(text[got]) || !utf8.Valid(text[:got]) {
				t.Errorf("cutAt(text, %d, %v) = %d: want the start of the sequence holding byte %d", n, first, got, n)
			}
			if first && got == nodeNumberBytes {
				t.Errorf("cutAt(text, %d, first) = %d", n, got)
			}
		}
	}
	// "aé€" is 6 bytes, then 😀's 4: 9 and 8 are inside 😀, 6 its start.
	if got := cutAt(text, 9, false); got != 6 {
		t.Errorf("cutAt(text, 9, false) = %d, want 6", got)
	}
	bin := bytes.Repeat([]byte{0x80}, 32)
	if got := cutAt(bin, 20, false); got != 17 {
		t.Errorf("cutAt of continuation bytes at 20 = %d, want 17", got)
	}
	if got := cutAt(bin, 11, true); got != 4 {
		t.Errorf("cutAt of continuation bytes at 11, first = %d, want 4 (3 back to 8, one less, 3 back again)", got)
	}
	ascii := []byte(strings.Repeat("x", 32))
	if got, gotNotFirst := cutAt(ascii, 8, true), cutAt(ascii, 8, false); got != 7 || gotNotFirst != 8 {
		t.Errorf("cutAt(ascii, 8) = %d first, %d not first; want 7 and 8", got, gotNotFirst)
	}
}
