package localmeta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"bighive/proto/storagepb"
	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/tablet/tsfile"
	"bighive/storage/wal"
)

// Version is the schema version stored under meta/"version". It must
// change whenever the schema in doc.go does. Version 2 added the store of
// each TSFile.
const Version = 2

var (
	bucketMeta    = []byte("meta")
	bucketTablets = []byte("tablets")
	keyVersion    = []byte("version")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Named errors; check them with errors.Is.
var (
	ErrVersion = errors.New("localmeta: unsupported schema version")
	ErrExists  = errors.New("localmeta: tablet already exists")
	ErrCorrupt = errors.New("localmeta: corrupt record")
)

// CorruptionError is a record that fails its checksum or does not parse:
// it names the database file and the tablet key.
type CorruptionError struct {
	File   string
	Key    string
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("localmeta: corrupt record %q in %s: %s", e.Key, e.File, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// DB is the local tablet metadata. It implements checkpoint.Metadata and
// checkpoint.References. Safe for concurrent use.
type DB struct {
	db   *bolt.DB
	path string
}

var (
	_ checkpoint.Metadata   = (*DB)(nil)
	_ checkpoint.References = (*DB)(nil)
)

// Open opens (creating) the database at path.
func Open(path string) (*DB, error) {
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("localmeta: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketTablets); err != nil {
			return err
		}
		v := m.Get(keyVersion)
		if v == nil {
			return m.Put(keyVersion, binary.BigEndian.AppendUint64(nil, Version))
		}
		if len(v) != 8 || binary.BigEndian.Uint64(v) != Version {
			return fmt.Errorf("%w: %x (want %d) in %s", ErrVersion, v, Version, path)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("localmeta: init %s: %w", path, err)
	}
	return &DB{db: db, path: path}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Path is the database file.
func (d *DB) Path() string { return d.path }

func encode(m *checkpoint.TabletMeta) ([]byte, error) {
	rec := &storagepb.CheckpointTablet{
		TabletId:     m.TabletID,
		Epoch:        m.Epoch,
		DataDirGroup: m.DataDirGroup,
		UserData:     m.UserData,
	}
	for _, p := range m.LogPositions {
		rec.LogPositions = append(rec.LogPositions, &storagepb.CheckpointLogPosition{Prefix: p.Prefix, FileTs: p.FileTS})
	}
	for _, f := range m.TSFiles {
		tf := &storagepb.CheckpointTSFile{Store: f.Store, Footer: uint64(f.Footer), Size: f.Size, Entries: f.Entries, Rows: f.Rows,
			MinRow: f.MinRow, MaxRow: f.MaxRow, MinTimestamp: f.MinTimestamp, MaxTimestamp: f.MaxTimestamp}
		for _, b := range f.Blocks {
			tf.Blocks = append(tf.Blocks, uint64(b))
		}
		rec.Tsfiles = append(rec.Tsfiles, tf)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("localmeta: encode %s: %w", m.TabletID, err)
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(b)), crc32.Checksum(b, castagnoli))
	return append(out, b...), nil
}

func (d *DB) decode(key, v []byte) (checkpoint.TabletMeta, error) {
	var m checkpoint.TabletMeta
	if len(v) < 4 {
		return m, &CorruptionError{File: d.path, Key: string(key), Reason: fmt.Sprintf("%d bytes", len(v))}
	}
	body := v[4:]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(v); got != want {
		return m, &CorruptionError{File: d.path, Key: string(key), Reason: fmt.Sprintf("checksum %08x, want %08x", got, want)}
	}
	var rec storagepb.CheckpointTablet
	if err := proto.Unmarshal(body, &rec); err != nil {
		return m, &CorruptionError{File: d.path, Key: string(key), Reason: err.Error()}
	}
	if rec.TabletId != string(key) {
		return m, &CorruptionError{File: d.path, Key: string(key), Reason: fmt.Sprintf("record names tablet %q", rec.TabletId)}
	}
	m.TabletID, m.Epoch = rec.TabletId, rec.Epoch
	m.DataDirGroup = rec.DataDirGroup
	m.UserData = bytes.Clone(rec.UserData)
	for _, p := range rec.LogPositions {
		m.LogPositions = append(m.LogPositions, wal.Position{Prefix: p.Prefix, FileTS: p.FileTs})
	}
	for _, tf := range rec.Tsfiles {
		f := tsfile.Info{Store: tf.Store, Footer: blockstore.BlockID(tf.Footer), Size: tf.Size, Entries: tf.Entries, Rows: tf.Rows,
			MinRow: bytes.Clone(tf.MinRow), MaxRow: bytes.Clone(tf.MaxRow), MinTimestamp: tf.MinTimestamp, MaxTimestamp: tf.MaxTimestamp}
		for _, b := range tf.Blocks {
			f.Blocks = append(f.Blocks, blockstore.BlockID(b))
		}
		m.TSFiles = append(m.TSFiles, f)
	}
	return m, nil
}

// Create records a new tablet. It fails with ErrExists if the id is taken.
// Durable when it returns nil.
func (d *DB) Create(ctx context.Context, m checkpoint.TabletMeta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := encode(&m)
	if err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTablets)
		if b.Get([]byte(m.TabletID)) != nil {
			return fmt.Errorf("%w: %s", ErrExists, m.TabletID)
		}
		return b.Put([]byte(m.TabletID), v)
	})
}

// Put records m whatever was there (an assignment: the caller sets the
// new epoch). Durable when it returns nil.
func (d *DB) Put(ctx context.Context, m checkpoint.TabletMeta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := encode(&m)
	if err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTablets).Put([]byte(m.TabletID), v)
	})
}

// Delete removes a tablet's record (after a split replaced it, or the
// table was dropped). Deleting an unknown tablet is not an error.
func (d *DB) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketTablets).Delete([]byte(id)) })
}

// Get returns a tablet's record; ErrUnknownTablet if there is none.
func (d *DB) Get(id string) (checkpoint.TabletMeta, error) {
	var m checkpoint.TabletMeta
	err := d.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTablets).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%w: %s", checkpoint.ErrUnknownTablet, id)
		}
		var err error
		m, err = d.decode([]byte(id), v)
		return err
	})
	return m, err
}

// List returns every tablet's record, by id.
func (d *DB) List() ([]checkpoint.TabletMeta, error) {
	var out []checkpoint.TabletMeta
	err := d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTablets).ForEach(func(k, v []byte) error {
			m, err := d.decode(k, v)
			if err != nil {
				return err
			}
			out = append(out, m)
			return nil
		})
	})
	return out, err
}

// AddLogPosition appends pos to the tablet's log positions unless it is
// listed already: what a tserver does when it loads a tablet, before the
// tablet's first write (docs/design.md 'Log positions'). Epoch-fenced like
// Commit. Durable when it returns nil.
func (d *DB) AddLogPosition(ctx context.Context, id string, epoch int64, pos wal.Position) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTablets)
		m, err := d.load(b, id, epoch)
		if err != nil {
			return err
		}
		if slices.Contains(m.LogPositions, pos) {
			return nil
		}
		m.LogPositions = append(m.LogPositions, pos)
		v, err := encode(&m)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), v)
	})
}

func (d *DB) load(b *bolt.Bucket, id string, epoch int64) (checkpoint.TabletMeta, error) {
	v := b.Get([]byte(id))
	if v == nil {
		return checkpoint.TabletMeta{}, fmt.Errorf("%w: %s", checkpoint.ErrUnknownTablet, id)
	}
	m, err := d.decode([]byte(id), v)
	if err != nil {
		return m, err
	}
	if m.Epoch != epoch {
		return m, fmt.Errorf("%w: tablet %s is at epoch %d, update carries %d", checkpoint.ErrStaleEpoch, id, m.Epoch, epoch)
	}
	return m, nil
}

// Commit applies every update in one bbolt transaction: all or nothing.
// An update whose tablet is unknown or at another epoch, or whose file
// list drops a recorded file it does not replace (Update.Drops), makes the
// whole batch fail with a *checkpoint.RefusedError naming those tablets. Durable
// when it returns nil.
func (d *DB) Commit(ctx context.Context, updates []checkpoint.Update) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTablets)
		refused := map[string]error{}
		vals := make([][]byte, len(updates))
		for i, u := range updates {
			m, err := d.load(b, u.TabletID, u.Epoch)
			if errors.Is(err, checkpoint.ErrUnknownTablet) || errors.Is(err, checkpoint.ErrStaleEpoch) {
				refused[u.TabletID] = err
				continue
			}
			if err != nil {
				return err
			}
			recorded := make([]blockstore.BlockRef, len(m.TSFiles))
			for j, f := range m.TSFiles {
				recorded[j] = f.FooterRef()
			}
			if ref, drops := u.Drops(recorded); drops {
				refused[u.TabletID] = fmt.Errorf("tablet %s: file %v: %w", u.TabletID, ref, checkpoint.ErrFilesChanged)
				continue
			}
			switch {
			case u.LogClean:
				m.LogPositions = nil
			case u.LogPositions != nil:
				m.LogPositions = slices.Clone(u.LogPositions)
			}
			m.TSFiles = u.TSFiles
			if vals[i], err = encode(&m); err != nil {
				return err
			}
		}
		if len(refused) > 0 {
			return &checkpoint.RefusedError{Tablets: refused}
		}
		for i, u := range updates {
			if err := b.Put([]byte(u.TabletID), vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// LogPositions returns every position of prefix any tablet lists.
func (d *DB) LogPositions(ctx context.Context, prefix string) ([]wal.Position, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ms, err := d.List()
	if err != nil {
		return nil, err
	}
	var out []wal.Position
	for _, m := range ms {
		for _, p := range m.LogPositions {
			if p.Prefix == prefix {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// ReferencedBlocks returns every block any tablet's TSFiles name, with its
// store.
func (d *DB) ReferencedBlocks(ctx context.Context) (map[blockstore.BlockRef]struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ms, err := d.List()
	if err != nil {
		return nil, err
	}
	out := map[blockstore.BlockRef]struct{}{}
	for _, m := range ms {
		for _, f := range m.TSFiles {
			for _, b := range f.BlockRefs() {
				out[b] = struct{}{}
			}
		}
	}
	return out, nil
}

// WriteTo writes a consistent copy of the whole database to w (a backup;
// tests use it to take the metadata as a crash would leave it).
func (d *DB) WriteTo(w io.Writer) (int64, error) {
	var n int64
	err := d.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}
