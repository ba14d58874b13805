package blockstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	"bighive/proto/storagepb"
	"bighive/storage/vfs"
)

// File names of the FsManager. They must not change.
const (
	// instanceFile is <root>/instance: storagepb.FsInstance.
	instanceFile = "instance"
	// dirInstanceFile is <dir>/block_manager_instance: storagepb.FsDirInstance.
	dirInstanceFile = "block_manager_instance"
	// lockFile is <dir>/block_manager.lock, flocked by the read-write owner
	// and holding its pid as decimal text.
	lockFile = "block_manager.lock"
)

// On-disk constants of instance files. They must not change; a new format
// gets a new version.
const (
	instanceMagic    = "bhfsinst"
	dirInstanceMagic = "bhdirins"
	instanceVersion  = 1
	instanceHdrSize  = 20 // magic(8) version(4) length(4) crc32c(4)
	maxInstanceSize  = 1 << 20
)

// encodeInstanceFile frames a message: magic, version, payload length,
// crc32c of (the first 16 header bytes ‖ payload), payload.
func encodeInstanceFile(magic string, m proto.Message) []byte {
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil { // cannot happen for these messages
		panic(fmt.Sprintf("blockstore: marshal %T: %v", m, err))
	}
	b := make([]byte, instanceHdrSize, instanceHdrSize+len(payload))
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[8:], instanceVersion)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(payload)))
	c := crc32.Update(0, castagnoli, b[:16])
	c = crc32.Update(c, castagnoli, payload)
	binary.LittleEndian.PutUint32(b[16:], c)
	return append(b, payload...)
}

// decodeInstanceFile checks the framing of an instance file and decodes it
// into m. Every failure is a *CorruptionError naming the file.
func decodeInstanceFile(file, magic string, b []byte, m proto.Message) error {
	bad := func(off int64, why string, err error) error {
		return &CorruptionError{File: file, Offset: off, Reason: why, Err: err}
	}
	if len(b) < instanceHdrSize {
		return bad(0, fmt.Sprintf("instance file of %d bytes is too short for a header", len(b)), nil)
	}
	if !bytes.Equal(b[:8], []byte(magic)) {
		return bad(0, fmt.Sprintf("bad magic %q", b[:8]), nil)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != instanceVersion {
		return bad(8, fmt.Sprintf("unsupported instance file version %d", v), nil)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	if n > maxInstanceSize || int(n) != len(b)-instanceHdrSize {
		return bad(12, fmt.Sprintf("payload length %d, file holds %d", n, len(b)-instanceHdrSize), nil)
	}
	c := crc32.Update(0, castagnoli, b[:16])
	c = crc32.Update(c, castagnoli, b[instanceHdrSize:])
	if c != binary.LittleEndian.Uint32(b[16:]) {
		return bad(16, "checksum mismatch", nil)
	}
	if err := proto.Unmarshal(b[instanceHdrSize:], m); err != nil {
		return bad(instanceHdrSize, "payload does not decode", err)
	}
	return nil
}

// readInstance reads <root>/instance. errors.Is(err, fs.ErrNotExist) when
// the root has none.
func readInstance(fsys vfs.FS, root string) (*storagepb.FsInstance, error) {
	p := filepath.Join(root, instanceFile)
	b, err := vfs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	m := &storagepb.FsInstance{}
	if err := decodeInstanceFile(p, instanceMagic, b, m); err != nil {
		return nil, err
	}
	if !validUUID(m.GetUuid()) {
		return nil, &CorruptionError{File: p, Offset: instanceHdrSize, Reason: fmt.Sprintf("bad uuid %q", m.GetUuid())}
	}
	return m, nil
}

// readDirInstance reads <dir>/block_manager_instance.
func readDirInstance(fsys vfs.FS, dir string) (*storagepb.FsDirInstance, error) {
	p := filepath.Join(dir, dirInstanceFile)
	b, err := vfs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	m := &storagepb.FsDirInstance{}
	if err := decodeInstanceFile(p, dirInstanceMagic, b, m); err != nil {
		return nil, err
	}
	if !validUUID(m.GetDirSet().GetUuid()) {
		return nil, &CorruptionError{File: p, Offset: instanceHdrSize, Reason: fmt.Sprintf("bad dir uuid %q", m.GetDirSet().GetUuid())}
	}
	return m, nil
}

// writeInstanceFile replaces path durably (temp file, fsync, rename, fsync
// of the directory).
func writeInstanceFile(fsys vfs.FS, path, magic string, m proto.Message) error {
	if err := vfs.WriteFileAtomic(fsys, path, encodeInstanceFile(magic, m)); err != nil {
		return fmt.Errorf("blockstore: write %s: %w", path, err)
	}
	return nil
}

func newInstance(uuid string, now time.Time) *storagepb.FsInstance {
	return &storagepb.FsInstance{Uuid: uuid, FormatStamp: "Formatted at " + now.UTC().Format(time.RFC3339Nano),
		FormatTimeUs: now.UnixMicro()}
}

func validUUID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
