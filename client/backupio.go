package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
	"bighive/storage/tablet/backupfile"
	"bighive/storage/vfs"
)

// Export and import of backups (docs/backup-format.md). The bytes move
// through tservers: ExportTSFile reads a file from whichever store holds
// it and streams its entries here, where they are written to the
// directory; ImportTSFile takes them back into a tserver's own store. So
// the caller needs only the masters' addresses, not the cluster's shared
// root, and the directory may be anywhere this process can write.

// ExportResult sums up an export or an import.
type ExportResult struct {
	Backup  string
	Tablets int
	Files   int
	Entries int64
	// Bytes is the size of the data files.
	Bytes int64
}

// ExportBackup writes backup name to dir (created if missing; it must not
// hold a manifest already): one data file per TSFile, then the manifest,
// written last, so a directory with a manifest is a whole export.
func (c *Client) ExportBackup(ctx context.Context, name, dir string) (ExportResult, error) {
	prefix := errorPrefix("export backup %q to %s", name, dir)
	var b *pb.BackupMeta
	err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.GetBackup(ctx, &pb.GetBackupRequest{Name: name})
		b = resp.GetBackup()
		return err
	})
	if err != nil {
		return ExportResult{}, err
	}
	if b.State != pb.BackupState_BACKUP_STATE_READY {
		return ExportResult{}, statusError(apierr.FailedPrecondition("backup %q is still being imported", name), prefix)
	}
	res, err := c.exportBackup(ctx, b, dir)
	if err != nil {
		return ExportResult{}, statusError(err, prefix)
	}
	return res, nil
}

func (c *Client) exportBackup(ctx context.Context, b *pb.BackupMeta, dir string) (ExportResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ExportResult{}, apierr.Wrap(codes.FailedPrecondition, err, "create the directory")
	}
	manifestPath := filepath.Join(dir, backupfile.ManifestName)
	if _, err := os.Stat(manifestPath); err == nil {
		return ExportResult{}, apierr.AlreadyExists("%s exists: the directory holds an export already", manifestPath)
	}
	servers, err := c.liveTServers(ctx)
	if err != nil {
		return ExportResult{}, err
	}
	m := &spb.BackupManifest{Name: b.Name, SourceTable: b.SourceTable, Schema: b.Schema,
		CreateTimeMicros: b.CreateTimeMicros, ExpireTimeMicros: b.ExpireTimeMicros}
	res := ExportResult{Backup: b.Name, Tablets: len(b.Tablets)}
	// Any live tserver reads any store.
	rr := &roundRobin{servers: servers}
	for ti, bt := range b.Tablets {
		mt := &spb.BackupManifestTablet{StartRow: bt.Range.GetStartRow(), EndRow: bt.Range.GetEndRow()}
		for fi, f := range bt.Tsfiles {
			rel := backupfile.DataPath(ti, fi)
			var mf *spb.BackupManifestFile
			err := rr.do(ctx, func(addr string) (err error) {
				mf, err = c.exportFile(ctx, addr, f, dir, rel)
				return err
			})
			if err != nil {
				return ExportResult{}, err
			}
			mt.Files = append(mt.Files, mf)
			res.Files++
			res.Entries += mf.Entries
			res.Bytes += mf.Size
		}
		if len(bt.Tsfiles) > 0 {
			if err := syncDir(filepath.Dir(filepath.Join(dir, filepath.FromSlash(backupfile.DataPath(ti, 0))))); err != nil {
				return ExportResult{}, err
			}
		}
		m.Tablets = append(m.Tablets, mt)
	}
	if err := writeFileAtomic(manifestPath, func(w io.Writer) error { return backupfile.WriteManifest(w, m) }); err != nil {
		return ExportResult{}, err
	}
	return res, syncDir(dir)
}

// roundRobin spreads an export's or an import's files over the live
// tservers, and tries a file that failed Unavailable on the next ones.
type roundRobin struct {
	servers []string
	next    int
}

// do runs fn with one tserver's address after another until it succeeds,
// fails otherwise than Unavailable, or every tserver was tried.
func (r *roundRobin) do(ctx context.Context, fn func(addr string) error) error {
	var err error
	for range r.servers {
		addr := r.servers[r.next%len(r.servers)]
		r.next++
		if err = fn(addr); err == nil || apierr.CodeOf(err) != codes.Unavailable || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// liveTServers lists the live tservers' addresses.
func (c *Client) liveTServers(ctx context.Context) ([]string, error) {
	all, err := c.TServers(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range all {
		if s.Live {
			out = append(out, s.Address)
		}
	}
	if len(out) == 0 {
		return nil, apierr.Unavailable("no live tserver")
	}
	return out, nil
}

// exportFile streams one TSFile from the tserver at addr into dir/rel.
func (c *Client) exportFile(ctx context.Context, addr string, f *pb.TSFileRef, dir, rel string) (*spb.BackupManifestFile, error) {
	ts, err := c.tserver(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := ts.ExportTSFile(ctx, &pb.ExportTSFileRequest{File: f})
	if err != nil {
		return nil, fmt.Errorf("export of TSFile %s/%d from tserver %s: %w", f.BlockStoreUuid, f.FooterBlock, addr, err)
	}
	path := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, apierr.Wrap(codes.FailedPrecondition, err, "create the directory of %s", path)
	}
	mf := &spb.BackupManifestFile{Path: rel}
	err = writeFileAtomic(path, func(w io.Writer) error {
		dw, err := backupfile.NewDataWriter(w)
		if err != nil {
			return err
		}
		for {
			msg, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("export of TSFile %s/%d from tserver %s: %w", f.BlockStoreUuid, f.FooterBlock, addr, err)
			}
			if err := dw.WriteChunk(msg.Chunk); err != nil {
				return apierr.Wrap(codes.DataLoss, err, "export of TSFile %s/%d from tserver %s", f.BlockStoreUuid, f.FooterBlock, addr)
			}
		}
		mf.Size, mf.Crc32C, mf.Entries = dw.Size(), dw.CRC(), dw.Entries()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mf, nil
}

// writeFileAtomic writes path through a temporary file, synced and
// renamed into place.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return apierr.Wrap(codes.FailedPrecondition, err, "create %s", tmp)
	}
	err = write(f)
	if err == nil {
		if serr := f.Sync(); serr != nil {
			err = apierr.Wrap(codes.Unavailable, serr, "sync %s", tmp)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = apierr.Wrap(codes.Unavailable, cerr, "close %s", tmp)
	}
	if err == nil {
		if rerr := os.Rename(tmp, path); rerr != nil {
			err = apierr.Wrap(codes.Unavailable, rerr, "rename %s", tmp)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// syncDir makes dir's entries durable (vfs's fsync of a directory).
func syncDir(dir string) error {
	if err := vfs.Default.SyncDir(dir); err != nil {
		return apierr.Wrap(codes.Unavailable, err, "sync %s", dir)
	}
	return nil
}

// ImportBackup brings the export in dir into the cluster as backup name
// ("": the exported backup's name), kept until expires (zero: the exported
// backup's expiry time, which must still be ahead). The backup is recorded
// first, not restorable; each data file becomes a TSFile in a live
// tserver's store, named by the backup as soon as it is written; the
// backup is then made restorable. A failure deletes the partial backup
// (its files go with the next orphan passes). Every record's checksum is
// checked before it is sent, and each file against the manifest.
func (c *Client) ImportBackup(ctx context.Context, dir, name string, expires time.Time) (ExportResult, error) {
	prefix := errorPrefix("import backup from %s", dir)
	m, err := readManifest(dir)
	if err != nil {
		return ExportResult{}, statusError(err, prefix)
	}
	if name == "" {
		name = m.Name
	}
	prefix = errorPrefix("import backup %q from %s", name, dir)
	if err := limits.ValidateBackupName(name); err != nil {
		return ExportResult{}, statusError(err, prefix)
	}
	if expires.IsZero() {
		expires = time.UnixMicro(m.ExpireTimeMicros)
		if !expires.After(time.Now()) {
			return ExportResult{}, statusError(apierr.InvalidArgument("the exported backup expired at %s: give a new expiry time", expires.UTC().Format(time.RFC3339)), prefix)
		}
	}
	servers, err := c.liveTServers(ctx)
	if err != nil {
		return ExportResult{}, statusError(err, prefix)
	}
	begin := &pb.BackupMeta{Name: name, SourceTable: m.SourceTable, Schema: m.Schema, CreateTimeMicros: m.CreateTimeMicros, ExpireTimeMicros: expires.UnixMicro(),
		RequestId: requestID()} // a retried begin whose first attempt was recorded gets its backup
	for _, t := range m.Tablets {
		begin.Tablets = append(begin.Tablets, &pb.BackupTablet{Range: &pb.RowRange{StartRow: t.StartRow, EndRow: t.EndRow}})
	}
	if err := c.importStep(ctx, prefix, &pb.ImportBackupRequest{Begin: begin}); err != nil {
		return ExportResult{}, err
	}
	res, err := c.importFiles(ctx, prefix, dir, name, m, servers)
	if err == nil {
		err = c.importStep(ctx, prefix, &pb.ImportBackupRequest{Name: name, Ready: true})
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := c.DeleteBackup(dctx, name); derr != nil {
			return ExportResult{}, fmt.Errorf("%w (and the partial backup %q was not deleted: %v)", err, name, derr)
		}
		return ExportResult{}, err
	}
	return res, nil
}

func (c *Client) importStep(ctx context.Context, prefix string, req *pb.ImportBackupRequest) error {
	return c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.ImportBackup(ctx, req)
		return err
	})
}

func readManifest(dir string) (*spb.BackupManifest, error) {
	path := filepath.Join(dir, backupfile.ManifestName)
	f, err := os.Open(path)
	if err != nil {
		return nil, apierr.Wrap(codes.NotFound, err, "no export in %s (its manifest is written last)", dir)
	}
	defer f.Close()
	m, err := backupfile.ReadManifest(f, path)
	if err != nil {
		return nil, importFileError(err)
	}
	return m, nil
}

// importFileError gives an error of reading the export its code.
func importFileError(err error) error {
	switch {
	case errors.Is(err, backupfile.ErrVersion):
		return apierr.Wrap(codes.FailedPrecondition, err, "unreadable export")
	case errors.Is(err, backupfile.ErrCorrupt):
		return apierr.Wrap(codes.DataLoss, err, "corrupt export")
	}
	return err
}

func (c *Client) importFiles(ctx context.Context, prefix, dir, name string, m *spb.BackupManifest, servers []string) (ExportResult, error) {
	res := ExportResult{Backup: name, Tablets: len(m.Tablets)}
	rr := &roundRobin{servers: servers}
	for ti, t := range m.Tablets {
		for _, mf := range t.Files {
			var ref *pb.TSFileRef
			err := rr.do(ctx, func(addr string) (err error) {
				ref, err = c.importFile(ctx, addr, m.Schema, dir, mf)
				return err
			})
			if err != nil {
				return ExportResult{}, statusError(err, prefix)
			}
			res.Files++
			res.Entries += mf.Entries
			res.Bytes += mf.Size
			if ref == nil {
				continue
			}
			if err := c.importStep(ctx, prefix, &pb.ImportBackupRequest{Name: name,
				Tablets: []*pb.ImportBackupRequest_Tablet{{Index: int32(ti), Tsfiles: []*pb.TSFileRef{ref}}}}); err != nil {
				return ExportResult{}, err
			}
		}
	}
	return res, nil
}

// importFile streams one data file to the tserver at addr and returns the
// TSFile it wrote (nil for a file of no entries). A damaged file cancels
// the stream, so the tserver keeps nothing of it.
func (c *Client) importFile(ctx context.Context, addr string, schema *pb.TableSchema, dir string, mf *spb.BackupManifestFile) (*pb.TSFileRef, error) {
	path := filepath.Join(dir, filepath.FromSlash(mf.Path))
	f, err := os.Open(path)
	if err != nil {
		return nil, apierr.Wrap(codes.NotFound, err, "data file of the manifest")
	}
	defer f.Close()
	r, err := backupfile.NewDataReader(f, path)
	if err != nil {
		return nil, importFileError(err)
	}
	ts, err := c.tserver(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := ts.ImportTSFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("import of %s into tserver %s: %w", path, addr, err)
	}
	if err := stream.Send(&pb.ImportTSFileRequest{Schema: schema}); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("import of %s into tserver %s: %w", path, addr, err)
	}
	for {
		chunk, err := r.Next()
		if errors.Is(err, io.EOF) {
			if err := r.Check(mf); err != nil {
				return nil, importFileError(err)
			}
			break
		}
		if err != nil {
			return nil, importFileError(err)
		}
		if err := stream.Send(&pb.ImportTSFileRequest{Chunk: chunk}); err != nil {
			if errors.Is(err, io.EOF) {
				break // the tserver ended the call: CloseAndRecv says why
			}
			return nil, fmt.Errorf("import of %s into tserver %s: %w", path, addr, err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, fmt.Errorf("import of %s into tserver %s: %w", path, addr, err)
	}
	return resp.File, nil
}
