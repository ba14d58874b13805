package client

import (
	"encoding/binary"

	pb "bighive/proto/bighivepb"
)

// ServerTime as a Set's timestamp asks the tserver to assign the cell's
// timestamp (strictly increasing per tablet; in a table of
// GranularityMillis, the tserver's clock truncated to whole milliseconds,
// shared by the writes of one millisecond). A mutation holding such a Set
// is not idempotent, so it is retried only when the failure is known to
// have happened before the tserver logged it.
const ServerTime int64 = -1

// Mutation is a list of sets and deletes applied atomically to one row by
// Table.Apply or Table.ApplyBulk. A Mutation is not safe for concurrent
// modification; once applied it may be applied again (to other rows too).
type Mutation struct {
	ops        []*pb.Mutation
	serverTime bool
	// merges: the mutation holds an AddToCell or MergeToCell, which
	// applied twice counts twice.
	merges bool

	// A conditional mutation (NewCondMutation) has no operations of its
	// own: cond picks mtrue or mfalse on the tserver.
	isConditional bool
	cond          Filter
	mtrue, mfalse *Mutation
}

// NewMutation returns an empty mutation.
func NewMutation() *Mutation { return &Mutation{} }

// Set writes value to the cell (family, qualifier, ts); ts is in
// microseconds since the Unix epoch, or ServerTime. Writing an existing
// (row, column, timestamp) again overwrites its value.
func (m *Mutation) Set(family, qualifier string, ts int64, value []byte) {
	if ts == ServerTime {
		m.serverTime = true
	}
	m.ops = append(m.ops, &pb.Mutation{Mutation: &pb.Mutation_SetCell_{SetCell: &pb.Mutation_SetCell{
		Family: family, Qualifier: []byte(qualifier), TimestampMicros: ts, Value: value,
	}}})
}

// AddToCell adds value to the cell (family, qualifier, ts) of an
// aggregate family: the family's aggregator (sum, min or max) folds it
// with what the cell holds. ts is in microseconds and must be given (not
// ServerTime); in a table of GranularityMillis, a whole millisecond. A
// mutation holding one is not idempotent, so it is retried only when the
// failure is known to have happened before the tserver logged it.
func (m *Mutation) AddToCell(family, qualifier string, ts int64, value int64) {
	m.MergeToCell(family, qualifier, ts, binary.BigEndian.AppendUint64(nil, uint64(value)))
}

// MergeToCell merges state, an aggregate cell's value (an 8-byte
// big-endian int64, as a read returns it), into the cell (family,
// qualifier, ts) of an aggregate family; for the int64 aggregators it is
// AddToCell of the decoded value. Not idempotent, as AddToCell.
func (m *Mutation) MergeToCell(family, qualifier string, ts int64, state []byte) {
	m.merges = true
	m.ops = append(m.ops, &pb.Mutation{Mutation: &pb.Mutation_MergeToCell_{MergeToCell: &pb.Mutation_MergeToCell{
		Family: family, Qualifier: []byte(qualifier), TimestampMicros: ts, Operand: state,
	}}})
}

// DeleteCellsInColumn deletes every version of one column.
func (m *Mutation) DeleteCellsInColumn(family, qualifier string) {
	m.ops = append(m.ops, &pb.Mutation{Mutation: &pb.Mutation_DeleteFromColumn_{DeleteFromColumn: &pb.Mutation_DeleteFromColumn{
		Family: family, Qualifier: []byte(qualifier),
	}}})
}

// DeleteTimestampRange deletes the versions of one column whose timestamp
// is in [start, end) microseconds; end 0 is unbounded.
func (m *Mutation) DeleteTimestampRange(family, qualifier string, start, end int64) {
	m.ops = append(m.ops, &pb.Mutation{Mutation: &pb.Mutation_DeleteFromColumn_{DeleteFromColumn: &pb.Mutation_DeleteFromColumn{
		Family: family, Qualifier: []byte(qualifier),
		TimeRange: &pb.TimestampRange{StartMicros: start, EndMicros: end},
	}}})
}

// DeleteCellsInFamily deletes every cell of one column family.
func (m *Mutation) DeleteCellsInFamily(family string) {
	m.ops = append(m.ops, &pb.Mutation{Mutation: &pb.Mutation_DeleteFromFamily_{DeleteFromFamily: &pb.Mutation_DeleteFromFamily{
		Family: family,
	}}})
}

// DeleteRow deletes every cell of the row.
func (m *Mutation) DeleteRow() {
	m.ops = append(m.ops, &pb.Mutation{Mutation: &pb.Mutation_DeleteFromRow_{DeleteFromRow: &pb.Mutation_DeleteFromRow{}}})
}

// idempotent reports whether applying m twice gives the same state as
// once: true unless a Set asks for ServerTime, m merges into an aggregate
// cell or m is conditional (its first application may change what its
// predicate sees).
func (m *Mutation) idempotent() bool { return !m.serverTime && !m.merges && !m.isConditional }

// proto is m applied to row as a wire message. The operations are shared,
// not copied; the client never modifies them.
func (m *Mutation) proto(row string) *pb.RowMutation {
	return &pb.RowMutation{RowKey: []byte(row), Mutations: m.ops}
}
