package limits

import (
	"fmt"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"bighive/internal/apierr"
	"bighive/internal/wirecodec"
	pb "bighive/proto/bighivepb"
)

const (
	// MaxRowKeyBytes bounds a row key. Row keys are non-empty.
	MaxRowKeyBytes = 4 << 10
	// MaxQualifierBytes bounds a column qualifier (it may be empty).
	MaxQualifierBytes = 16 << 10
	// MaxNameBytes bounds table and family names, which match [A-Za-z0-9_.-]+.
	MaxNameBytes = 128
	// MaxValueBytes bounds one cell value, as in Cloud Bigtable.
	MaxValueBytes = 100 << 20
	// MaxRowMutationBytes bounds one row mutation: the sum over its
	// operations of their family, qualifier and value bytes and
	// MutationOpOverhead each (Cloud Bigtable's row limit is
	// 256 MiB). Several mutations of one row may take it past this; what
	// a read of such a row holds is in docs/limits.md.
	MaxRowMutationBytes = 256 << 20
	// MutationOpOverhead is what an operation counts toward
	// MaxRowMutationBytes beside its family, qualifier and value: at least
	// its other fields' bytes in a message and in the log's encoding, so
	// that a row mutation within the limit fits one message of
	// MaxRequestBytes and one log record.
	MutationOpOverhead = 48
	// MaxRequestBytes bounds one gRPC message, request or response: one row
	// mutation of MaxRowMutationBytes, its row key and 1 MiB for the rest;
	// gRPC itself refuses a larger one with ResourceExhausted.
	MaxRequestBytes = MaxRowMutationBytes + 1<<20
	// MaxSplitKeys bounds the split keys of one CreateTable.
	MaxSplitKeys = 100_000
)

// MaxTabletLoads bounds the loads of one ReportTabletLoads call and of
// its raft command: 1024 loads make a command of about 100 KiB.
const MaxTabletLoads = 1024

// GRPCServerOptions sets the server's message size limits to
// MaxRequestBytes, its flow-control windows and its codec to wirecodec's.
func GRPCServerOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.MaxSendMsgSize(MaxRequestBytes),
		grpc.InitialWindowSize(StreamWindowBytes),
		grpc.InitialConnWindowSize(ConnWindowBytes),
		grpc.NumStreamWorkers(StreamWorkers),
	}, wirecodec.ServerOptions()...)
}

// StreamWorkers is how many goroutines a server keeps to run its calls
// (grpc.NumStreamWorkers). Without them each call gets a new goroutine,
// whose small stack is copied as the call grows it, two or three times
// per call (18 % of the CPU of a tserver serving the Bigtable API's Gets);
// a worker's stack stays grown. More concurrent calls than workers get
// new goroutines, as before.
const StreamWorkers = 256

// GRPCCallOptions sets a client's message size limits to MaxRequestBytes.
func GRPCCallOptions() grpc.DialOption {
	return grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxRequestBytes),
		grpc.MaxCallSendMsgSize(MaxRequestBytes),
	)
}

// GRPCDialOptions are the options of every outgoing connection of
// Bighive (client to servers, tserver to master, master to master and to
// tservers): the transport credentials creds (tlsconf.Credentials: TLS,
// or plaintext without the --tls-* flags), the message size limits and
// keepalive, the flow-control windows, wirecodec's codec, then extra.
func GRPCDialOptions(creds credentials.TransportCredentials, extra ...grpc.DialOption) []grpc.DialOption {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		GRPCCallOptions(),
		GRPCKeepaliveDialOption(),
		grpc.WithInitialWindowSize(StreamWindowBytes),
		grpc.WithInitialConnWindowSize(ConnWindowBytes),
	}, wirecodec.DialOptions()...)
	return append(opts, extra...)
}

// ValidateTableName checks a table name.
func ValidateTableName(name string) error { return validateName("table", name) }

// ValidateBackupName checks a backup name (the same rule as a table's).
func ValidateBackupName(name string) error { return validateName("backup", name) }

// ValidateFamilyName checks a column family name.
func ValidateFamilyName(name string) error { return validateName("column family", name) }

func validateName(what, name string) error {
	if name == "" {
		return apierr.InvalidArgument("%s name is empty; use 1-%d characters of [A-Za-z0-9_.-]", what, MaxNameBytes)
	}
	if len(name) > MaxNameBytes {
		return apierr.InvalidArgument("%s name is %d bytes, over the limit of %d", what, len(name), MaxNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return apierr.InvalidArgument("%s name %q has %s at byte %d; use only [A-Za-z0-9_.-]",
				what, printable(name), describeByte(name[i]), i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

func describeByte(c byte) string {
	if c >= 0x80 {
		return fmt.Sprintf("non-ASCII byte 0x%02x", c)
	}
	return fmt.Sprintf("%q", c)
}

func printable(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ValidateRowKey checks a row key: non-empty, at most MaxRowKeyBytes.
func ValidateRowKey(key []byte) error {
	if len(key) == 0 {
		return apierr.InvalidArgument("row key is empty")
	}
	if len(key) > MaxRowKeyBytes {
		return apierr.InvalidArgument("row key is %d bytes, over the limit of %d", len(key), MaxRowKeyBytes)
	}
	return nil
}

// ValidateQualifier checks a column qualifier.
func ValidateQualifier(q []byte) error {
	if len(q) > MaxQualifierBytes {
		return apierr.InvalidArgument("column qualifier is %d bytes, over the limit of %d", len(q), MaxQualifierBytes)
	}
	return nil
}

// ValidateValue checks a cell value.
func ValidateValue(v []byte) error {
	if len(v) > MaxValueBytes {
		return apierr.InvalidArgument("value is %d bytes, over the limit of %d", len(v), MaxValueBytes)
	}
	return nil
}

// ValidateTimestampRange checks a delete's or a filter's time range.
func ValidateTimestampRange(r *pb.TimestampRange) error {
	if r == nil {
		return nil
	}
	if r.StartMicros < 0 || r.EndMicros < 0 {
		return apierr.InvalidArgument("timestamp range [%d, %d) is negative", r.StartMicros, r.EndMicros)
	}
	if r.EndMicros != 0 && r.EndMicros <= r.StartMicros {
		return apierr.InvalidArgument("timestamp range [%d, %d) is empty", r.StartMicros, r.EndMicros)
	}
	return nil
}

// ValidateRowMutation checks the shape and sizes of a row mutation (its
// key, each operation, and their total against MaxRowMutationBytes); the
// families' existence is the tablet's to check.
func ValidateRowMutation(m *pb.RowMutation) error {
	if m == nil {
		return apierr.InvalidArgument("row mutation is missing")
	}
	if err := ValidateRowKey(m.RowKey); err != nil {
		return err
	}
	if len(m.Mutations) == 0 {
		return apierr.InvalidArgument("row mutation of row %q has no operations", printable(string(m.RowKey)))
	}
	total := 0
	for i, mu := range m.Mutations {
		n, err := validateOp(mu)
		if err != nil {
			return apierr.Wrap(apierr.CodeOf(err), err, "operation %d", i)
		}
		total += n
	}
	if total > MaxRowMutationBytes {
		return apierr.InvalidArgument("row mutation of row %q is %d bytes (%d operations), over the limit of %d bytes (256 MiB) for one row",
			printable(string(m.RowKey)), total, len(m.Mutations), MaxRowMutationBytes)
	}
	return nil
}

// validateOp checks one operation and returns what it counts toward
// MaxRowMutationBytes: its family, qualifier and value and
// MutationOpOverhead.
func validateOp(mu *pb.Mutation) (int, error) {
	switch op := mu.GetMutation().(type) {
	case *pb.Mutation_SetCell_:
		c := op.SetCell
		if err := ValidateFamilyName(c.Family); err != nil {
			return 0, err
		}
		if err := ValidateQualifier(c.Qualifier); err != nil {
			return 0, err
		}
		if c.TimestampMicros < -1 {
			return 0, apierr.InvalidArgument("cell timestamp %d is negative (use -1 for server time)", c.TimestampMicros)
		}
		if c.TimestampMicros == math.MaxInt64 {
			return 0, apierr.InvalidArgument("cell timestamp %d is reserved", c.TimestampMicros)
		}
		return len(c.Family) + len(c.Qualifier) + len(c.Value) + MutationOpOverhead, ValidateValue(c.Value)
	case *pb.Mutation_DeleteFromColumn_:
		d := op.DeleteFromColumn
		if err := ValidateFamilyName(d.Family); err != nil {
			return 0, err
		}
		if err := ValidateQualifier(d.Qualifier); err != nil {
			return 0, err
		}
		return len(d.Family) + len(d.Qualifier) + MutationOpOverhead, ValidateTimestampRange(d.TimeRange)
	case *pb.Mutation_DeleteFromFamily_:
		return len(op.DeleteFromFamily.Family) + MutationOpOverhead, ValidateFamilyName(op.DeleteFromFamily.Family)
	case *pb.Mutation_DeleteFromRow_:
		return MutationOpOverhead, nil
	case *pb.Mutation_MergeToCell_:
		c := op.MergeToCell
		if err := ValidateFamilyName(c.Family); err != nil {
			return 0, err
		}
		if err := ValidateQualifier(c.Qualifier); err != nil {
			return 0, err
		}
		if c.TimestampMicros < 0 {
			return 0, apierr.InvalidArgument("aggregate cell timestamp %d in family %q is negative (an aggregate cell takes the client's timestamp)", c.TimestampMicros, c.Family)
		}
		if c.TimestampMicros == math.MaxInt64 {
			return 0, apierr.InvalidArgument("cell timestamp %d is reserved", c.TimestampMicros)
		}
		if len(c.Operand) != 8 {
			return 0, apierr.InvalidArgument("aggregate operand for family %q is %d bytes, not an 8-byte big-endian int64", c.Family, len(c.Operand))
		}
		return len(c.Family) + len(c.Qualifier) + len(c.Operand) + MutationOpOverhead, nil
	default:
		return 0, apierr.InvalidArgument("operation has no kind (set_cell, delete_from_column, delete_from_family, delete_from_row or merge_to_cell)")
	}
}

// The gRPC flow-control windows of every connection and server: how many
// bytes a sender may have in flight, unread by the receiver, on one stream
// and on one connection. A scan streams 1 MiB messages; with gRPC's
// default window (64 KiB, grown by its bandwidth estimate) the tserver
// waited on the client's reads, and one scanner kept the machine's two
// cores 64 % busy (482 MB/s). With these windows the tserver fills the
// next messages while the client decodes, and 1 scanner runs at about
// 600 MB/s. They bound memory too: a receiver that does not read buffers
// at most a stream's window per stream, a connection's per connection.
const (
	StreamWindowBytes = 16 << 20
	ConnWindowBytes   = 32 << 20
)
