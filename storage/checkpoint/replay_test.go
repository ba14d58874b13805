package checkpoint_test

import (
	"context"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/mutation"
	"bighive/storage/tablet"
	"bighive/storage/wal"
)

// TestReplayObservesRecords: a replayed record (from a log, a recovery file
// or a child log) moves the tablet's clock past its ops' timestamps, which
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
	e := checkpoint.NewTabletLoad(tb, 1)
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

// TestReplaySkipsRecordsInFiles: a put, a delete of its row and a later
// write to another row are flushed; a major compaction of every file drops
// the put and purges the row tombstone. Replaying the put's logged record
// alone into the tablet opened again over the compacted file must not
// bring the deleted cell back: the record is at or below the files'
// largest sequence, so it is in them already. (Today's logs that name the
// put also name the delete; the skip keeps purging safe without relying on
// that.) Replaying every record changes nothing either.
func TestReplaySkipsRecordsInFiles(t *testing.T) {
	ctx := context.Background()
	mgr, _, err := blockstore.Open(blockstore.Options{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	tb, err := tablet.Open(tablet.Options{ID: "t", Schema: testSchema, Store: mgr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e := checkpoint.NewTabletLoad(tb, 1)
	var logged []wal.Record
	write := func(row string, op mutation.Op) {
		t.Helper()
		m := mutation.RowMutation{Row: []byte(row), Ops: []mutation.Op{op}}
		if err := e.AssignTimestamps(&m); err != nil {
			t.Fatal(err)
		}
		if err := e.Apply(&m); err != nil {
			t.Fatal(err)
		}
		logged = append(logged, wal.Record{Seq: uint64(len(logged) + 1), TabletID: "t", Mutation: m})
	}
	write("r", mutation.Op{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("deleted")})
	write("r", mutation.Op{Kind: mutation.DeleteRow})
	write("s", mutation.Op{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("live")})
	if !e.SwapBuffers() {
		t.Fatal("nothing to swap")
	}
	info, err := e.FlushStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.InstallFlushed(info); err != nil {
		t.Fatal(err)
	}
	compacted, err := e.CompactFiles(ctx, []blockstore.BlockRef{info.FooterRef()}, true)
	if err != nil {
		t.Fatal(err)
	}
	if compacted.Entries != 1 || compacted.MaxSeq != info.MaxSeq {
		t.Fatalf("major compaction kept %d entries up to sequence %d, want 1 (s) of sequence %d", compacted.Entries, compacted.MaxSeq, info.MaxSeq)
	}
	e.Close()

	tb, err = tablet.Open(tablet.Options{ID: "t", Schema: testSchema, Store: mgr, Logger: quiet,
		Files: []tablet.FileRef{{Footer: compacted.FooterRef()}}})
	if err != nil {
		t.Fatal(err)
	}
	e = checkpoint.NewTabletLoad(tb, 2)
	defer e.Close()
	if err := e.Replay(&logged[0]); err != nil {
		t.Fatal(err)
	}
	if got, err := readRow(e, []byte("r")); err != nil || len(got) != 0 {
		t.Fatalf("deleted row after replaying its put = %v %v, want nothing", got, err)
	}
	for i := range logged {
		if err := e.Replay(&logged[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := readRow(e, []byte("r")); err != nil || len(got) != 0 {
		t.Fatalf("deleted row after replay = %v %v, want nothing", got, err)
	}
	if got, err := readRow(e, []byte("s")); err != nil || got["f:q"] != "live" {
		t.Fatalf("row s after replay = %v %v, want f:q=live", got, err)
	}
}
