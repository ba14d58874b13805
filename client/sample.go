package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// RowKeySample is one sample of SampleRowKeyOffsets: OffsetBytes is the
// approximate size of the table's rows before Key. The last sample has an
// empty Key, meaning the end of the table, and the table's size.
type RowKeySample struct {
	Key         string
	OffsetBytes int64
}

// SampleRowKeys returns row keys that split the table into contiguous
// sections of roughly equal size (by default about 16 MiB of storage
// each; every tablet boundary is among them), in increasing order, the
// last one empty (the end of the table), as the Cloud Bigtable client's
// SampleRowKeys does: read [keys[i-1], keys[i]) in parallel, say.
func (t *Table) SampleRowKeys(ctx context.Context) ([]string, error) {
	samples, err := t.SampleRowKeyOffsets(ctx, 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(samples))
	for i, s := range samples {
		out[i] = s.Key
	}
	return out, nil
}

// SampleRowKeyOffsets is SampleRowKeys with the estimated size of the
// table before each key (Cloud Bigtable's SampleRowKeysResponse), sampled
// at roughly every sampleBytes (0: the default, 16 MiB; otherwise at
// least 16 KiB). It asks each tablet in row order for its samples (from
// its TSFiles' page indexes and write buffers; no data is read) and adds
// up the offsets; a tablet that moves or splits meanwhile is asked again.
func (t *Table) SampleRowKeyOffsets(ctx context.Context, sampleBytes int64) ([]RowKeySample, error) {
	prefix := errorPrefix("table %q: sample row keys", t.name)
	if sampleBytes != 0 && sampleBytes < 16<<10 {
		return nil, statusError(apierr.InvalidArgument("sample spacing %d bytes is below 16 KiB", sampleBytes), prefix)
	}
	var out []RowKeySample
	var base int64
	for cur := ""; ; {
		var samples []*pb.RowKeySample
		var loc *location
		err := t.c.do(ctx, func() string { return prefix }, read, func(ctx context.Context, p *peer.Peer) error {
			var err error
			if loc, err = t.lc.lookup(ctx, cur); err != nil {
				return unsent(err)
			}
			ts, err := t.c.tserver(loc.addr)
			if err != nil {
				return err
			}
			resp, err := ts.SampleRowKeys(ctx, &pb.SampleRowKeysRequest{TabletId: loc.tabletID, Epoch: loc.epoch, SampleBytes: sampleBytes}, grpc.Peer(p))
			if err != nil {
				return t.failed(loc, err)
			}
			samples = resp.Samples
			if len(samples) == 0 || string(samples[len(samples)-1].RowKey) != loc.end {
				t.lc.invalidate(loc)
				return apierr.Unavailable("tserver %s: the samples of tablet %s do not end at its end row %q", loc.addr, loc.tabletID, loc.end)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		var size int64
		for _, s := range samples {
			key, last := string(s.RowKey), string(s.RowKey) == loc.end
			if !last && (key <= cur || loc.end != "" && key >= loc.end || s.OffsetBytes < size) {
				continue // keys strictly increasing, offsets never back, whatever the server sends
			}
			size = max(size, s.OffsetBytes)
			out = append(out, RowKeySample{Key: key, OffsetBytes: base + size})
		}
		base += size
		if loc.end == "" {
			return out, nil
		}
		cur = loc.end
	}
}
