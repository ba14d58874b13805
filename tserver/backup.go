package tserver

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/storage/blockstore"
	"bighive/storage/tablet/backupfile"
	"bighive/storage/tablet/tsfile"
)

// Backup export and import (docs/backup-format.md). A backup's files may
// be in any tserver's store; this tserver reads them as it reads a moved
// tablet's, opening other stores read-only, and streams their entries as
// the export format's records. An import goes the other way into this
// tserver's own store: the new file is named by nothing until the caller
// adds it to its backup (Master.ImportBackup), which it does at once. Till
// then the orphan pass keeps it because this tserver holds its blocks as
// referenced for importHold after the write (importHolds), whatever the
// pass's grace; a file whose import was abandoned goes after that.

// importHold is how long an imported file's blocks count as referenced
// here: far longer than the one master call that makes its backup name
// it.
const importHold = time.Hour

// importHolds are the blocks of this tserver's store that ImportTSFile
// wrote lately, each with when its hold ends.
type importHolds struct {
	mu    sync.Mutex
	until map[blockstore.BlockID]time.Time
}

// hold keeps ids referenced until now+importHold.
func (h *importHolds) hold(ids []blockstore.BlockID, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil {
		h.until = map[blockstore.BlockID]time.Time{}
	}
	for _, id := range ids {
		h.until[id] = now.Add(importHold)
	}
}

// addTo adds the held blocks to refs (as blocks of store) and forgets
// those whose hold ended.
func (h *importHolds) addTo(refs map[blockstore.BlockRef]struct{}, store string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, until := range h.until {
		if now.After(until) {
			delete(h.until, id)
			continue
		}
		refs[blockstore.BlockRef{Store: store, ID: id}] = struct{}{}
	}
}

// ExportTSFile streams the entries of one TSFile as chunks of about
// backupfile.ChunkTarget bytes.
func (s *Server) ExportTSFile(req *pb.ExportTSFileRequest, stream grpc.ServerStreamingServer[pb.ExportTSFileResponse]) error {
	if req.File == nil || req.File.FooterBlock == 0 {
		return apierr.InvalidArgument("export: name a TSFile (its store and footer block)")
	}
	footer := footerOf(req.File, s.uuid)
	store, release, err := s.openStoreFor(footer)
	if err != nil {
		code := codes.Unavailable // another tserver may read it
		if errors.Is(err, blockstore.ErrNotFound) {
			code = codes.NotFound
		}
		return apierr.Wrap(code, err, "export of TSFile %s", footer)
	}
	defer release()
	r, err := tsfile.Open(store, footer, tsfile.ReaderOptions{})
	if err != nil {
		return apierr.Wrap(codes.DataLoss, err, "export: open TSFile %s", footer)
	}
	defer r.Close()
	it := r.NewIterator(nil, true)
	defer it.Close()
	var c backupfile.Chunk
	send := func() error {
		if err := stream.Send(&pb.ExportTSFileResponse{Chunk: c.Bytes()}); err != nil {
			return fmt.Errorf("tserver: export of TSFile %s: send: %w", footer, err)
		}
		return nil
	}
	for it.First(); it.Valid(); it.Next() {
		c.Add(it.Entry())
		if c.Len() >= backupfile.ChunkTarget {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := it.Err(); err != nil {
		return apierr.Wrap(codes.DataLoss, err, "export: read TSFile %s", footer)
	}
	if c.Count() > 0 {
		return send()
	}
	return nil
}

// ImportTSFile writes the entries of the streamed chunks as one new TSFile
// in this tserver's store, with the page compression of the first
// message's schema, and names it. Entries out of order or chunks that do
// not decode fail the call (InvalidArgument) and leave no file.
func (s *Server) ImportTSFile(stream grpc.ClientStreamingServer[pb.ImportTSFileRequest, pb.ImportTSFileResponse]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return apierr.InvalidArgument("import: the stream ended before its first message")
		}
		return err
	}
	schema := schemaOf(first.Schema)
	pending := first.Chunk
	it := backupfile.NewEntryIterator(func() ([]byte, error) {
		if pending != nil {
			c := pending
			pending = nil
			return c, nil
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			if len(m.Chunk) > 0 {
				return m.Chunk, nil
			}
		}
	})
	info, err := tsfile.Write(ctx, s.blocks, it, tsfile.WriterOptions{Store: s.uuid, TabletID: "import",
		Compression: func(family string) tsfile.Compression { return schema.Families[family].Compression }})
	switch {
	case errors.Is(err, tsfile.ErrEmpty):
		return stream.SendAndClose(&pb.ImportTSFileResponse{})
	case errors.Is(err, backupfile.ErrCorrupt):
		return apierr.Wrap(codes.InvalidArgument, err, "import into tserver %s", s.addr)
	case err != nil:
		return apierr.Wrap(codes.Unavailable, err, "import into tserver %s", s.addr)
	}
	s.imports.hold(info.Blocks, time.Now())
	s.log.Info("imported a TSFile", "footer", info.FooterRef(), "entries", info.Entries, "bytes", info.Size)
	return stream.SendAndClose(&pb.ImportTSFileResponse{File: s.tsfileRefs([]tsfile.Info{info})[0]})
}
