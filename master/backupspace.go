package master

import (
	"bighive/meta"
	pb "bighive/proto/bighivepb"
)

// fileKey names a TSFile: the block store holding it and its footer block.
type fileKey struct {
	store  string
	footer uint64
}

// liveFiles is the set of files some tablet (of any table, restored ones
// and tables being deleted included) names.
func liveFiles(r *meta.Reader) (map[fileKey]bool, error) {
	live := map[fileKey]bool{}
	err := r.ForEachTablet(func(t *pb.TabletMeta) error {
		for _, f := range t.Tsfiles {
			live[fileKey{f.BlockStoreUuid, f.FooterBlock}] = true
		}
		return nil
	})
	return live, err
}

// setBackupSpace sets each backup's ExclusiveBytes (the sizes of the
// distinct files it names that no tablet in live and no other backup of
// all names: deleting it frees them) and SharedBytes (the rest of its
// files). The sizes are those the metadata holds for the files. all is
// every backup; the ones set are all of them, or only those in of when it
// is not nil (of must hold backups of all, with their files).
func setBackupSpace(all []*pb.BackupMeta, live map[fileKey]bool, of []*pb.BackupMeta) {
	files := func(b *pb.BackupMeta) map[fileKey]int64 {
		out := map[fileKey]int64{}
		for _, t := range b.Tablets {
			for _, f := range t.Tsfiles {
				out[fileKey{f.BlockStoreUuid, f.FooterBlock}] = f.SizeBytes
			}
		}
		return out
	}
	namedBy := map[fileKey]int{} // how many backups name each file
	for _, b := range all {
		for k := range files(b) {
			namedBy[k]++
		}
	}
	if of == nil {
		of = all
	}
	for _, b := range of {
		b.ExclusiveBytes, b.SharedBytes = 0, 0
		for k, size := range files(b) {
			if live[k] || namedBy[k] > 1 {
				b.SharedBytes += size
			} else {
				b.ExclusiveBytes += size
			}
		}
	}
}

// backupSpace sets the space of the backups bs (read from r, with their
// files) as setBackupSpace does, against every tablet and backup r holds.
func backupSpace(r *meta.Reader, bs ...*pb.BackupMeta) error {
	live, err := liveFiles(r)
	if err != nil {
		return err
	}
	all, err := r.Backups()
	if err != nil {
		return err
	}
	setBackupSpace(all, live, bs)
	return nil
}
