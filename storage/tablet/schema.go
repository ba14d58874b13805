package tablet

import (
	"errors"
	"fmt"
	"time"

	"bighive/storage/mutation"
	"bighive/storage/tablet/blockcache"
	"bighive/storage/tablet/tsfile"
)

// Priority is a table's block-cache class (High, Medium, Low).
type Priority = blockcache.Priority

// Cache priorities, re-exported from blockcache.
const (
	High   = blockcache.High
	Medium = blockcache.Medium
	Low    = blockcache.Low
)

// FamilyPolicy is a column family's garbage-collection policy. Zero values
// mean unlimited.
type FamilyPolicy struct {
	// MaxVersions keeps the newest N live versions of each column.
	MaxVersions int
	// MaxAge hides cells whose timestamp is older than now-MaxAge.
	MaxAge time.Duration
	// Rule, when set, is the family's GC rule and MaxVersions and MaxAge
	// are ignored; when nil the rule is the union of the two.
	Rule *GCRule
	// Compression is the codec of the family's TSFile pages written from
	// now on (files already written keep theirs); the zero value is
	// tsfile.DefaultCompression.
	Compression tsfile.Compression
	// Aggregate, when set, makes the family an aggregate family: its cells
	// are written only as MergeCell operands, and a read folds the
	// operands of each cell with it. Fixed at the family's creation.
	Aggregate Aggregator
}

// Aggregator is an aggregate family's function over int64s (Cloud
// Bigtable's Int64 input type, big-endian encoded: the state of sum, min
// and max is an int64 of the same encoding).
type Aggregator uint8

const (
	// NoAggregate is a plain family: cells of bytes, the newest write of
	// a cell wins.
	NoAggregate Aggregator = iota
	// Sum adds the operands (wrapping on overflow, as two's complement).
	Sum
	// Min keeps the smallest operand.
	Min
	// Max keeps the largest operand.
	Max
)

func (a Aggregator) String() string {
	switch a {
	case NoAggregate:
		return "none"
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return fmt.Sprintf("Aggregator(%d)", uint8(a))
}

// fold combines an accumulator with one more operand. NoAggregate (the
// operands of a family no longer aggregate, which tombstones hide) sums.
func (a Aggregator) fold(acc, v int64) int64 {
	switch a {
	case Min:
		return min(acc, v)
	case Max:
		return max(acc, v)
	}
	return acc + v
}

// OperandLen is the length of a MergeCell operand: an 8-byte big-endian
// int64.
const OperandLen = 8

// Granularity is a table's timestamp granularity, fixed at its creation.
type Granularity uint8

const (
	// Micros (the zero value, so every table created before granularity
	// existed) accepts any timestamp and assigns server timestamps in µs,
	// strictly increasing per tablet.
	Micros Granularity = iota
	// Millis truncates server timestamps to whole milliseconds (multiples
	// of 1000 µs) and refuses a client timestamp that is not one, as Cloud
	// Bigtable's millisecond tables do.
	Millis
)

func (g Granularity) String() string {
	if g == Millis {
		return "millisecond"
	}
	return "microsecond"
}

// Schema is a table's column families and timestamp granularity.
type Schema struct {
	Families    map[string]FamilyPolicy
	Granularity Granularity
}

// compression returns the codec of each family's pages: the family's,
// else (families absent from the schema, and "" for row tombstones)
// tsfile.DefaultCompression.
func (s *Schema) compression() func(family string) tsfile.Compression {
	codecs := make(map[string]tsfile.Compression, len(s.Families))
	for name, f := range s.Families {
		codecs[name] = f.Compression
	}
	return func(family string) tsfile.Compression { return codecs[family] }
}

// Errors of the tablet engine. The server maps ErrUnknownFamily and
// ErrInvalidMutation to InvalidArgument.
var (
	ErrUnknownFamily   = errors.New("tablet: unknown column family")
	ErrInvalidMutation = errors.New("tablet: invalid mutation")
	ErrClosed          = errors.New("tablet: closed")
	ErrNoStandby       = errors.New("tablet: no standby buffer")
	ErrUnknownFile     = errors.New("tablet: TSFile not in the tablet's read set")
)

// validate checks m against the schema. assigned says whether ServerTime
// must already have been replaced; anyFamily accepts families absent from
// the schema.
func (s *Schema) validate(m *mutation.RowMutation, assigned, anyFamily bool) error {
	if len(m.Row) == 0 {
		return fmt.Errorf("%w: empty row key", ErrInvalidMutation)
	}
	if len(m.Ops) == 0 {
		return fmt.Errorf("%w: row %q has no operations", ErrInvalidMutation, m.Row)
	}
	for i := range m.Ops {
		op := &m.Ops[i]
		switch op.Kind {
		case mutation.SetCell, mutation.DeleteColumn, mutation.DeleteFamily, mutation.MergeCell:
			f, ok := s.Families[op.Family]
			if !ok && !anyFamily {
				return fmt.Errorf("%w %q (op %d on row %q)", ErrUnknownFamily, op.Family, i, m.Row)
			}
			// A logged record (anyFamily: replay, internal writes) applies
			// whatever the family is now.
			if ok && !anyFamily && op.Kind == mutation.SetCell && f.Aggregate != NoAggregate {
				return fmt.Errorf("%w: op %d sets a cell of aggregate family %q (%v) on row %q; write it with AddToCell or MergeToCell",
					ErrInvalidMutation, i, op.Family, f.Aggregate, m.Row)
			}
			if ok && !anyFamily && op.Kind == mutation.MergeCell && f.Aggregate == NoAggregate {
				return fmt.Errorf("%w: op %d adds to a cell of family %q on row %q, which is not an aggregate family",
					ErrInvalidMutation, i, op.Family, m.Row)
			}
		case mutation.DeleteRow:
		default:
			return fmt.Errorf("%w: op %d has kind %v", ErrInvalidMutation, i, op.Kind)
		}
		if op.Kind == mutation.MergeCell {
			if len(op.Value) != OperandLen {
				return fmt.Errorf("%w: op %d on family %q of row %q has a %d-byte operand, not an 8-byte big-endian int64",
					ErrInvalidMutation, i, op.Family, m.Row, len(op.Value))
			}
			if op.Timestamp == mutation.ServerTime {
				return fmt.Errorf("%w: op %d on aggregate family %q of row %q has no timestamp (an aggregate cell's timestamp is the client's)",
					ErrInvalidMutation, i, op.Family, m.Row)
			}
		}
		ts := op.Timestamp
		if ts == mutation.ServerTime {
			if assigned {
				return fmt.Errorf("%w: op %d has no timestamp assigned", ErrInvalidMutation, i)
			}
		} else if ts < 0 {
			return fmt.Errorf("%w: op %d has timestamp %d", ErrInvalidMutation, i, ts)
		} else if !assigned && s.Granularity == Millis && (op.Kind == mutation.SetCell || op.Kind == mutation.MergeCell) && ts%1000 != 0 {
			// Only a client's timestamp, before the log: a logged record
			// (replay, Validate) keeps the timestamps it carries.
			return fmt.Errorf("%w: timestamp granularity mismatch: op %d of row %q has timestamp %d µs, not a multiple of 1000 (the table has millisecond granularity)",
				ErrInvalidMutation, i, m.Row, ts)
		}
		if op.Kind == mutation.DeleteColumn && op.End != 0 && ts == mutation.ServerTime {
			return fmt.Errorf("%w: op %d deletes up to %d from a server-assigned start", ErrInvalidMutation, i, op.End)
		}
		if op.Kind == mutation.DeleteColumn && op.End != 0 && ts != mutation.ServerTime && op.End <= ts {
			return fmt.Errorf("%w: op %d deletes the empty range [%d, %d)", ErrInvalidMutation, i, ts, op.End)
		}
		if op.Kind != mutation.SetCell && op.Kind != mutation.MergeCell && len(op.Value) != 0 {
			return fmt.Errorf("%w: op %d (%v) carries a value", ErrInvalidMutation, i, op.Kind)
		}
	}
	return nil
}
