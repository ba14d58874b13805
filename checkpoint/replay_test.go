package checkpoint_test

import (
	"testing"
	"time"

	"bighive/blockstore"
	"bighive/checkpoint"
	"bighive/internal/mutation"
	"bighive/tablet"
	"bighive/wal"
)

// TestReplayObservesRecords: a replayed record (from a log, a recovery file
// or a split log) moves the tablet's clock past its ops' timestamps, which
// the writing server's tablet clock may have put ahead of the wall time the
// log stamped on the record, and its write sequence past the record's; and
// replaying it twice is replaying it once.
func TestReplayObservesRecords(t *testing.T) {
	mgr, _, err := blockstore.Open(blockstore.Options{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	tb, err := tablet.Open(tablet.Options{ID: "t", Schema: testSchema, Store: mgr, Logger: quiet,
		Now: func() time.Time { return time.UnixMicro(10) }})
	if err != nil {
		t.Fatal(err)
	}
	e := checkpoint.NewEngine(tb, 1)
	defer e.Close()
	rec := wal.Record{Seq: 3, Timestamp: 20, TabletID: "t", Mutation: mutation.RowMutation{Seq: 41, Row: []byte("r"), Ops: []mutation.Op{
		{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 9_000, Value: []byte("old")},
		{Kind: mutation.DeleteColumn, Family: "g", Qualifier: []byte("q"), Timestamp: 0, End: 12_000},
	}}}
	for range 2 {
		if err := e.Replay(&rec); err != nil {
			t.Fatal(err)
		}
	}
	m := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("new")}}}
	if err := e.AssignTimestamps(&m); err != nil {
		t.Fatal(err)
	}
	if ts := m.Ops[0].Timestamp; ts < 12_000 {
		t.Fatalf("server timestamp %d after replay is not above the replayed ops' (9000, a delete up to 12000)", ts)
	}
	if m.Seq <= 41 {
		t.Fatalf("write sequence %d after replay is not above the replayed record's 41", m.Seq)
	}
	if err := e.Apply(&m); err != nil {
		t.Fatal(err)
	}
	got, err := readRow(e, []byte("r"))
	if err != nil || got["f:q"] != "new" {
		t.Fatalf("row after replay and a new write = %v %v, want f:q=new", got, err)
	}
}
