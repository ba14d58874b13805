package tserver

import (
	"context"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet"
)

// MinSampleBytes is the smallest spacing SampleRowKeys accepts: it bounds
// the number of samples, and so the reply's size, to one per 16 KiB.
const MinSampleBytes = 16 << 10

// SampleRowKeys answers the sample row keys of one tablet: keys inside its
// range at roughly every sample_bytes of its estimated size (from the
// TSFiles' page indexes and the write buffers, tablet.SampleRowKeys),
// followed by the tablet's end row (empty for the last tablet of a table)
// with the whole estimate.
func (s *Server) SampleRowKeys(ctx context.Context, req *pb.SampleRowKeysRequest) (*pb.SampleRowKeysResponse, error) {
	if req.SampleBytes != 0 && req.SampleBytes < MinSampleBytes {
		return nil, apierr.InvalidArgument("sample row keys of tablet %s: sample_bytes is %d, want 0 (the default, %d) or at least %d",
			req.TabletId, req.SampleBytes, tablet.DefaultSampleBytes, MinSampleBytes)
	}
	r, err := s.serving(req.TabletId, req.Epoch)
	if err != nil {
		return nil, err
	}
	samples, total, err := r.SampleRowKeys(ctx, req.SampleBytes)
	if err != nil {
		return nil, s.tabletErr(r, err)
	}
	resp := &pb.SampleRowKeysResponse{Samples: make([]*pb.RowKeySample, 0, len(samples)+1)}
	for _, smp := range samples {
		resp.Samples = append(resp.Samples, &pb.RowKeySample{RowKey: smp.Key, OffsetBytes: smp.Offset})
	}
	resp.Samples = append(resp.Samples, &pb.RowKeySample{RowKey: r.End(), OffsetBytes: total})
	return resp, nil
}
