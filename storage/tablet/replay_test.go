package tablet

import (
	"context"
	"testing"
	"time"

	"bighive/storage/blockstore"
	"bighive/storage/mutation"
)

var replaySchema = Schema{Families: map[string]FamilyPolicy{"f": {}, "g": {}}}

// latest returns the newest visible value of every column of row, keyed
// "family:qualifier".
func latest(t *testing.T, tb *Tablet, row string) map[string]string {
	t.Helper()
	r, found, err := tb.Get(context.Background(), []byte(row), ReadOptions{MaxVersions: 1})
	if err != nil {
		t.Fatalf("get %q: %v", row, err)
	}
	out := map[string]string{}
	if found {
		for _, c := range r.Cells {
			out[c.Family+":"+string(c.Qualifier)] = string(c.Value)
		}
	}
	return out
}

// TestReplayObservesRecords: a replayed record (from a log, a recovery file
// or a child log) moves the tablet's clock past its ops' timestamps, which
// the writing server's tablet clock may have put ahead of the wall time the
// log stamped on the record, and its write sequence past the record's; and
// replaying it twice is replaying it once.
func TestReplayObservesRecords(t *testing.T) {
	tb, err := Open(Options{ID: "t", Schema: replaySchema, Store: newStore(t),
		Now: func() time.Time { return time.UnixMicro(10) }})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	rec := mutation.RowMutation{Seq: 41, Row: []byte("r"), Ops: []mutation.Op{
		{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: 9_000, Value: []byte("old")},
		{Kind: mutation.DeleteColumn, Family: "g", Qualifier: []byte("q"), Timestamp: 0, End: 12_000},
	}}
	for range 2 {
		if err := tb.Replay(&rec, 20); err != nil {
			t.Fatal(err)
		}
	}
	m := mutation.RowMutation{Row: []byte("r"), Ops: []mutation.Op{{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("new")}}}
	if err := tb.AssignTimestamps(&m); err != nil {
		t.Fatal(err)
	}
	if ts := m.Ops[0].Timestamp; ts < 12_000 {
		t.Fatalf("server timestamp %d after replay is not above the replayed ops' (9000, a delete up to 12000)", ts)
	}
	if m.Seq <= 41 {
		t.Fatalf("write sequence %d after replay is not above the replayed record's 41", m.Seq)
	}
	if err := tb.Apply(&m); err != nil {
		t.Fatal(err)
	}
	if got := latest(t, tb, "r"); got["f:q"] != "new" {
		t.Fatalf("row after replay and a new write = %v, want f:q=new", got)
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
	store := newStore(t)
	tb, err := Open(Options{ID: "t", Schema: replaySchema, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	var logged []mutation.RowMutation
	write := func(row string, op mutation.Op) {
		t.Helper()
		logged = append(logged, writeRow(t, tb, row, op))
	}
	write("r", mutation.Op{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("deleted")})
	write("r", mutation.Op{Kind: mutation.DeleteRow})
	write("s", mutation.Op{Kind: mutation.SetCell, Family: "f", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("live")})
	info := flushActive(t, tb)
	compacted, err := tb.CompactFiles(ctx, []blockstore.BlockRef{info.FooterRef()}, true)
	if err != nil {
		t.Fatal(err)
	}
	if compacted.Entries != 1 || compacted.MaxSeq != info.MaxSeq {
		t.Fatalf("major compaction kept %d entries up to sequence %d, want 1 (s) of sequence %d", compacted.Entries, compacted.MaxSeq, info.MaxSeq)
	}
	tb.Close()

	tb, err = Open(Options{ID: "t", Schema: replaySchema, Store: store, Files: []FileRef{{Footer: compacted.FooterRef()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if err := tb.Replay(&logged[0], 0); err != nil {
		t.Fatal(err)
	}
	if got := latest(t, tb, "r"); len(got) != 0 {
		t.Fatalf("deleted row after replaying its put = %v, want nothing", got)
	}
	for i := range logged {
		if err := tb.Replay(&logged[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := latest(t, tb, "r"); len(got) != 0 {
		t.Fatalf("deleted row after replay = %v, want nothing", got)
	}
	if got := latest(t, tb, "s"); got["f:q"] != "live" {
		t.Fatalf("row s after replay = %v, want f:q=live", got)
	}
}
