package tserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "bighive/proto/bighivepb"
	"bighive/storage/memstore"
	"bighive/storage/mutation"
	"bighive/storage/tablet/backupfile"
	"bighive/testkit/wait"
)

// TestImportExportTSFile: entries imported as a TSFile into a tserver's
// store survive an orphan pass before any backup names them and export
// back equal, chunk by chunk; an import of no entries writes
// no file; entries out of order, a chunk that does not decode and a
// stream without a message are refused (InvalidArgument), and an export
// of a file that does not exist is NotFound.
func TestImportExportTSFile(t *testing.T) {
	t.Parallel()
	n := startNode(t, 1, 3*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(n.opts[0].Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ts := pb.NewTServerClient(conn)

	var es []memstore.Entry
	for i := range 5000 {
		es = append(es, memstore.Entry{Row: []byte(fmt.Sprintf("r%06d", i)), Family: "cf", Qualifier: []byte("q"), Timestamp: int64(i),
			Seq: uint64(i + 1), Kind: mutation.SetCell, Value: make([]byte, 300)})
	}
	chunks := func(es []memstore.Entry) [][]byte {
		var out [][]byte
		var c backupfile.Chunk
		for i := range es {
			c.Add(&es[i])
			if c.Len() >= 256<<10 {
				out = append(out, c.Bytes())
			}
		}
		if c.Count() > 0 {
			out = append(out, c.Bytes())
		}
		return out
	}
	importChunks := func(cs [][]byte, first bool) (*pb.ImportTSFileResponse, error) {
		st, err := ts.ImportTSFile(ctx)
		if err != nil {
			return nil, err
		}
		if first {
			if err := st.Send(&pb.ImportTSFileRequest{Schema: &pb.TableSchema{Name: "t", Families: []*pb.FamilySpec{{Name: "cf", Compression: pb.Compression_COMPRESSION_ZSTD}}}}); err != nil {
				return nil, err
			}
		}
		for _, c := range cs {
			if err := st.Send(&pb.ImportTSFileRequest{Chunk: c}); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
		}
		return st.CloseAndRecv()
	}

	resp, err := importChunks(chunks(es), true)
	if err != nil {
		t.Fatal(err)
	}
	f := resp.File
	if f == nil || f.BlockStoreUuid != n.servers[0].UUID() || f.CellCount != int64(len(es)) || string(f.FirstRow) != "r000000" || len(f.Blocks) == 0 {
		t.Fatalf("imported file %v", f)
	}
	// No metadata names the file yet (no backup was told of it): an
	// orphan pass, even with no grace, keeps it while the import holds it.
	wait.ForCtx(t, ctx, "an orphan pass", func() error { _, err := n.servers[0].CollectOrphans(ctx, 0); return err })
	ex, err := ts.ExportTSFile(ctx, &pb.ExportTSFileRequest{File: f})
	if err != nil {
		t.Fatal(err)
	}
	var got []memstore.Entry
	for {
		m, err := ex.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := backupfile.DecodeChunk(m.Chunk, func(e *memstore.Entry) error { got = append(got, e.Clone()); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(es) {
		t.Fatalf("exported %d entries, imported %d", len(got), len(es))
	}
	for i := range es {
		if memstore.Compare(&got[i], &es[i]) != 0 || len(got[i].Value) != len(es[i].Value) {
			t.Fatalf("entry %d exported as %s, imported %s", i, &got[i], &es[i])
		}
	}

	if resp, err := importChunks(nil, true); err != nil || resp.File != nil {
		t.Fatalf("import of no entries: %v %v, want no file", resp, err)
	}
	swapped := append([]memstore.Entry(nil), es[:10]...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	for _, tc := range []struct {
		name   string
		chunks [][]byte
		first  bool
		want   codes.Code
	}{
		{"entries out of order", chunks(swapped), true, codes.InvalidArgument},
		{"a chunk that does not decode", [][]byte{{5, 1, 2}}, true, codes.InvalidArgument},
		{"no message", nil, false, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := importChunks(tc.chunks, tc.first); status.Code(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	missing := &pb.TSFileRef{BlockStoreUuid: n.servers[0].UUID(), FooterBlock: 12345}
	ex, err = ts.ExportTSFile(ctx, &pb.ExportTSFileRequest{File: missing})
	if err == nil {
		_, err = ex.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("export of a missing file: %v, want NotFound", err)
	}
}
