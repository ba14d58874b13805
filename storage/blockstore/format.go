package blockstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	"bighive/proto/storagepb"
)

// On-disk constants of .metadata files. They must not change; a new format
// gets a new version.
const (
	metaMagic       = "bhblkmd\x00"
	metaVersion     = 1
	metaHeaderSize  = 16 // magic(8) version(4) crc32c(4)
	recordFrameSize = 8  // length(4) crc32c(4)
	maxRecordSize   = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeMetaHeader() []byte {
	b := make([]byte, metaHeaderSize)
	copy(b, metaMagic)
	binary.LittleEndian.PutUint32(b[8:], metaVersion)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

func checkMetaHeader(b []byte) error {
	if len(b) < metaHeaderSize {
		return fmt.Errorf("header truncated (%d bytes)", len(b))
	}
	if !bytes.Equal(b[:8], []byte(metaMagic)) {
		return fmt.Errorf("bad magic %q", b[:8])
	}
	if crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:16]) {
		return fmt.Errorf("header checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != metaVersion {
		return fmt.Errorf("unsupported metadata version %d", v)
	}
	return nil
}

// appendRecord appends the framed encoding of r to dst.
func appendRecord(dst []byte, r *storagepb.BlockRecord) []byte {
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil { // cannot happen for this message
		panic(fmt.Sprintf("blockstore: marshal BlockRecord: %v", err))
	}
	var hdr [recordFrameSize]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(payload)))
	c := crc32.Update(0, castagnoli, hdr[:4])
	c = crc32.Update(c, castagnoli, payload)
	binary.LittleEndian.PutUint32(hdr[4:], c)
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

// parsedRecord is a record and the offset of its frame in the file.
type parsedRecord struct {
	rec *storagepb.BlockRecord
	off int64
}

// parseMetadata decodes a whole .metadata file. It returns the records
// before the first bad frame, the end offset of the last whole record
// (goodEnd) and findings: a bad header or a checksum failure before the
// tail is CorruptRecord; a frame cut by the end of the file, or a checksum
// failure in the very last frame, is PartialRecord (a torn append); a frame
// whose payload does not decode is MalformedRecord. It never panics.
func parseMetadata(file string, data []byte) (recs []parsedRecord, goodEnd int64, findings []Finding) {
	if err := checkMetaHeader(data); err != nil {
		return nil, 0, []Finding{{Kind: CorruptRecord, File: file, Offset: 0, Detail: err.Error()}}
	}
	off := int64(metaHeaderSize)
	goodEnd = off
	n := int64(len(data))
	for off < n {
		rest := n - off
		if rest < recordFrameSize {
			findings = append(findings, Finding{Kind: PartialRecord, File: file, Offset: off,
				Detail: fmt.Sprintf("%d trailing bytes, shorter than a record frame", rest)})
			return recs, goodEnd, findings
		}
		length := int64(binary.LittleEndian.Uint32(data[off:]))
		if length > maxRecordSize {
			findings = append(findings, Finding{Kind: CorruptRecord, File: file, Offset: off,
				Detail: fmt.Sprintf("record length %d exceeds %d", length, maxRecordSize)})
			return recs, goodEnd, findings
		}
		if rest < recordFrameSize+length {
			findings = append(findings, Finding{Kind: PartialRecord, File: file, Offset: off,
				Detail: fmt.Sprintf("record of %d bytes cut after %d", length, rest-recordFrameSize)})
			return recs, goodEnd, findings
		}
		end := off + recordFrameSize + length
		payload := data[off+recordFrameSize : end]
		c := crc32.Update(0, castagnoli, data[off:off+4])
		c = crc32.Update(c, castagnoli, payload)
		if c != binary.LittleEndian.Uint32(data[off+4:]) {
			kind, detail := CorruptRecord, "record checksum mismatch"
			if end == n {
				kind, detail = PartialRecord, "checksum mismatch in the last record (torn append)"
			}
			findings = append(findings, Finding{Kind: kind, File: file, Offset: off, Detail: detail})
			return recs, goodEnd, findings
		}
		r := &storagepb.BlockRecord{}
		if err := proto.Unmarshal(payload, r); err != nil {
			findings = append(findings, Finding{Kind: MalformedRecord, File: file, Offset: off,
				Detail: "undecodable record: " + err.Error()})
		} else {
			recs = append(recs, parsedRecord{rec: r, off: off})
		}
		off = end
		goodEnd = end
	}
	return recs, goodEnd, findings
}

func alignUp(v, a int64) int64 {
	if a <= 1 {
		return v
	}
	return (v + a - 1) / a * a
}

func alignDown(v, a int64) int64 {
	if a <= 1 {
		return v
	}
	return v / a * a
}

func deleteRecord(id BlockID) *storagepb.BlockRecord {
	return &storagepb.BlockRecord{BlockId: uint64(id), Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_DELETE}
}

func createRecord(id BlockID, off, n int64) *storagepb.BlockRecord {
	return &storagepb.BlockRecord{BlockId: uint64(id), Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_CREATE, Offset: &off, Length: &n}
}
