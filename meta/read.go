package meta

import (
	"bytes"
	"cmp"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// Reader reads the state inside one transaction. Returned messages are
// fresh copies the caller may keep and modify.
type Reader struct {
	tx   *bolt.Tx
	file string
}

func (r *Reader) decode(bucket []byte, key, val []byte, m proto.Message) error {
	if err := proto.Unmarshal(val, m); err != nil {
		return &CorruptionError{File: r.file, Bucket: string(bucket), Key: string(key), Err: err}
	}
	return nil
}

// AppliedIndex is the raft index of the last applied command.
func (r *Reader) AppliedIndex() uint64 {
	v, _ := getU64(r.tx.Bucket(bucketMeta).Get(keyApplied))
	return v
}

// NextTabletID is the number the next allocated tablet id will carry.
func (r *Reader) NextTabletID() uint64 {
	v, ok := getU64(r.tx.Bucket(bucketMeta).Get(keyNextTabletID))
	if !ok {
		return 1
	}
	return v
}

// Table returns a table's schema, or a NotFound error.
func (r *Reader) Table(name string) (*pb.TableSchema, error) {
	v := r.tx.Bucket(bucketTables).Get([]byte(name))
	if v == nil {
		return nil, apierr.NotFound("table %q does not exist", name)
	}
	s := &pb.TableSchema{}
	if err := r.decode(bucketTables, []byte(name), v, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Tables returns every table's schema in name order.
func (r *Reader) Tables() ([]*pb.TableSchema, error) {
	var out []*pb.TableSchema
	err := r.tx.Bucket(bucketTables).ForEach(func(k, v []byte) error {
		s := &pb.TableSchema{}
		if err := r.decode(bucketTables, k, v, s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// TabletCount is the number of tablets of a table.
func (r *Reader) TabletCount(table string) int {
	n := 0
	p := rangePrefix(table)
	c := r.tx.Bucket(bucketRanges).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		n++
	}
	return n
}

// Tablet returns one tablet, or a NotFound error.
func (r *Reader) Tablet(id string) (*pb.TabletMeta, error) {
	v := r.tx.Bucket(bucketTablets).Get([]byte(id))
	if v == nil {
		return nil, apierr.NotFound("tablet %s does not exist", id)
	}
	t := &pb.TabletMeta{}
	if err := r.decode(bucketTablets, []byte(id), v, t); err != nil {
		return nil, err
	}
	return t, nil
}

// TableTablets returns a table's tablets in row order, starting with the
// one that holds startRow, at most limit of them (0: all).
func (r *Reader) TableTablets(table string, startRow []byte, limit int) ([]*pb.TabletMeta, error) {
	p := rangePrefix(table)
	c := r.tx.Bucket(bucketRanges).Cursor()
	k, v := c.Seek(rangeKey(table, startRow))
	if k == nil || !bytes.Equal(k, rangeKey(table, startRow)) {
		// The tablet holding startRow starts before it.
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		if k == nil || !bytes.HasPrefix(k, p) {
			k, v = c.Seek(p)
		}
	}
	var out []*pb.TabletMeta
	for ; k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if limit > 0 && len(out) >= limit {
			break
		}
		t, err := r.Tablet(string(v))
		if err != nil {
			return nil, r.indexErr(bucketRanges, k, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// indexErr turns a missing tablet behind an index entry into corruption.
func (r *Reader) indexErr(bucket, key []byte, err error) error {
	if apierr.CodeOf(err) == apierrNotFound {
		return &CorruptionError{File: r.file, Bucket: string(bucket), Key: string(key), Err: errors.New("index names a missing tablet")}
	}
	return err
}

// TabletIDsOf returns the ids of the tablets owned by a tserver, in id
// order; tserver "" gives the UNASSIGNED tablets.
func (r *Reader) TabletIDsOf(tserver string) []string {
	var out []string
	p := ownerPrefix(tserver)
	c := r.tx.Bucket(bucketOwners).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		out = append(out, string(k[len(p):]))
	}
	return out
}

// TabletsOf returns the tablets owned by a tserver ("" = UNASSIGNED).
func (r *Reader) TabletsOf(tserver string) ([]*pb.TabletMeta, error) {
	ids := r.TabletIDsOf(tserver)
	out := make([]*pb.TabletMeta, 0, len(ids))
	for _, id := range ids {
		t, err := r.Tablet(id)
		if err != nil {
			return nil, r.indexErr(bucketOwners, ownerKey(tserver, id), err)
		}
		out = append(out, t)
	}
	return out, nil
}

// ForEachTablet calls fn for every tablet in id order.
func (r *Reader) ForEachTablet(fn func(*pb.TabletMeta) error) error {
	return r.tx.Bucket(bucketTablets).ForEach(func(k, v []byte) error {
		t := &pb.TabletMeta{}
		if err := r.decode(bucketTablets, k, v, t); err != nil {
			return err
		}
		return fn(t)
	})
}

// TServer returns one registered tserver, or a NotFound error.
func (r *Reader) TServer(uuid string) (*spb.MetaTServer, error) {
	v := r.tx.Bucket(bucketTServers).Get([]byte(uuid))
	if v == nil {
		return nil, apierr.NotFound("tserver %s is not registered", uuid)
	}
	ts := &spb.MetaTServer{}
	if err := r.decode(bucketTServers, []byte(uuid), v, ts); err != nil {
		return nil, err
	}
	return ts, nil
}

// TServers returns every registered tserver in uuid order.
func (r *Reader) TServers() ([]*spb.MetaTServer, error) {
	var out []*spb.MetaTServer
	err := r.tx.Bucket(bucketTServers).ForEach(func(k, v []byte) error {
		ts := &spb.MetaTServer{}
		if err := r.decode(bucketTServers, k, v, ts); err != nil {
			return err
		}
		out = append(out, ts)
		return nil
	})
	return out, err
}

// GCReferences returns every block of the block store blockStore that some
// tablet or backup names, and every log position of the prefix walPrefix
// that some tablet names. An empty
// argument skips that half.
func (r *Reader) GCReferences(blockStore, walPrefix string) (blocks []uint64, positions []*pb.LogPosition, err error) {
	seenBlock := map[uint64]bool{}
	seenPos := map[int64]bool{}
	err = r.ForEachTablet(func(t *pb.TabletMeta) error {
		if blockStore != "" {
			for _, f := range t.Tsfiles {
				if f.BlockStoreUuid != blockStore {
					continue
				}
				for _, b := range append([]uint64{f.FooterBlock}, f.Blocks...) {
					if !seenBlock[b] {
						seenBlock[b] = true
						blocks = append(blocks, b)
					}
				}
			}
		}
		if walPrefix != "" {
			for _, p := range t.LogPositions {
				if p.Prefix == walPrefix && !seenPos[p.FileTimestamp] {
					seenPos[p.FileTimestamp] = true
					positions = append(positions, &pb.LogPosition{Prefix: p.Prefix, FileTimestamp: p.FileTimestamp})
				}
			}
		}
		return nil
	})
	if err == nil && blockStore != "" {
		err = r.backupBlocks(blockStore, func(b uint64) {
			if !seenBlock[b] {
				seenBlock[b] = true
				blocks = append(blocks, b)
			}
		})
	}
	slices.Sort(blocks)
	slices.SortFunc(positions, func(a, b *pb.LogPosition) int { return cmp.Compare(a.FileTimestamp, b.FileTimestamp) })
	return blocks, positions, err
}
