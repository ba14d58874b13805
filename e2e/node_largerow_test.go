package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"bighive/internal/limits"
	"bighive/testkit/cluster"
)

// nodeCell is one cell as testdata/node/largerows.js reports it: its
// column, the type the client gave its value as, its length in bytes and
// the SHA-256 of its bytes.
type nodeCell struct {
	Column string
	Type   string
	Length int
	SHA256 string
}

// TestBigtableNodeClientLargeRows writes a 100 MiB cell (the largest value
// Bighive accepts) and a 50 MiB row (50 cells of 1 MiB) through the
// cluster's frontend process with the official Go client, and reads them
// back with the official Node.js client and its default options, reached
// by BIGTABLE_EMULATOR_HOST: row(key).get() for each, createReadStream()
// over the table, and createReadStream({decode: false}). The frontend
// streams each row across responses of about 1 MiB with its values cut
// across chunks, which the Node client merges; the script hashes every
// value and the test compares each cell's type, length and hash with
// what it wrote. The large values are ASCII, so the client's default
// decoding to a UTF-8 string keeps their bytes. Two rows of 4 MiB have a
// value cut where the Node client would get it wrong: after 8 bytes, and
// inside a UTF-8 character; the frontend cuts elsewhere, and every read
// must give them back whole.
func TestBigtableNodeClientLargeRows(t *testing.T) {
	skipShort(t, "official Node.js client test of large rows")
	modules := installNodeClient(t)
	// The test process holds the 100 MiB value and the messages of its
	// write; collect their garbage soon.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	c := cluster.New(t, cluster.Options{TServers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm, bt := officialClients(t, ctx, c.BigtableAddr(), "node-project", "node-instance")
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "large",
		Families: map[string]bigtable.GCPolicy{"f": bigtable.MaxVersionsPolicy(1)}}); err != nil {
		t.Fatalf("CreateTableFromConf: %v", err)
	}
	if err := c.WaitServing(ctx, "large"); err != nil {
		t.Fatal(err)
	}
	tbl := bt.Open("large")

	// Pseudo-random printable ASCII: no codec shrinks it, and Node's
	// default decoding (a UTF-8 string) keeps every byte.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	rnd := rand.New(rand.NewChaCha8([32]byte{3}))
	fill := func(b []byte) []byte {
		for i := range b {
			b[i] = alphabet[rnd.Uint32()%64]
		}
		return b
	}
	want := map[string][]nodeCell{} // row → its cells, in qualifier order
	cell := func(qual string, v []byte) nodeCell {
		sum := sha256.Sum256(v)
		return nodeCell{Column: "f:" + qual, Type: "string", Length: len(v), SHA256: hex.EncodeToString(sum[:])}
	}
	start := time.Now()
	buf := fill(make([]byte, limits.MaxValueBytes))
	m := bigtable.NewMutation()
	m.Set("f", "q", 1000, buf)
	if err := tbl.Apply(ctx, "cell", m); err != nil {
		t.Fatalf("Apply a 100 MiB cell: %v", err)
	}
	want["cell"] = []nodeCell{cell("q", buf)}
	m = bigtable.NewMutation()
	for i := range 50 {
		v := fill(buf[i<<20 : (i+1)<<20 : (i+1)<<20])
		q := fmt.Sprintf("q%03d", i)
		m.Set("f", q, 1000, v)
		want["row"] = append(want["row"], cell(q, v))
	}
	if err := tbl.Apply(ctx, "row", m); err != nil {
		t.Fatalf("Apply a row of 50 cells of 1 MiB: %v", err)
	}
	buf, m = nil, nil
	// Two rows of 4 MiB whose second value, b, is cut where the Node
	// client went wrong before the frontend avoided it (cutAt in
	// frontend/data.go, whose unit tests hold the rule at every offset).
	// A large row starts a response, where its first chunk counts its key,
	// family and qualifier and 16 bytes, the second its qualifier and 16:
	// after a of 1048528 bytes, 8 bytes of b fit in row "eight" (key of 5
	// bytes) and 9 in row "utf8" (4).
	put := func(row string, b []byte) {
		t.Helper()
		a := fill(make([]byte, 1048528))
		m := bigtable.NewMutation()
		m.Set("f", "a", 1000, a)
		m.Set("f", "b", 1000, b)
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Fatalf("Apply row %s: %v", row, err)
		}
		want[row] = []nodeCell{cell("a", a), cell("b", b)}
	}
	// A first chunk of 8 bytes is read as a 64-bit integer (42 here), and
	// the rest appended to its digits.
	put("eight", append([]byte{0, 0, 0, 0, 0, 0, 0, 42}, fill(make([]byte, 3<<20))...))
	// UTF-8 text: each chunk is decoded on its own, so a character cut
	// across two chunks comes back as two replacement characters.
	put("utf8", bytes.Repeat([]byte("é"), 3<<19))
	t.Logf("wrote a 100 MiB cell, a 50 MiB row and two of 4 MiB with the official Go client in %v", time.Since(start).Round(time.Millisecond))

	stdout, stderr := runNode(t, modules, c.BigtableAddr(), 4*time.Minute, "largerows.js", "large", "cell", "row", "eight", "utf8")
	var got struct {
		Get, Stream, StreamBuffers map[string][]nodeCell
		Millis                     struct{ Get, Stream, StreamBuffers int }
		RSSMiB                     int
	}
	decodeNode(t, stdout, stderr, &got)
	t.Logf("node: row(key).get() of each row %d ms, createReadStream() %d ms, createReadStream({decode: false}) %d ms; resident %d MiB",
		got.Millis.Get, got.Millis.Stream, got.Millis.StreamBuffers, got.RSSMiB)

	check := func(how string, got map[string][]nodeCell, typ string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d rows, want %d", how, len(got), len(want))
		}
		for k, cells := range want {
			if len(got[k]) != len(cells) {
				t.Errorf("%s: row %q reads %d cells, want %d", how, k, len(got[k]), len(cells))
				continue
			}
			for i, w := range cells {
				w.Type = typ
				if got[k][i] != w {
					t.Errorf("%s: row %q cell %d reads %+v, want %+v", how, k, i, got[k][i], w)
					break
				}
			}
		}
	}
	check("row(key).get()", got.Get, "string")
	check("createReadStream()", got.Stream, "string")
	check("createReadStream({decode: false})", got.StreamBuffers, "Buffer")
	if t.Failed() {
		t.Logf("node stderr:\n%s", stderr.String())
	}
}
