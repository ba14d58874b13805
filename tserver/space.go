package tserver

import (
	pb "bighive/proto/bighivepb"
	"bighive/storage/tablet"
	"bighive/storage/tablet/tsfile"
)

// tabletSpace describes the space of a tablet's TSFiles for the heartbeat
// (TabletReport.space): their bytes, data bytes stored and uncompressed,
// entries, tombstones, and the garbage share as est estimates it (0 when
// the estimate failed; it is retried at the next heartbeat).
func tabletSpace(files []tsfile.Info, est func() (tablet.GarbageEstimate, error)) *pb.TabletSpace {
	sp := &pb.TabletSpace{}
	for _, f := range files {
		sp.FileBytes += f.Size
		sp.Entries += f.Entries
		sp.Tombstones += f.Tombstones
		if f.RawBytes > 0 {
			sp.DataBytes += f.DataBytes
			sp.RawBytes += f.RawBytes
		}
	}
	if g, err := est(); err == nil {
		sp.GarbageShare = g.Share()
	}
	return sp
}
