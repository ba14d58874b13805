package blockstore

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"google.golang.org/protobuf/proto"

	"bighive/proto/storagepb"
)

// TestFormatsAsDocumented builds the .metadata header, a record frame and
// an instance file byte by byte as doc.go draws them, and checks that the
// code writes exactly those bytes and accepts them. If this fails, doc.go
// or the format changed: fix the one that is wrong (and bump the version
// for a format change).
func TestFormatsAsDocumented(t *testing.T) {
	crc := func(parts ...[]byte) uint32 {
		var c uint32
		for _, p := range parts {
			c = crc32.Update(c, crc32.MakeTable(crc32.Castagnoli), p)
		}
		return c
	}
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

	// .metadata header: magic(8) ‖ version u32 ‖ crc32c of bytes [0, 12).
	hdr := append([]byte("bhblkmd\x00"), le32(1)...)
	hdr = append(hdr, le32(crc(hdr[:12]))...)
	if got := encodeMetaHeader(); !bytes.Equal(got, hdr) {
		t.Errorf("metadata header\n got % x\nwant % x", got, hdr)
	}
	if err := checkMetaHeader(hdr); err != nil {
		t.Errorf("documented header refused: %v", err)
	}

	// record: length u32 ‖ crc32c(length bytes ‖ payload) ‖ payload.
	rec := &storagepb.BlockRecord{BlockId: 7, Op: storagepb.BlockRecordOp_BLOCK_RECORD_OP_CREATE, TimestampUs: 1, Offset: proto.Int64(4096), Length: proto.Int64(10)}
	payload := appendRecord(nil, rec)[recordFrameSize:]
	frame := append(le32(uint32(len(payload))), le32(crc(le32(uint32(len(payload))), payload))...)
	frame = append(frame, payload...)
	if got := appendRecord(nil, rec); !bytes.Equal(got, frame) {
		t.Errorf("record frame\n got % x\nwant % x", got, frame)
	}
	recs, end, findings := parseMetadata("m", append(hdr, frame...))
	if len(recs) != 1 || end != int64(len(hdr)+len(frame)) || len(findings) != 0 {
		t.Errorf("documented record: %d records, end %d, findings %v", len(recs), end, findings)
	}

	// instance file: magic(8) ‖ version u32 ‖ length u32 ‖
	// crc32c(bytes [0, 16) ‖ payload) ‖ payload.
	inst := &storagepb.FsInstance{Uuid: "0123456789abcdef0123456789abcdef"}
	ipayload := encodeInstanceFile(instanceMagic, inst)[instanceHdrSize:]
	ihdr := append([]byte("bhfsinst"), le32(1)...)
	ihdr = append(ihdr, le32(uint32(len(ipayload)))...)
	ifile := append(append(ihdr, le32(crc(ihdr, ipayload))...), ipayload...)
	if got := encodeInstanceFile(instanceMagic, inst); !bytes.Equal(got, ifile) {
		t.Errorf("instance file\n got % x\nwant % x", got, ifile)
	}
	if err := decodeInstanceFile("instance", instanceMagic, ifile, &storagepb.FsInstance{}); err != nil {
		t.Errorf("documented instance file refused: %v", err)
	}
}
