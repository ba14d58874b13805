package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

// Compression is the codec of a column family's TSFile pages: a page is
// stored compressed only when that saves space, and the tservers' block
// caches hold pages uncompressed. Changing it applies to the files written
// from then on (flushes and compactions); files already written keep
// their codec and stay readable.
type Compression int

const (
	// CompressionDefault is the server's default, snappy (also what every
	// family created before compression could be chosen has).
	CompressionDefault Compression = iota
	CompressionNone
	CompressionSnappy
	CompressionZstd
)

func (c Compression) String() string {
	switch c {
	case CompressionDefault:
		return "default"
	case CompressionNone:
		return "none"
	case CompressionSnappy:
		return "snappy"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// ParseCompression parses none, snappy, zstd or default ("" too).
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "default":
		return CompressionDefault, nil
	case "none":
		return CompressionNone, nil
	case "snappy":
		return CompressionSnappy, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return 0, apierr.InvalidArgument("unknown compression %q (use none, snappy or zstd)", s)
}

// proto is c in the API; false for a value of no constant.
func (c Compression) proto() (pb.Compression, bool) {
	switch c {
	case CompressionDefault:
		return pb.Compression_COMPRESSION_UNSPECIFIED, true
	case CompressionNone:
		return pb.Compression_COMPRESSION_NONE, true
	case CompressionSnappy:
		return pb.Compression_COMPRESSION_SNAPPY, true
	case CompressionZstd:
		return pb.Compression_COMPRESSION_ZSTD, true
	}
	return 0, false
}

func compressionFromProto(c pb.Compression) Compression {
	switch c {
	case pb.Compression_COMPRESSION_NONE:
		return CompressionNone
	case pb.Compression_COMPRESSION_SNAPPY:
		return CompressionSnappy
	case pb.Compression_COMPRESSION_ZSTD:
		return CompressionZstd
	}
	return CompressionDefault
}

// CreateColumnFamilyWithSpec adds a column family with spec's GC policy
// (MaxVersions and MaxAge, or GCPolicy) and compression to a table, like
// CreateColumnFamily.
func (c *Client) CreateColumnFamilyWithSpec(ctx context.Context, table string, spec FamilySpec) error {
	prefix := errorPrefix("create column family %q of table %q", spec.Name, table)
	fs, err := familyProto(spec)
	if err != nil {
		return statusError(err, prefix)
	}
	// AlreadyExists on a retry: an earlier attempt whose reply was lost
	// created it.
	return c.familyCall(ctx, prefix, table, spec.Name, codes.AlreadyExists, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.AddFamily(ctx, &pb.AddFamilyRequest{Table: table, Family: fs})
		return err
	})
}

// SetCompression sets a column family's compression: the TSFiles the
// tservers write from when it returns use it.
func (c *Client) SetCompression(ctx context.Context, table, family string, comp Compression) error {
	prefix := errorPrefix("set the compression of column family %q of table %q", family, table)
	p, ok := comp.proto()
	if !ok {
		return statusError(apierr.InvalidArgument("unknown compression %d (use CompressionNone, CompressionSnappy or CompressionZstd)", int(comp)), prefix)
	}
	return c.familyCall(ctx, prefix, table, family, codes.OK, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.SetFamilyCompression(ctx, &pb.SetFamilyCompressionRequest{Table: table, Family: family, Compression: p})
		return err
	})
}
