package client

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// TabletInfo describes one tablet of a table, as the master knows it.
type TabletInfo struct {
	ID string
	// StartRow and EndRow bound the tablet's rows [StartRow, EndRow); an
	// empty EndRow is unbounded.
	StartRow, EndRow string
	// State is "unassigned", "assigned", "serving" or "deleting".
	State string
	// TServer is the address of the tserver serving it ("" if none).
	TServer     string
	TServerUUID string
	Epoch       int64
	// SizeBytes is the size last reported (TSFiles plus buffers), or -1 if
	// the master has no report.
	SizeBytes int64
	// Space is what the tablet's TSFiles hold, as last reported (Known
	// false without a report).
	Space TabletSpace
}

// TabletSpace is the space a tablet's TSFiles take and what of it is
// live, as its tserver last reported it.
type TabletSpace struct {
	Known bool
	// FileBytes is the bytes of every block of the TSFiles.
	FileBytes int64
	// DataBytes and RawBytes are their data blocks as stored and their
	// pages uncompressed (files of format version 2 left out).
	DataBytes, RawBytes int64
	// Entries is the entries in the files, Tombstones the tombstones
	// among them (counted in files of format version 4 on).
	Entries, Tombstones int64
	// GarbageShare is the estimated share of the entries a major
	// compaction would drop.
	GarbageShare float64
}

// LiveBytes estimates the file bytes a major compaction would keep:
// FileBytes less the garbage share.
func (s TabletSpace) LiveBytes() int64 {
	return int64(float64(s.FileBytes) * (1 - s.GarbageShare))
}

// CompressionRatio is DataBytes / RawBytes (0 without raw bytes): below 1
// the pages are stored smaller than their entries.
func (s TabletSpace) CompressionRatio() float64 {
	if s.RawBytes == 0 {
		return 0
	}
	return float64(s.DataBytes) / float64(s.RawBytes)
}

// TombstoneShare is Tombstones / Entries (0 without entries).
func (s TabletSpace) TombstoneShare() float64 {
	if s.Entries == 0 {
		return 0
	}
	return float64(s.Tombstones) / float64(s.Entries)
}

func spaceFromPB(sp *pb.TabletSpace) TabletSpace {
	if sp == nil {
		return TabletSpace{}
	}
	return TabletSpace{Known: true, FileBytes: sp.FileBytes, DataBytes: sp.DataBytes, RawBytes: sp.RawBytes,
		Entries: sp.Entries, Tombstones: sp.Tombstones, GarbageShare: sp.GarbageShare}
}

// Tablets returns every tablet of table in row order.
func (c *Client) Tablets(ctx context.Context, table string) ([]TabletInfo, error) {
	prefix := errorPrefix("tablets of table %q", table)
	if err := limits.ValidateTableName(table); err != nil {
		return nil, statusError(err, prefix)
	}
	var locs *pb.GetTableLocationsResponse
	var desc *pb.DescribeTableResponse
	err := c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		var err error
		locs, err = m.GetTableLocations(ctx, &pb.GetTableLocationsRequest{Table: table})
		if err != nil {
			return err
		}
		desc, err = m.DescribeTable(ctx, &pb.DescribeTableRequest{Name: table})
		if apierr.CodeOf(err) == codes.Unimplemented {
			desc, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TabletInfo, 0, len(locs.Locations))
	for _, l := range locs.Locations {
		size, ok := desc.GetTabletSizes()[l.TabletId]
		if !ok {
			size = -1
		}
		out = append(out, TabletInfo{
			ID:          l.TabletId,
			StartRow:    string(l.GetRange().GetStartRow()),
			EndRow:      string(l.GetRange().GetEndRow()),
			State:       stateName(l.State),
			TServer:     l.TserverAddress,
			TServerUUID: l.TserverUuid,
			Epoch:       l.Epoch,
			SizeBytes:   size,
			Space:       spaceFromPB(desc.GetTabletSpace()[l.TabletId]),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartRow < out[j].StartRow })
	return out, nil
}

func stateName(s pb.TabletState) string {
	switch s {
	case pb.TabletState_TABLET_STATE_UNASSIGNED:
		return "unassigned"
	case pb.TabletState_TABLET_STATE_ASSIGNED:
		return "assigned"
	case pb.TabletState_TABLET_STATE_SERVING:
		return "serving"
	case pb.TabletState_TABLET_STATE_DELETING:
		return "deleting"
	default:
		return "unknown"
	}
}

// TServerInfo describes a tserver known to the master.
type TServerInfo struct {
	UUID, Address string
	Live          bool
	Tablets       int
	LastHeartbeat time.Time
}

// TServers returns the tservers the master knows, sorted by address.
func (c *Client) TServers(ctx context.Context) ([]TServerInfo, error) {
	var resp *pb.ListTServersResponse
	err := c.callMaster(ctx, errorPrefix("list tservers"), func(ctx context.Context, m pb.MasterClient) error {
		var err error
		resp, err = m.ListTServers(ctx, &pb.ListTServersRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TServerInfo, 0, len(resp.Tservers))
	for _, ts := range resp.Tservers {
		info := TServerInfo{UUID: ts.Uuid, Address: ts.Address, Live: ts.Live, Tablets: int(ts.TabletCount)}
		if ts.LastHeartbeatUnixMicros > 0 {
			info.LastHeartbeat = time.UnixMicro(ts.LastHeartbeatUnixMicros)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// CheckpointResult is what one tserver's checkpoint flushed.
type CheckpointResult struct {
	TServer        string
	TabletsFlushed int
	BytesFlushed   int64
}

// Checkpoint asks the tserver at addr to checkpoint every tablet it serves
// (write buffers to TSFiles, a new log file) and waits for it. It is not
// retried: a checkpoint that failed half way is simply incomplete, and the
// caller may ask again.
func (c *Client) Checkpoint(ctx context.Context, addr string) (CheckpointResult, error) {
	prefix := errorPrefix("checkpoint tserver %s", addr)
	ts, err := c.tserver(addr)
	if err != nil {
		return CheckpointResult{}, statusError(err, prefix)
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	resp, err := ts.Checkpoint(ctx, &pb.CheckpointRequest{})
	if err != nil {
		return CheckpointResult{}, statusError(err, prefix)
	}
	return CheckpointResult{TServer: addr, TabletsFlushed: int(resp.TabletsFlushed), BytesFlushed: resp.BytesFlushed}, nil
}

// CheckpointAll checkpoints every live tserver, one after another, and
// returns their results; it stops at the first failure.
func (c *Client) CheckpointAll(ctx context.Context) ([]CheckpointResult, error) {
	servers, err := c.TServers(ctx)
	if err != nil {
		return nil, err
	}
	var out []CheckpointResult
	for _, s := range servers {
		if !s.Live {
			continue
		}
		r, err := c.Checkpoint(ctx, s.Address)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// MergeTablets asks the master to merge the tablet of table that holds row
// with the table's next tablet (moving one of them first when they are on
// different tservers) and returns the merged tablet's id once the merge
// committed. Writes to both ranges are refused for a brief fence meanwhile;
// the client's retries carry them over to the merged tablet.
func (c *Client) MergeTablets(ctx context.Context, table, row string) (string, error) {
	prefix := errorPrefix("merge the tablet of table %q holding row %q with its successor", table, row)
	if err := limits.ValidateTableName(table); err != nil {
		return "", statusError(err, prefix)
	}
	// The pair is named by id, so a retry after a merge that committed
	// (its answer lost) is refused instead of merging again.
	tablets, err := c.Tablets(ctx, table)
	if err != nil {
		return "", err
	}
	req := &pb.MergeTabletsRequest{Table: table, Row: []byte(row)}
	for i, t := range tablets {
		if t.StartRow <= row && (t.EndRow == "" || row < t.EndRow) && i+1 < len(tablets) {
			req.ExpectLeftTabletId, req.ExpectRightTabletId = t.ID, tablets[i+1].ID
		}
	}
	var id string
	err = c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.MergeTablets(ctx, req)
		if err == nil {
			id = resp.MergedTabletId
		}
		return err
	})
	return id, err
}

// SplitTablet asks the master to have the tablet of table that holds row
// split at row (the row becomes the first row of the second child). It
// returns when the master accepted the request; the split itself runs on
// the tserver and Tablets shows its result.
func (c *Client) SplitTablet(ctx context.Context, table, row string) error {
	prefix := errorPrefix("split table %q at row %q", table, row)
	if err := limits.ValidateTableName(table); err != nil {
		return statusError(err, prefix)
	}
	if err := limits.ValidateRowKey([]byte(row)); err != nil {
		return statusError(err, prefix)
	}
	return c.callMaster(ctx, prefix, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.SplitTablet(ctx, &pb.SplitTabletRequest{Table: table, SplitRow: []byte(row)})
		return err
	})
}
