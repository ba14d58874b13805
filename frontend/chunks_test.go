package frontend

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/proto"

	"bighive/client"
)

// TestAppendRowChunksMatchesProto: the chunks appendRowChunks encodes
// are, byte for byte, what proto.Marshal writes for the same rows built
// as CellChunk messages (chunksOf), and within encBound, over random
// rows: families that
// change or repeat (an empty one included), empty and long qualifiers,
// timestamps 0, small, large and negative, labels, empty and large
// values.
func TestAppendRowChunksMatchesProto(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	pick := func(xs ...string) string { return xs[rnd.IntN(len(xs))] }
	for i := range 500 {
		var rows []client.Row
		for range 1 + rnd.IntN(4) {
			r := client.Row{Key: fmt.Sprintf("row-%d-%s", rnd.IntN(1000), pick("", "x", string(bytes.Repeat([]byte{0xff}, 200))))}
			for range 1 + rnd.IntN(6) {
				c := client.Cell{
					Family:    pick("cf", "cf", "f2", ""),
					Qualifier: pick("", "q", "\x00", string(bytes.Repeat([]byte("k"), 300))),
					Timestamp: []int64{0, 1000, 1 << 50, -1}[rnd.IntN(4)],
					Value:     bytes.Repeat([]byte{byte(rnd.IntN(256))}, []int{0, 1, 127, 128, 1000, 70000}[rnd.IntN(6)]),
				}
				if rnd.IntN(4) == 0 {
					c.Labels = []string{"l1", pick("", "label")}
				}
				r.Cells = append(r.Cells, c)
			}
			rows = append(rows, r)
		}
		want := &btpb.ReadRowsResponse{}
		var got []byte
		for _, r := range rows {
			want.Chunks = append(want.Chunks, chunksOf(r)...)
			before := len(got)
			got = appendRowChunks(got, r)
			if n := len(got) - before; n > encBound(r) {
				t.Fatalf("case %d: row %q encodes to %d bytes, over its bound %d", i, r.Key, n, encBound(r))
			}
		}
		wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantBytes) {
			back := &btpb.ReadRowsResponse{}
			uerr := proto.Unmarshal(got, back)
			t.Fatalf("case %d: %d bytes, proto.Marshal %d; decoded (%v) equal: %v\nrows %+v",
				i, len(got), len(wantBytes), uerr, uerr == nil && proto.Equal(back, want), rows)
		}
	}
}
