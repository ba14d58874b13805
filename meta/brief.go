package meta

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	pb "bighive/proto/bighivepb"
)

// Brief is the part of a tablet's record the leader's per-heartbeat and
// per-tick bookkeeping needs, read without decoding the whole TabletMeta
// (its TSFiles, log positions and range are most of the bytes).
type Brief struct {
	Table   string
	State   pb.TabletState
	Tserver string
	Epoch   int64
}

// TabletMeta field numbers the brief reads (proto/bighivepb/common.proto).
const (
	fieldTable   = 2
	fieldState   = 4
	fieldTserver = 5
	fieldEpoch   = 6
)

// TabletBrief reads a tablet's table, state, owner and epoch straight from
// its encoded record; ok is false if the tablet does not exist.
func (r *Reader) TabletBrief(id string) (b Brief, ok bool, err error) {
	v := r.tx.Bucket(bucketTablets).Get([]byte(id))
	if v == nil {
		return b, false, nil
	}
	if err := parseBrief(v, &b); err != nil {
		return b, false, &CorruptionError{File: r.file, Bucket: string(bucketTablets), Key: id, Err: err}
	}
	return b, true, nil
}

// parseBrief walks the record's fields, keeping the last value of each
// field it reads (as proto.Unmarshal does) and skipping the others.
func parseBrief(v []byte, b *Brief) error {
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		v = v[n:]
		switch {
		case num == fieldTable && typ == protowire.BytesType, num == fieldTserver && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(v)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if num == fieldTable {
				b.Table = string(s)
			} else {
				b.Tserver = string(s)
			}
			v = v[n:]
		case num == fieldState && typ == protowire.VarintType, num == fieldEpoch && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if num == fieldState {
				b.State = pb.TabletState(int32(x))
			} else {
				b.Epoch = int64(x)
			}
			v = v[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, v)
			if n < 0 {
				return protowire.ParseError(n)
			}
			v = v[n:]
		}
	}
	if b.Table == "" {
		return errors.New("tablet record names no table")
	}
	return nil
}
